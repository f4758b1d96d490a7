//! `quill bench ...`: benchmarks that time quill and a peer in the same run and report medians
//! and ratios. Benchmarks are never tests: the machine is shared and noisy.

mod attention;
mod autograd;
mod copy;
#[cfg(feature = "cuda")]
mod cuda;
mod linalg;
mod lstm;
mod ops;
mod peer;
mod train;
mod transformer;

/// Runs `quill bench NAME [options]` (`copy` when no name is given), under a spinner on a
/// terminal that names the benchmark, the time spent and the last row measured.
pub fn run(args: &[String]) -> Result<(), String> {
    let name = args.first().map_or("copy", String::as_str);
    let _spinner = crate::report::spinner(format!("bench {name}"));
    match args.first().map(String::as_str) {
        Some("copy") | None => copy::run(&args[args.len().min(1)..]),
        Some("ops") => ops::run(&args[1..]),
        Some("autograd") => autograd::run(&args[1..]),
        Some("train") => train::run(&args[1..]),
        Some("lstm") => lstm::run(&args[1..]),
        Some("attention") => attention::run(&args[1..]),
        Some("transformer") => transformer::run(&args[1..]),
        Some("linalg") => linalg::run(&args[1..]),
        #[cfg(feature = "cuda")]
        Some("cuda") => cuda::run(&args[1..]),
        #[cfg(feature = "cuda")]
        Some("--device") if args.get(1).is_some_and(|d| d.starts_with("cuda")) => {
            cuda::run(&args[2..])
        }
        #[cfg(not(feature = "cuda"))]
        Some("cuda") | Some("--device") => {
            Err("bench cuda needs a build with `--features cuda`".into())
        }
        Some(other) => Err(format!(
            "unknown benchmark '{other}'; available: copy, ops, autograd, train, lstm, attention, \
             transformer, linalg, cuda"
        )),
    }
}

/// The value after `--rounds`: a positive count of timed rounds.
pub fn rounds_value(v: Option<&String>) -> Result<usize, String> {
    v.and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .ok_or_else(|| "--rounds needs a positive number".to_string())
}

/// The `--rounds N` option of a benchmark that takes no other (`default` when absent); any
/// other option is an error naming `bench`.
pub fn rounds_only(bench: &str, args: &[String], default: usize) -> Result<usize, String> {
    let mut rounds = default;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = rounds_value(it.next())?,
            other => return Err(format!("bench {bench}: unknown option '{other}'")),
        }
    }
    Ok(rounds)
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
