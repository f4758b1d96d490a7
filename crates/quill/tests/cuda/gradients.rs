//! Gradients whose backward builds a fresh base array (a slice's and a gather's gradient,
//! recurrent layers' zero states, the composite convolution's padded copy) make it on the
//! gradient's device, and an index from the host follows the array it indexes. On a GPU the
//! gradient must stay there and match the CPU's; everywhere it must match a naive count of
//! which elements were read.

use crate::randn3;
use quill::nn::{Embedding, Module, LSTM};
use quill::tensor::{grad, BackwardOptions, Tensor};
use quill::{s, Conv2dSpec, DType, Device, NDArray, Result};
use quill_test_support::{assert_close, assert_close_values, device_test, f64s};

device_test!(backward_bases_and_host_indices_stay_on_the_device -> Result<()>);
fn backward_bases_and_host_indices_stay_on_the_device(dev: Device) -> Result<()> {
    let x0 = randn3(&[4, 6], 31, DType::F32);
    let vals = f64s(&x0);

    // A stepped slice: its gradient is 1 where the slice read and 0 elsewhere.
    let x = Tensor::from_array(x0.to_device(dev)?, true)?;
    x.slice(&s![1..3, ..;2])?.sum(None, false)?.backward()?;
    let g = x.grad().expect("x requires grad");
    assert_eq!(g.device(), dev, "slice gradient");
    let read = |i: usize| (1..3).contains(&(i / 6)) && (i % 6).is_multiple_of(2);
    let want: Vec<f64> = (0..24).map(|i| f64::from(u8::from(read(i)))).collect();
    assert_close_values(
        &f64s(g.array()),
        &want,
        0.0,
        &format!("slice grad on {dev}"),
    );

    // take_along_axis with an index made on the host: values picked, gradient = counts.
    let idx = [0i64, 5, 5, 2, 1, 1, 3, 0];
    let index = NDArray::from_vec(idx.to_vec(), &[4, 2])?;
    let x = Tensor::from_array(x0.to_device(dev)?, true)?;
    let picked = x.take_along_axis(&index, 1)?;
    assert_eq!(picked.device(), dev, "take_along_axis output");
    let want: Vec<f64> = (0..8).map(|k| vals[k / 2 * 6 + idx[k] as usize]).collect();
    assert_close_values(&f64s(picked.array()), &want, 0.0, "take_along_axis");
    picked.sum(None, false)?.backward()?;
    let g = x.grad().expect("x requires grad");
    assert_eq!(g.device(), dev, "gather gradient");
    let mut counts = vec![0.0; 24];
    for (k, &i) in idx.iter().enumerate() {
        counts[k / 2 * 6 + i as usize] += 1.0;
    }
    assert_close_values(
        &f64s(g.array()),
        &counts,
        0.0,
        &format!("gather grad on {dev}"),
    );

    // An embedding on the device looked up with host token ids (index_select).
    let emb = Embedding::new(5, 3, 7)?;
    emb.to_device(dev)?;
    let ids = NDArray::from_vec(vec![4i64, 0, 4, 2], &[2, 2])?;
    let out = emb.forward(&Tensor::new(ids))?;
    assert_eq!(out.shape(), &[2, 2, 3]);
    out.sum(None, false)?.backward()?;
    let g = emb.weight.grad().expect("weight requires grad");
    assert_eq!(g.device(), dev, "embedding gradient");
    let rows = [1.0, 0.0, 1.0, 0.0, 2.0];
    let want: Vec<f64> = rows.iter().flat_map(|&r| [r; 3]).collect();
    assert_close_values(
        &f64s(g.array()),
        &want,
        0.0,
        &format!("embedding grad on {dev}"),
    );
    Ok(())
}

device_test!(zero_states_and_padded_copies_are_made_on_the_device -> Result<()>);
fn zero_states_and_padded_copies_are_made_on_the_device(dev: Device) -> Result<()> {
    // An LSTM with no initial state: zeros on the weights' device, the CPU's result.
    let (cpu, gpu) = (LSTM::new(3, 4, 2, true, 5)?, LSTM::new(3, 4, 2, true, 5)?);
    gpu.to_device(dev)?;
    let x = randn3(&[5, 2, 3], 8, DType::F32);
    let want = cpu.forward(&Tensor::new(x.clone()))?;
    let got = gpu.forward(&Tensor::new(x.to_device(dev)?))?;
    assert_eq!(got.device(), dev, "LSTM output");
    assert_close(got.array(), want.array(), 1e-5, &format!("LSTM on {dev}"));

    // The composite convolution (padded copy, strided slices, matmul) against the fused one.
    let xs = randn3(&[2, 3, 5, 5], 9, DType::F32);
    let ws = randn3(&[4, 3, 3, 3], 10, DType::F32);
    let spec = Conv2dSpec {
        padding: (1, 2),
        ..Conv2dSpec::default()
    };
    let x = Tensor::from_array(xs.to_device(dev)?, true)?;
    let w = Tensor::from_array(ws.to_device(dev)?, true)?;
    let y = x.conv2d_composite(&w, spec)?;
    assert_eq!(y.device(), dev, "composite conv output");
    let want = Tensor::new(xs).conv2d(&Tensor::new(ws), spec)?;
    assert_close(
        y.array(),
        want.array(),
        1e-4,
        &format!("composite conv on {dev}"),
    );
    y.sum(None, false)?.backward()?;
    assert_eq!(x.grad().expect("x grad").device(), dev);
    assert_eq!(w.grad().expect("w grad").device(), dev);

    // The fused conv's recorded backward (create_graph) runs the composite gradients, whose
    // stand-in input is a fresh zero leaf; its input gradient must equal the plain one.
    let y = x.conv2d(&w, spec)?;
    let opts = BackwardOptions {
        retain_graph: true,
        create_graph: true,
        overwrite_grad: false,
    };
    let loss = y.square()?.sum(None, false)?;
    let gx = grad(&loss, std::slice::from_ref(&x), None, opts)?.remove(0);
    assert_eq!(gx.device(), dev, "recorded input gradient");
    let plain = grad(
        &loss,
        std::slice::from_ref(&x),
        None,
        BackwardOptions::default(),
    )?;
    assert_close(
        gx.array(),
        plain[0].array(),
        1e-4,
        &format!("conv dx on {dev}"),
    );
    Ok(())
}
