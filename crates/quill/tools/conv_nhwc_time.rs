//! Forward + backward of needle's NHWC `Tensor::conv` (64x14x14x16 input, 3x3x16x32 weight,
//! pad 1): the backward through the NCHW gradient kernels against the composite backward
//! (the one `create_graph` records). Medians of 15; run with
//! `cargo run --release -p quill --example conv_nhwc_time`.
use quill::tensor::{grad, BackwardOptions, Tensor};
use quill::{DType, NDArray};
use std::time::Instant;

fn main() -> quill::Result<()> {
    quill::in_pool(|| {
        let x = Tensor::from_array(NDArray::randn(&[64, 14, 14, 16], 1, DType::F32)?, true)?;
        let w = Tensor::from_array(NDArray::randn(&[3, 3, 16, 32], 2, DType::F32)?, true)?;
        for create_graph in [false, true] {
            let mut t = Vec::new();
            for _ in 0..15 {
                let s = Instant::now();
                let y = x.conv(&w, 1, 1)?;
                let opts = BackwardOptions {
                    retain_graph: false,
                    create_graph,
                    overwrite_grad: false,
                };
                let g = grad(&y.sum(None, false)?, &[x.clone(), w.clone()], None, opts)?;
                std::hint::black_box(g);
                t.push(s.elapsed().as_secs_f64() * 1e3);
            }
            t.sort_by(f64::total_cmp);
            let name = if create_graph {
                "composite (create_graph)"
            } else {
                "kernels"
            };
            println!("{name}: {:.2} ms forward + backward", t[7]);
        }
        Ok(())
    })
}
