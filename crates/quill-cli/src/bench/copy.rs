//! `quill bench copy`: the strided copy kernels on a (256, 256, 256) f32 array against NumPy:
//! compact of a permuted view, compact of a stepped/reversed view, a contiguous copy and a fill.
//! GB/s counts bytes read plus bytes written. quill's figures are in steady state (the buffer
//! pool hands the previous output's memory to the next); `fresh` rows turn the pool off to show
//! the first-touch page-fault cost as well.

use super::{median, peer::Peer};
use quill::{s, DType, NDArray};
use std::time::Instant;

struct Case {
    name: &'static str,
    what: &'static str,
    bytes: f64,
    run: Box<dyn Fn()>,
    /// Measure with the buffer pool off too.
    fresh: bool,
}

pub fn run(args: &[String]) -> Result<(), String> {
    let rounds = super::rounds_only("copy", args, 5)?;
    let reps = 3;
    let a = NDArray::arange(0.0, (256 * 256 * 256) as f64, 1.0, DType::F32)
        .and_then(|a| a.reshape(&[256, 256, 256]))
        .map_err(|e| e.to_string())?;
    let n = a.numel() as f64 * 4.0;
    let perm = a.permute(&[2, 0, 1]).map_err(|e| e.to_string())?;
    let stepped = a
        .slice(&s![..;2, 1..;3, ..;-1])
        .map_err(|e| e.to_string())?;
    let stepped_bytes = stepped.numel() as f64 * 4.0;
    let cases = vec![
        Case {
            name: "compact_permuted",
            what: "compact of (256,256,256).permute(2,0,1)",
            bytes: 2.0 * n,
            run: Box::new(move || drop(perm.compact())),
            fresh: true,
        },
        Case {
            name: "compact_stepped",
            what: "compact of a[::2, 1::3, ::-1]",
            bytes: 2.0 * stepped_bytes,
            run: Box::new(move || drop(stepped.compact())),
            fresh: false,
        },
        Case {
            name: "copy_contiguous",
            what: "contiguous copy (256,256,256)",
            bytes: 2.0 * n,
            run: Box::new({
                let a = a.clone();
                move || drop(a.deep_copy())
            }),
            fresh: true,
        },
        Case {
            name: "fill",
            what: "fill (256,256,256) in place",
            bytes: n,
            run: Box::new(move || a.assign_scalar(1.0).expect("fill")),
            fresh: false,
        },
    ];

    let mut peer = Peer::start(include_str!("numpy_peer.py"));
    crate::report::heading(format!(
        "quill bench copy: f32, {} rayon threads, {rounds} rounds x {reps} reps, medians; peer: {}",
        rayon_threads(),
        peer.as_ref()
            .map_or("none".to_string(), |p| format!("NumPy {}", p.version))
    ));
    let table = crate::report::Table::new(
        "copy",
        &["case", "quill GB/s", "NumPy GB/s", "quill / NumPy"],
    );
    for c in &cases {
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        (c.run)();
        if let Some(p) = peer.as_mut() {
            p.run(c.name, 1);
        }
        for _ in 0..rounds {
            for _ in 0..reps {
                let t = Instant::now();
                (c.run)();
                ours.push(t.elapsed().as_secs_f64());
            }
            if let Some(p) = peer.as_mut() {
                theirs.extend(p.run(c.name, reps).unwrap_or_default());
            }
        }
        report(&table, c.what, c.bytes, &mut ours, &mut theirs);
        if c.fresh {
            quill::set_buffer_pool(false);
            let mut cold = Vec::new();
            for _ in 0..rounds * reps {
                let t = Instant::now();
                (c.run)();
                cold.push(t.elapsed().as_secs_f64());
            }
            quill::set_buffer_pool(true);
            report(
                &table,
                &format!("{} (fresh output, pool off)", c.what),
                c.bytes,
                &mut cold,
                &mut theirs.clone(),
            );
        }
    }
    Ok(())
}

fn report(
    table: &crate::report::Table,
    what: &str,
    bytes: f64,
    ours: &mut [f64],
    theirs: &mut [f64],
) {
    let q = bytes / median(ours) / 1e9;
    if theirs.is_empty() {
        table.line(format!("| {what} | {q:.2} | - | - |"));
    } else {
        let p = bytes / median(theirs) / 1e9;
        table.line(format!("| {what} | {q:.2} | {p:.2} | {:.1}x |", q / p));
    }
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
