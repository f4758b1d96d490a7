//! `quill bench ...`: benchmarks that time quill and a peer in the same run and report medians
//! and ratios. Benchmarks are never tests: the machine is shared and noisy.

mod autograd;
mod copy;
mod ops;
mod peer;
mod train;

pub fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("copy") | None => copy::run(&args[args.len().min(1)..]),
        Some("ops") => ops::run(&args[1..]),
        Some("autograd") => autograd::run(&args[1..]),
        Some("train") => train::run(&args[1..]),
        Some(other) => Err(format!(
            "unknown benchmark '{other}'; available: copy, ops, autograd, train"
        )),
    }
}

pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    }
}
