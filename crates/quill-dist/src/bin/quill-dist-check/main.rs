//! `quill-dist-check`: the programs the MPI integration tests launch under `mpirun` (each rank
//! runs one). `collectives` checks every collective against a naive computation over all ranks'
//! inputs (each rank can regenerate the others'); `train OUT STEPS BATCH [ACCUM]` writes rank
//! 0's parameters after a data-parallel toy run, each step accumulated over ACCUM micro-batches
//! (default 1; tests compare -np 1 with -np 2); `fault hang|exit`
//! makes rank 1 hang or die while rank 0 waits in an all-reduce, which must end the job within
//! the timeout with a clear message; `bench [ROUNDS]` times all-reduce for
//! scripts/bench-allreduce.sh.

mod toy;

use quill_dist::{Communicator, DdpOptions, DistError, Mpi, ReduceOp};
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let comm = match Mpi::init() {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("quill-dist-check: {e}");
            std::process::exit(2);
        }
    };
    let result = match args.first().map(String::as_str) {
        Some("collectives") => collectives(comm.as_ref()),
        Some("train") => train(comm.clone(), &args[1..]),
        Some("bench") => bench(comm.as_ref(), args.get(1).and_then(|r| r.parse().ok()).unwrap_or(20)),
        Some("fault") => fault(comm.as_ref(), args.get(1).map(String::as_str)),
        _ => Err(
            "usage: quill-dist-check collectives | train OUT STEPS BATCH [ACCUM] | bench [ROUNDS] | fault hang|exit".into(),
        ),
    };
    match result {
        Ok(()) => println!("rank {}: ok", comm.rank()),
        Err(e) => {
            let msg = format!("rank {} failed: {e}", comm.rank());
            comm.abort(1, &msg)
        }
    }
}

/// Rank `r`'s test input of length `n`.
fn input(r: usize, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7 + r * 13) % 29) as f32 - 14.0) * 0.25 + r as f32)
        .collect()
}

fn check(what: &str, got: &[f32], want: &[f64], tol: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} elements, want {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if (*g as f64 - w).abs() > tol * (1.0 + w.abs()) {
            return Err(format!("{what}: element {i} is {g}, want {w}"));
        }
    }
    Ok(())
}

fn collectives(c: &dyn Communicator) -> Result<(), String> {
    let (rank, world) = (c.rank(), c.world_size());
    for n in [0, 1, 1000, 70_001] {
        let inputs: Vec<Vec<f32>> = (0..world).map(|r| input(r, n)).collect();
        let sum: Vec<f64> = (0..n)
            .map(|i| inputs.iter().map(|x| x[i] as f64).sum())
            .collect();
        let mut buf = input(rank, n);
        c.all_reduce(&mut buf, ReduceOp::Sum)
            .map_err(|e| e.to_string())?;
        check(&format!("all_reduce sum n={n}"), &buf, &sum, 1e-6)?;
        let mean: Vec<f64> = sum.iter().map(|s| s / world as f64).collect();
        let got = c
            .all_reduce_vec(input(rank, n), ReduceOp::Mean)
            .map_err(|e| e.to_string())?;
        check(&format!("all_reduce mean n={n}"), &got, &mean, 1e-6)?;
        let root = world - 1;
        let mut buf = input(rank, n);
        c.broadcast(&mut buf, root).map_err(|e| e.to_string())?;
        let want: Vec<f64> = input(root, n).iter().map(|&x| x as f64).collect();
        check(&format!("broadcast n={n} root={root}"), &buf, &want, 0.0)?;
        let got = c.all_gather(&input(rank, n)).map_err(|e| e.to_string())?;
        let want: Vec<f64> = (0..world)
            .flat_map(|r| input(r, n))
            .map(|x| x as f64)
            .collect();
        check(&format!("all_gather n={n}"), &got, &want, 0.0)?;
        c.barrier().map_err(|e| e.to_string())?;
    }
    // Bad input: a root outside the group, and ranks disagreeing on a broadcast's length;
    // both are errors on every rank, and the job goes on working afterwards.
    match c.broadcast(&mut [0.0], world) {
        Err(DistError::BadRoot { .. }) => {}
        other => {
            return Err(format!(
                "broadcast to root {world}: want BadRoot, got {other:?}"
            ))
        }
    }
    if world > 1 {
        match c.broadcast_vec(vec![1.0; 3 + rank], 0) {
            Err(DistError::SizeMismatch { all, .. }) if all.len() == world => {}
            other => {
                return Err(format!(
                    "unequal broadcast: want SizeMismatch, got {other:?}"
                ))
            }
        }
    }
    // Unequal all-reduce lengths: checked in debug builds only (the hot path).
    if world > 1 && cfg!(debug_assertions) {
        match c.all_reduce_vec(vec![1.0; 3 + rank], ReduceOp::Sum) {
            Err(DistError::SizeMismatch { all, .. }) if all.len() == world => {}
            other => {
                return Err(format!(
                    "unequal all_reduce: want SizeMismatch, got {other:?}"
                ))
            }
        }
    }
    let mut one = [1.0f32];
    c.all_reduce(&mut one, ReduceOp::Sum)
        .map_err(|e| e.to_string())?;
    check("all_reduce after errors", &one, &[world as f64], 0.0)
}

fn train(c: Arc<dyn Communicator>, args: &[String]) -> Result<(), String> {
    let (out, steps, batch, accum) = match args {
        [out, steps, batch] => (out, steps, batch, "1"),
        [out, steps, batch, accum] => (out, steps, batch, accum.as_str()),
        _ => return Err("train OUT STEPS BATCH [ACCUM]".into()),
    };
    let steps: usize = steps.parse().map_err(|_| format!("bad STEPS '{steps}'"))?;
    let batch: usize = batch.parse().map_err(|_| format!("bad BATCH '{batch}'"))?;
    let accum: usize = accum.parse().map_err(|_| format!("bad ACCUM '{accum}'"))?;
    let opts = DdpOptions {
        bucket_elems: 40,
        ..DdpOptions::default()
    };
    let params = toy::train(c.clone(), batch, steps, true, opts, accum)?;
    if c.rank() == 0 {
        let text: Vec<String> = params
            .iter()
            .map(|p| {
                p.iter()
                    .map(|x| format!("{x:e}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        std::fs::write(out, text.join("\n")).map_err(|e| format!("{out}: {e}"))?;
    }
    Ok(())
}

/// `all_reduce_vec` (sum) timings, median of `rounds` after a warm-up, for 4 KiB..64 MiB;
/// rank 0 prints "bytes median_seconds" lines like the C peer (allreduce_peer.c).
fn bench(c: &dyn Communicator, rounds: usize) -> Result<(), String> {
    let mut bytes = 4096usize;
    while bytes <= 64 << 20 {
        let n = bytes / 4;
        let mut buf: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        buf = c
            .all_reduce_vec(buf, ReduceOp::Sum)
            .map_err(|e| e.to_string())?;
        let mut t = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            c.barrier().map_err(|e| e.to_string())?;
            let t0 = std::time::Instant::now();
            buf = c
                .all_reduce_vec(buf, ReduceOp::Sum)
                .map_err(|e| e.to_string())?;
            t.push(t0.elapsed().as_secs_f64());
        }
        t.sort_by(f64::total_cmp);
        if c.rank() == 0 {
            println!("{bytes} {:.9}", t[rounds / 2]);
        }
        bytes *= 4;
    }
    Ok(())
}

fn fault(c: &dyn Communicator, how: Option<&str>) -> Result<(), String> {
    if c.rank() == 1 {
        match how {
            Some("hang") => std::thread::sleep(Duration::from_secs(600)),
            // Dies without finalising MPI, as a crash would.
            Some("exit") => std::process::exit(7),
            _ => return Err("fault hang|exit".into()),
        }
    }
    // 4 KB: the small-message path, on the caller's thread where MPI allows it.
    let mut buf = vec![1.0f32; 1000];
    let timeout = match c.all_reduce(&mut buf, ReduceOp::Sum) {
        Ok(()) => return Err("the all-reduce completed although rank 1 never joined".into()),
        Err(e) => e.to_string(),
    };
    // The ranks are out of step for good: any later collective must fail at once.
    let t0 = std::time::Instant::now();
    match c.barrier() {
        Ok(()) => Err(format!("{timeout}; then a barrier completed")),
        Err(e) if t0.elapsed() < Duration::from_secs(1) => Err(format!("{timeout}; then: {e}")),
        Err(e) => Err(format!(
            "{timeout}; then a barrier waited {:?}: {e}",
            t0.elapsed()
        )),
    }
}
