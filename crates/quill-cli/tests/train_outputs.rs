//! The training run's files under hostile conditions (issue 48's reliability suite): outputs
//! that would overwrite one another or an input are refused before training, leaving the target
//! unchanged; a metrics.csv that a crash left missing, empty, short or ahead is rebuilt from the
//! checkpoint on --resume (a disagreeing one kept as .bak, never silently cut); `kill -9` at
//! varied moments of a run that saves every epoch never costs the CSV an epoch the checkpoint
//! has; temporary files of dead writers are removed, a live writer's are not.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A copy of data/mnist (the tests must never risk the real files).
fn mnist_copy(name: &str) -> PathBuf {
    let d = scratch("outputs", name);
    for e in std::fs::read_dir(Path::new(ROOT).join("data/mnist")).unwrap() {
        let e = e.unwrap();
        if e.path().is_file() {
            std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
        }
    }
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs with `extra` and asserts the refusal names `says` and left `target` as it was.
fn refused_unchanged(extra: &[&str], target: &Path, says: &[&str]) {
    let before = std::fs::read(target).ok();
    let mut args = vec!["--limit", "64", "--epochs", "1"];
    args.extend_from_slice(extra);
    assert_refused(&quill(&args), says);
    assert_eq!(
        std::fs::read(target).ok(),
        before,
        "{} changed",
        target.display()
    );
}

#[test]
fn outputs_that_collide_are_refused_before_training() {
    let out = scratch("outputs", "collide");
    let csv = out.join("metrics.csv");
    std::fs::write(&csv, "sentinel csv\n").unwrap();
    refused_unchanged(
        &["--out", s(&out), "--checkpoint", s(&csv)],
        &csv,
        &["--checkpoint", "metrics.csv", "--out"],
    );
    // Not there yet, and spelled another way.
    let png = out.join("curves.png");
    let odd = format!("{}/sub/../curves.png", s(&out));
    std::fs::create_dir_all(out.join("sub")).unwrap();
    refused_unchanged(
        &["--out", s(&out), "--checkpoint", &odd],
        &png,
        &["--checkpoint", "curves.png"],
    );
    assert!(!png.exists());
    let svg = out.join("curves.svg");
    std::fs::write(&svg, "<svg/>").unwrap();
    refused_unchanged(
        &["--out", s(&out), "--checkpoint", s(&svg)],
        &svg,
        &["curves.svg"],
    );
    // A directory is not a checkpoint file.
    refused_unchanged(
        &["--out", s(&out), "--checkpoint", s(&out.join("sub"))],
        &csv,
        &["--checkpoint", "is a directory"],
    );
}

#[test]
fn outputs_that_would_overwrite_the_data_are_refused() {
    let data = mnist_copy("data");
    let out = scratch("outputs", "data-out");
    let labels = data.join("t10k-labels-idx1-ubyte.gz");
    let d = ["--data", s(&data), "--out", s(&out)];
    let with = |extra: &[&'static str]| {
        let mut v: Vec<String> = d.iter().map(|x| x.to_string()).collect();
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let run = |args: Vec<String>, target: &Path, says: &[&str]| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        refused_unchanged(&a, target, says);
    };
    let mut a = with(&["--checkpoint"]);
    a.push(s(&labels).into());
    run(
        a,
        &labels,
        &["--checkpoint", "--data", "t10k-labels-idx1-ubyte.gz"],
    );
    // Through a symlink and through a hard link.
    let link = out.join("via-symlink.safetensors");
    std::os::unix::fs::symlink(&labels, &link).unwrap();
    let mut a = with(&["--checkpoint"]);
    a.push(s(&link).into());
    run(a, &labels, &["t10k-labels-idx1-ubyte.gz"]);
    let hard = out.join("via-hardlink.safetensors");
    std::fs::hard_link(&labels, &hard).unwrap();
    let mut a = with(&["--checkpoint"]);
    a.push(s(&hard).into());
    run(a, &labels, &["t10k-labels-idx1-ubyte.gz"]);
    // --out inside the data directory, which holds a file called metrics.csv.
    let theirs = data.join("metrics.csv");
    std::fs::write(&theirs, "their file\n").unwrap();
    let args = vec![
        "--data".into(),
        s(&data).to_string(),
        "--out".into(),
        s(&data).to_string(),
        "--checkpoint".into(),
        s(&out.join("ck.safetensors")).to_string(),
    ];
    run(args, &theirs, &["--out", "metrics.csv", "--data"]);
}

/// The checkpoint's epoch and history lines (its first five columns, as `csv_figures` gives).
fn checkpoint_history(dir: &Path) -> Option<(usize, Vec<String>)> {
    let ck = quill::io::load_checkpoint(&dir.join("checkpoint.safetensors")).ok()?;
    let epoch = ck.metadata["epoch"].parse().unwrap();
    let lines = ck.metadata["history"]
        .lines()
        .map(|l| l.split(',').take(5).collect::<Vec<_>>().join(","))
        .collect();
    Some((epoch, lines))
}

/// Stands for "this run's own CSV cut to its first epoch" in the cases below.
const BEHIND: &str = "(the run's first epoch)";

#[test]
fn a_broken_metrics_csv_is_rebuilt_on_resume() {
    let reference = scratch("outputs", "csv-ref");
    run_ok(&small(&reference, 3));
    let want = csv_figures(&reference);
    for (case, damage) in [
        ("missing", None),
        ("empty", Some(String::new())),
        ("short", Some("epoch,train_loss\n1,0.5".to_string())),
        // One epoch behind, as a crash between checkpoint and CSV leaves it: a prefix of the
        // rebuilt file, so there is nothing to keep.
        ("behind", Some(BEHIND.to_string())),
        (
            "ahead",
            Some("epoch,x\n1,1,1,1,1,1,1\n2,2,2,2,2,2,2\n3,3,3,3,3,3,3\n".to_string()),
        ),
    ] {
        let out = scratch("outputs", &format!("csv-{case}"));
        run_ok(&small(&out, 2));
        let csv = out.join("metrics.csv");
        let own_first_epoch: String = std::fs::read_to_string(&csv)
            .unwrap()
            .lines()
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect();
        let damage = damage.map(|t| if t == BEHIND { own_first_epoch } else { t });
        match &damage {
            None => std::fs::remove_file(&csv).unwrap(),
            Some(text) => std::fs::write(&csv, text).unwrap(),
        }
        let said = run_ok(&[small(&out, 3), vec!["--resume".into()]].concat());
        assert!(said.contains("rebuilt"), "{case}: {said}");
        assert_eq!(csv_figures(&out), want, "{case}");
        // Whatever the file held before is kept, not cut.
        let bak = out.join("metrics.csv.bak");
        match &damage {
            Some(text) if !text.is_empty() && case != "behind" => {
                assert_eq!(&std::fs::read_to_string(&bak).unwrap(), text, "{case}")
            }
            _ => assert!(!bak.exists(), "{case}"),
        }
    }
}

#[test]
fn kill_9_during_training_never_loses_an_epoch() {
    let out = scratch("outputs", "kill");
    // 2 steps per epoch on 256 samples: an epoch (train, evaluate, save 14 MB, CSV, plots)
    // takes a fraction of a second, so the kills land in every phase of it, saves included.
    let mut args = small(&out, 1000);
    args.extend(["--threads".into(), "2".into()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut finished = 0;
    // Each run is killed a varied time after it reports an epoch, which is when that epoch's
    // checkpoint, CSV and plots are being written: the kills land in and between the saves.
    for (round, ms) in [0u64, 25, 60, 120, 250].into_iter().enumerate() {
        let before = checkpoint_history(&out).map_or(0, |h| h.0);
        let mut child = command(&a)
            .args(if before > 0 {
                &["--resume"][..]
            } else {
                &[][..]
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The second epoch line of this run: one save of this run is done by then.
        let lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        let reported = lines
            .map_while(Result::ok)
            .filter(|l| l.starts_with("epoch "))
            .nth(1);
        assert!(reported.is_some(), "round {round}: the run ended early");
        std::thread::sleep(Duration::from_millis(ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let (epoch, history) = checkpoint_history(&out).expect("a checkpoint after two epochs");
        assert!(epoch >= before, "round {round}: the checkpoint went back");
        // Resume to one epoch past the checkpoint: it must succeed and leave a CSV with every
        // epoch, agreeing with the checkpoint's history.
        let mut resume = small(&out, epoch + 1);
        resume.extend(["--resume".into(), "--threads".into(), "2".into()]);
        run_ok(&resume);
        let epochs = csv_epochs(&out);
        assert_eq!(epochs, (1..=epoch + 1).collect::<Vec<_>>(), "round {round}");
        assert_eq!(csv_figures(&out)[1..=epoch], history[..], "round {round}");
        finished += 1;
        // The killed writer's temporary files are gone after the resumed run's saves.
        let stale: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(stale.is_empty(), "round {round}: {stale:?}");
    }
    assert!(
        finished >= 3,
        "only {finished} rounds had a checkpoint to resume"
    );
}

#[test]
fn dead_writers_temp_files_are_removed_live_ones_kept() {
    let out = scratch("outputs", "stale");
    run_ok(&small(&out, 1));
    // A process that has exited: its PID is free (and not reused this quickly).
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let dead = out.join(format!(".checkpoint.safetensors.tmp-{}-0", gone.id()));
    let dead_csv = out.join(format!(".metrics.csv.tmp-{}-3", gone.id()));
    // This test process is alive, so its file must stay.
    let live = out.join(format!(
        ".checkpoint.safetensors.tmp-{}-0",
        std::process::id()
    ));
    for f in [&dead, &dead_csv, &live] {
        std::fs::write(f, vec![0u8; 1 << 16]).unwrap();
    }
    run_ok(&[small(&out, 2), vec!["--resume".into()]].concat());
    assert!(
        !dead.exists() && !dead_csv.exists(),
        "stale temporary files left"
    );
    assert!(live.exists(), "a live writer's temporary file was removed");
}
