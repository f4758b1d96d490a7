//! Parallel ops called from the main thread (as Python calls them) after a gap: each of 80
//! rounds spins `GAP` microseconds (the caller busy, as Python is between ops), then times one op on a
//! (`ROWS`, 2048) f32 array. Prints the 10th percentile and the median, and how many rounds ran
//! over 1.5x the third fastest: a round whose pool helper missed the op (it slept and woke
//! late, or on the caller's core) runs at one thread's speed.
//!
//!     GAP=3000 ROWS=1024 cargo run --release -p quill --example ops_after_gap
use quill::{BinaryOp, DType, NDArray, UnaryOp};
use std::time::{Duration, Instant};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> quill::Result<()> {
    let (gap, rows) = (env("GAP", 200), env("ROWS", 1024) as usize);
    let a = NDArray::randn(&[rows, 2048], 1, DType::F32)?;
    let b = NDArray::randn(&[rows, 2048], 2, DType::F32)?;
    let at = a.permute(&[1, 0])?;
    println!(
        "gap {gap} us, ({rows}, 2048) f32, {} threads",
        rayon::current_num_threads()
    );
    for name in ["exp", "add", "sum over axis 1", "compact a transpose"] {
        let mut t = Vec::new();
        for _ in 0..80 {
            let w = Instant::now();
            while w.elapsed() < Duration::from_micros(gap) {
                std::hint::spin_loop();
            }
            let s = Instant::now();
            let r = match name {
                "exp" => a.unary(UnaryOp::Exp)?,
                "add" => a.binary(BinaryOp::Add, &b)?,
                "sum over axis 1" => a.sum(Some(&[1]), false)?,
                _ => at.compact().unwrap(),
            };
            t.push(s.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(r);
        }
        t.sort_by(f64::total_cmp);
        let slow = t.iter().filter(|&&x| x > 1.5 * t[2]).count();
        println!(
            "{name}: p10 {:.0} us, median {:.0} us, {slow} / 80 rounds over 1.5x the third fastest",
            t[8], t[40]
        );
    }
    Ok(())
}
