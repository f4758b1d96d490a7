//! A NumPy process that runs the same cases as quill, driven line by line so that quill and
//! NumPy alternate within one run (the machine is noisy; only same-run ratios mean anything).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub version: String,
}

impl Peer {
    /// Starts `script` under the first Python that imports NumPy: `$QUILL_BENCH_PYTHON`,
    /// `.bench-venv/bin/python`, then `python3`. `None` (with the reason printed) when none does.
    pub fn start(script: &str) -> Option<Peer> {
        let mut candidates = Vec::new();
        if let Ok(p) = std::env::var("QUILL_BENCH_PYTHON") {
            candidates.push(p);
        }
        candidates.push(".bench-venv/bin/python".into());
        candidates.push("python3".into());
        for py in candidates {
            let spawned = Command::new(&py)
                .args(["-c", script])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn();
            let Ok(mut child) = spawned else { continue };
            let stdin = child.stdin.take()?;
            let mut stdout = BufReader::new(child.stdout.take()?);
            let mut line = String::new();
            if stdout.read_line(&mut line).is_ok() && line.starts_with("ready ") {
                let version = line.trim_start_matches("ready ").trim().to_string();
                return Some(Peer {
                    child,
                    stdin,
                    stdout,
                    version,
                });
            }
            let _ = child.kill();
        }
        eprintln!("no Python with NumPy found (set QUILL_BENCH_PYTHON or make .bench-venv); reporting quill alone");
        None
    }

    /// Runs `case` `reps` times in the peer and returns each rep's seconds.
    pub fn run(&mut self, case: &str, reps: usize) -> Option<Vec<f64>> {
        writeln!(self.stdin, "{case} {reps}").ok()?;
        self.stdin.flush().ok()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).ok()?;
        line.split_whitespace().map(|x| x.parse().ok()).collect()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
