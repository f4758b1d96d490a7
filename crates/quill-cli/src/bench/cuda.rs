//! `quill bench cuda` (also `quill bench --device cuda`; needs `--features cuda`): GPU 0
//! against PyTorch on the same GPU in the same run, case by case: a device-to-device copy (the
//! bandwidth reference), compact of a permuted (512, 512, 512) f32 array, add, broadcast add,
//! exp, sums over both axes of (8192, 8192), sgemm 4096 and 8192 (GB/s = bytes read plus
//! written, GFLOP/s for matmul), and one MNIST epoch of the main job's model. Medians.

use super::{median, peer::Peer};
use quill::{DType, Device, NDArray};
use std::time::Instant;

const GPU: Device = Device::Cuda(0);

fn r<T>(x: quill::Result<T>) -> Result<T, String> {
    x.map_err(|e| e.to_string())
}

fn sync() -> Result<(), String> {
    r(quill::cuda::synchronize(0))
}

fn rand(shape: &[usize], seed: u64) -> Result<NDArray, String> {
    r(r(NDArray::rand(shape, seed, DType::F32))?.to_device(GPU))
}

type Run = Box<dyn Fn() -> quill::Result<()>>;

pub fn run(args: &[String]) -> Result<(), String> {
    let rounds = super::rounds_only("cuda", args, 5)?;
    if !Device::cuda_is_available() {
        return Err("bench cuda: no CUDA GPU is usable here".into());
    }
    let n = 1usize << 28;
    let (x, y) = (rand(&[n], 1)?, rand(&[n], 2)?);
    let cube = rand(&[512, 512, 512], 3)?;
    let (m, col) = (rand(&[8192, 8192], 4)?, rand(&[8192, 1], 5)?);
    let mut cases: Vec<(&str, &str, f64, Run)> = Vec::new();
    let gbs = |elems: usize, passes: f64| elems as f64 * 4.0 * passes / 1e9;
    {
        let x = x.clone();
        cases.push((
            "copy",
            "device-to-device copy 2^28 f32",
            gbs(n, 2.0),
            Box::new(move || {
                drop(x.deep_copy());
                Ok(())
            }),
        ));
    }
    {
        let c = cube.clone();
        cases.push((
            "compact",
            "compact of (512,512,512).permute(2,0,1)",
            gbs(1 << 27, 2.0),
            Box::new(move || c.permute(&[2, 0, 1]).map(|v| drop(v.compact()))),
        ));
    }
    {
        let (x, y) = (x.clone(), y.clone());
        cases.push((
            "add",
            "add 2^28",
            gbs(n, 3.0),
            Box::new(move || x.add(&y).map(drop)),
        ));
    }
    {
        let (m, col) = (m.clone(), col.clone());
        cases.push((
            "badd",
            "(8192,8192) + (8192,1)",
            gbs(1 << 26, 2.0),
            Box::new(move || m.add(&col).map(drop)),
        ));
    }
    {
        let x = x.clone();
        cases.push((
            "exp",
            "exp 2^28",
            gbs(n, 2.0),
            Box::new(move || x.exp().map(drop)),
        ));
    }
    {
        let m1 = m.clone();
        cases.push((
            "sum_last",
            "sum over the last axis of (8192,8192)",
            gbs(1 << 26, 1.0),
            Box::new(move || m1.sum(Some(&[1]), false).map(drop)),
        ));
        let m0 = m.clone();
        cases.push((
            "sum_first",
            "sum over the first axis of (8192,8192)",
            gbs(1 << 26, 1.0),
            Box::new(move || m0.sum(Some(&[0]), false).map(drop)),
        ));
    }
    for k in [4096usize, 8192] {
        let (a, b) = (rand(&[k, k], 6)?, rand(&[k, k], 7)?);
        let name = if k == 4096 {
            "sgemm_4096"
        } else {
            "sgemm_8192"
        };
        let what = if k == 4096 {
            "sgemm 4096"
        } else {
            "sgemm 8192"
        };
        cases.push((
            name,
            what,
            -2.0 * (k as f64).powi(3) / 1e9,
            Box::new(move || a.matmul(&b).map(drop)),
        ));
    }
    let mut peer = Peer::start(include_str!("cuda_peer.py"));
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("cuda"));
    crate::report::heading(format!(
        "quill bench cuda: {rounds} rounds, medians; peer: {}",
        peer.as_ref()
            .map_or("none".to_string(), |p| p.version.clone())
    ));
    let table = crate::report::Table::new(
        "cuda",
        &["case", "unit", "quill", "PyTorch", "quill / PyTorch"],
    );
    for (name, what, amount, f) in &cases {
        let (mut q, mut t) = (Vec::new(), Vec::new());
        r(f())?;
        sync()?;
        for _ in 0..rounds {
            let s = Instant::now();
            r(f())?;
            sync()?;
            q.push(s.elapsed().as_secs_f64());
            if let (Some(p), true) = (peer.as_mut(), has_torch) {
                t.extend(p.run(&format!("{name} torch"), 1).unwrap_or_default());
            }
        }
        let rate = |s: f64| amount.abs() / s;
        let (qr, unit) = (
            rate(median(&mut q)),
            if *amount < 0.0 { "GFLOP/s" } else { "GB/s" },
        );
        let tr = (!t.is_empty()).then(|| rate(median(&mut t)));
        table.line(format!(
            "| {what} | {unit} | {qr:.1} | {} | {} |",
            tr.map_or("-".into(), |v| format!("{v:.1}")),
            tr.map_or("-".into(), |v| format!("{:.2}x", qr / v))
        ));
    }
    Ok(())
}
