//! Times the complex product's two methods (`Method::Exact`, one real product of expanded
//! pairs, and `Method::Gauss`, 3M) and the size-chosen default on square complex64 and
//! complex128 matrices, medians of interleaved rounds on the global pool:
//! `cargo run --release -p quill-gemm --example complex -- --rounds 9`.

use quill_gemm::{matmul_complex_with, row_major, Method, Operand, Real};
use std::time::Instant;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn sizes<T: Real + quill_gemm::Pack<T>>(label: &str, to: fn(f64) -> T, rounds: usize) {
    for n in [16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024] {
        let data: Vec<[T; 2]> = (0..n * n)
            .map(|i| [to((i as f64 * 0.37).sin()), to((i as f64 * 0.11).cos())])
            .collect();
        let shape = [n, n];
        let strides = row_major(&shape);
        let x = Operand::new(&data, &shape, &strides);
        let mut out = vec![[to(0.0); 2]; n * n];
        let methods = [None, Some(Method::Exact), Some(Method::Gauss)];
        let reps = (1 << 26) / (n * n * n) + 1;
        let mut times = vec![Vec::new(); 3];
        for _ in 0..rounds {
            for (t, m) in times.iter_mut().zip(methods) {
                let s = Instant::now();
                for _ in 0..reps {
                    matmul_complex_with(m, x, x, &mut out).unwrap();
                }
                t.push(s.elapsed().as_secs_f64() / reps as f64 * 1e6);
            }
        }
        let [auto, exact, gauss] = [0, 1, 2].map(|i| median(times[i].clone()));
        println!(
            "| {label} {n}^3 | {auto:.1} | {exact:.1} | {gauss:.1} | {:.2}x |",
            exact / gauss
        );
    }
}

fn main() {
    let rounds = arg("--rounds", 7);
    println!(
        "quill-gemm complex products, {} threads, medians of {rounds} rounds (us per product)",
        quill_par::threads()
    );
    println!("| case | default | exact | 3M | exact / 3M |\n|---|---:|---:|---:|---:|");
    sizes::<f32>("complex64", |x| x as f32, rounds);
    sizes::<f64>("complex128", |x| x, rounds);
}
