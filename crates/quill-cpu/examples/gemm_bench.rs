//! The quill side of `scripts/gemm_bench.py`: reads `dtype m k n reps inner` lines on stdin
//! (dtype f32, f64 or bf16, with `at` or `bt` appended for a transposed A or B view), times `reps`
//! runs of `inner` products `(m x k) @ (k x n)` through `quill_cpu::matmul::matmul` (quill's
//! layouts into quill-gemm's batched product), and answers each with the seconds of each run.
//! Threads follow `RAYON_NUM_THREADS`, the kernel `QUILL_MATMUL_KERNEL`. Being a small example
//! of this crate alone, it builds in a few minutes, so two builds (before and after a change)
//! can be driven side by side against NumPy and PyTorch in one run.

use half::bf16;
use quill_core::Layout;
use quill_cpu::{matmul::matmul, CpuStorage};
use std::io::BufRead;
use std::time::Instant;

fn operand(dtype: &str, rows: usize, cols: usize, seed: u64) -> (CpuStorage, Layout) {
    let mut s = seed;
    let v: Vec<f32> = (0..rows * cols)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let st = match dtype {
        "bf16" => CpuStorage::from_vec(v.into_iter().map(bf16::from_f32).collect::<Vec<_>>()),
        "f64" => CpuStorage::from_vec(v.into_iter().map(f64::from).collect::<Vec<_>>()),
        _ => CpuStorage::from_vec(v),
    };
    (st, Layout::contiguous(&[rows, cols]).unwrap())
}

fn main() {
    println!("ready",);
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f[i].parse::<usize>().unwrap();
        let (m, k, n, reps, inner) = (num(1), num(2), num(3), num(4), num(5));
        // `f32at` / `f32bt`: A (or B) stored transposed and read through a transposed view,
        // as a weight gradient `x^T @ g` (or `g @ w^T`) reads it.
        let dtype = f[0].trim_end_matches("at").trim_end_matches("bt");
        let (a, al) = if f[0].ends_with("at") {
            let (a, al) = operand(dtype, k, m, 1);
            (a, al.transpose(0, 1).unwrap())
        } else {
            operand(dtype, m, k, 1)
        };
        let (b, bl) = if f[0].ends_with("bt") {
            let (b, bl) = operand(dtype, n, k, 2);
            (b, bl.transpose(0, 1).unwrap())
        } else {
            operand(dtype, k, n, 2)
        };
        drop(matmul(&a, &al, &b, &bl).unwrap());
        let times: Vec<String> = (0..reps)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..inner {
                    drop(matmul(&a, &al, &b, &bl).unwrap());
                }
                format!("{:.9}", t.elapsed().as_secs_f64())
            })
            .collect();
        println!("{}", times.join(" "));
    }
}
