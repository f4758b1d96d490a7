//! `matmul` on each device: batched, a transposed (`.mT` view) rhs, a broadcast rhs, 1-D
//! operands on either side, a stepped lhs and plain 2-D, in f32, f64, i64 and f16. The naive
//! reference implements NumPy's matmul shape rules on its own (1-D promotion, batch
//! broadcasting) with a triple loop in f64.

use crate::check::round_to;
use crate::randn3;
use quill::{s, DType, Device, NDArray, Result};
use quill_test_support::{assert_close, assert_close_values, device_test, f64s, ravel, unravel};

/// NumPy's `matmul` of C-order values `a` (shape `sa`) and `b` (shape `sb`), in f64.
fn naive_matmul(a: &[f64], sa: &[usize], b: &[f64], sb: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let (mut sa, mut sb) = (sa.to_vec(), sb.to_vec());
    let (a1, b1) = (sa.len() == 1, sb.len() == 1);
    if a1 {
        sa.insert(0, 1);
    }
    if b1 {
        sb.push(1);
    }
    let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    assert_eq!(k, sb[sb.len() - 2], "inner dims");
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let nb = ba.len().max(bb.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= nb {
            s[i + s.len() - nb]
        } else {
            1
        }
    };
    let batch: Vec<usize> = (0..nb).map(|i| dim(ba, i).max(dim(bb, i))).collect();
    // The batch index of an operand: the broadcast index with its missing and size-1 dims at 0.
    let src = |s: &[usize], idx: &[usize]| -> usize {
        let own: Vec<usize> = (0..s.len())
            .map(|j| if s[j] == 1 { 0 } else { idx[j + nb - s.len()] })
            .collect();
        ravel(s, &own)
    };
    let total: usize = batch.iter().product();
    let mut out = Vec::with_capacity(total * m * n);
    for bi in 0..total {
        let idx = unravel(&batch, bi);
        let (pa, pb) = (src(ba, &idx) * m * k, src(bb, &idx) * k * n);
        for i in 0..m {
            for j in 0..n {
                out.push((0..k).map(|t| a[pa + i * k + t] * b[pb + t * n + j]).sum());
            }
        }
    }
    let mut shape = batch;
    if !a1 {
        shape.push(m);
    }
    if !b1 {
        shape.push(n);
    }
    (out, shape)
}

device_test!(matmul_views_batches_and_dtypes -> Result<()>);
fn matmul_views_batches_and_dtypes(dev: Device) -> Result<()> {
    for dtype in [DType::F32, DType::F64, DType::I64, DType::F16] {
        let tol = match dtype {
            DType::F64 | DType::I64 => 1e-12,
            DType::F32 => 1e-5,
            _ => 1e-2,
        };
        let a = randn3(&[3, 5, 7], 8, dtype);
        let b = randn3(&[3, 7, 4], 9, dtype);
        let bt = randn3(&[3, 4, 7], 10, dtype).permute(&[0, 2, 1])?; // a .mT view
        let row = randn3(&[7, 4], 11, dtype); // broadcast over the batch
        let v = randn3(&[7], 12, dtype);
        let stepped = randn3(&[3, 10, 7], 13, dtype).slice(&s![.., ..;2, ..])?;
        let cases: Vec<(&str, NDArray, NDArray)> = vec![
            ("batched", a.clone(), b.clone()),
            ("transposed rhs", a.clone(), bt),
            ("broadcast rhs", a.clone(), row),
            ("vector rhs", a.clone(), v.clone()),
            ("vector lhs", v, b.clone()),
            ("stepped lhs", stepped, b.clone()),
            ("2-D", a.slice(&s![1])?, b.slice(&s![2])?),
        ];
        for (name, x, y) in cases {
            let ctx = format!("{dtype} {name} on {dev}");
            // The views are taken again on the device: their base buffers move, not copies.
            let got = on(&x, dev)?.matmul(&on(&y, dev)?)?;
            assert_eq!((got.device(), got.dtype()), (dev, dtype), "{ctx}");
            if dev == Device::Cpu {
                let (want, shape) = naive_matmul(&f64s(&x), x.shape(), &f64s(&y), y.shape());
                assert_eq!(got.shape(), &shape[..], "{ctx}");
                let want: Vec<f64> = want.iter().map(|&w| round_to(w, dtype)).collect();
                assert_close_values(&f64s(&got), &want, tol, &ctx);
            } else {
                assert_close(&got, &x.matmul(&y)?, tol, &ctx);
            }
        }
    }
    Ok(())
}

/// `x` on `dev` with the same layout: its whole buffer moved, the view re-taken there.
fn on(x: &NDArray, dev: Device) -> Result<NDArray> {
    let base = x.as_strided(&[x.buffer_len()], &[1], 0)?;
    base.to_device(dev)?
        .as_strided(x.shape(), x.strides(), x.offset())
}
