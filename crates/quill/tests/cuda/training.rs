//! Training on each device: a residual MLP's Adam steps (its loss must fall; off the CPU the
//! losses and parameters must match the CPU's), the fused optimizer updates (Adam, AdamW, SGD
//! with momentum / Nesterov / weight decay) against PyTorch's documented rules written out in
//! f64, and random numbers made on the device (range, moments, reproducibility by seed).

use crate::randn3;
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{models, Module};
use quill::optim::{Adam, AdamW, Optimizer, Sgd};
use quill::tensor::Tensor;
use quill::{DType, Device, NDArray, Result};
use quill_test_support::{assert_close, assert_close_values, device_test, f64s};

device_test!(training_steps_lower_the_loss_and_match_the_cpu -> Result<()>);
fn training_steps_lower_the_loss_and_match_the_cpu(dev: Device) -> Result<()> {
    let make = || models::mlp_resnet(20, 16, 1, 4, 0.0, 3);
    let (cpu_m, dev_m) = (make()?, make()?);
    dev_m.to_device(dev)?;
    let mut cpu_o = Adam::new(cpu_m.parameters(), 1e-2)?;
    let mut dev_o = Adam::new(dev_m.parameters(), 1e-2)?;
    let x = randn3(&[8, 20], 18, DType::F32);
    let y = NDArray::from_vec(vec![0i64, 1, 2, 3, 0, 1, 2, 3], &[8])?;
    let mut losses = Vec::new();
    // The largest |gradient| each parameter had on the CPU over the steps.
    let mut peak = vec![0.0f64; cpu_m.parameters().len()];
    for _ in 0..3 {
        let lc = cross_entropy(
            &cpu_m.forward(&Tensor::new(x.clone()))?,
            &y,
            0.0,
            Reduction::Mean,
        )?;
        let gx = Tensor::new(x.to_device(dev)?);
        let lg = cross_entropy(
            &dev_m.forward(&gx)?,
            &y.to_device(dev)?,
            0.0,
            Reduction::Mean,
        )?;
        assert_eq!(lg.device(), dev);
        let (a, b) = (lc.item()?, lg.item()?);
        assert!((a - b).abs() < 1e-4, "{a} on the cpu vs {b} on {dev}");
        losses.push(b);
        cpu_o.zero_grad();
        dev_o.zero_grad();
        lc.backward()?;
        lg.backward()?;
        for (k, ((n, c), (_, g))) in cpu_m
            .named_parameters()
            .iter()
            .zip(dev_m.named_parameters())
            .enumerate()
        {
            let (gc, gg) = (c.grad().expect("cpu grad"), g.grad().expect("device grad"));
            assert_eq!(gg.device(), dev, "{n}'s gradient stays on {dev}");
            assert_close(gg.array(), gc.array(), 1e-4, &format!("{n}'s gradient"));
            peak[k] = f64s(gc.array()).iter().fold(peak[k], |m, v| m.max(v.abs()));
        }
        cpu_o.step()?;
        dev_o.step()?;
    }
    // Three Adam steps on one fixed batch must make progress on it.
    assert!(losses[2] < losses[0], "loss on {dev}: {losses:?}");
    for (k, ((n, c), (_, g))) in cpu_m
        .named_parameters()
        .iter()
        .zip(dev_m.named_parameters())
        .enumerate()
    {
        assert_eq!(g.device(), dev, "{n} stays on {dev}");
        // A bias feeding a batch norm has a gradient of exactly 0 in exact arithmetic, so
        // its computed gradient is rounding noise, and Adam's normalised step (about lr in
        // the direction of that noise's sign) differs between devices; such a parameter
        // only has to stay within three steps of the CPU's.
        let tol = if peak[k] < 1e-5 { 3.0 * 1e-2 } else { 1e-4 };
        assert_close(g.array(), c.array(), tol, n);
    }
    Ok(())
}

/// PyTorch's documented updates for one parameter, in f64: the parameter after each step.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// torch.optim.Adam with L2 weight decay added to the gradient.
    Adam { lr: f64, wd: f64 },
    /// torch.optim.AdamW: decoupled weight decay.
    AdamW { lr: f64, wd: f64 },
    /// torch.optim.SGD with momentum (dampening 0), optional Nesterov and weight decay.
    Sgd {
        lr: f64,
        momentum: f64,
        nesterov: bool,
        wd: f64,
    },
}

fn reference(rule: Rule, p0: &[f64], grads: &[Vec<f64>]) -> Vec<f64> {
    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
    let mut p = p0.to_vec();
    let (mut m, mut v) = (vec![0.0; p.len()], vec![0.0; p.len()]);
    for (t, g) in grads.iter().enumerate() {
        let t = t as i32 + 1;
        for i in 0..p.len() {
            match rule {
                Rule::Adam { lr, wd } | Rule::AdamW { lr, wd } => {
                    let mut gi = g[i];
                    if matches!(rule, Rule::AdamW { .. }) {
                        p[i] *= 1.0 - lr * wd;
                    } else {
                        gi += wd * p[i];
                    }
                    m[i] = b1 * m[i] + (1.0 - b1) * gi;
                    v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                    let (mh, vh) = (m[i] / (1.0 - b1.powi(t)), v[i] / (1.0 - b2.powi(t)));
                    p[i] -= lr * mh / (vh.sqrt() + eps);
                }
                Rule::Sgd {
                    lr,
                    momentum,
                    nesterov,
                    wd,
                } => {
                    let d = g[i] + wd * p[i];
                    // The momentum buffer starts as the first step's direction.
                    m[i] = if t == 1 { d } else { momentum * m[i] + d };
                    let d = if momentum == 0.0 {
                        d
                    } else if nesterov {
                        d + momentum * m[i]
                    } else {
                        m[i]
                    };
                    p[i] -= lr * d;
                }
            }
        }
    }
    p
}

device_test!(fused_optimizer_steps_follow_the_documented_rules -> Result<()>);
fn fused_optimizer_steps_follow_the_documented_rules(dev: Device) -> Result<()> {
    type Make = fn(Vec<Tensor>) -> Result<Box<dyn Optimizer>>;
    let makers: [(Rule, Make); 4] = [
        (Rule::Adam { lr: 1e-2, wd: 1e-2 }, |p| {
            Ok(Box::new(Adam::new(p, 1e-2)?.weight_decay(1e-2)?))
        }),
        (Rule::AdamW { lr: 1e-2, wd: 1e-2 }, |p| {
            Ok(Box::new(AdamW::new(p, 1e-2)?.weight_decay(1e-2)?))
        }),
        (
            Rule::Sgd {
                lr: 0.1,
                momentum: 0.0,
                nesterov: false,
                wd: 0.0,
            },
            |p| Ok(Box::new(Sgd::new(p, 0.1)?)),
        ),
        (
            Rule::Sgd {
                lr: 0.1,
                momentum: 0.9,
                nesterov: true,
                wd: 1e-3,
            },
            |p| {
                Ok(Box::new(
                    Sgd::new(p, 0.1)?
                        .momentum(0.9)?
                        .nesterov(true)?
                        .weight_decay(1e-3)?,
                ))
            },
        ),
    ];
    for dtype in [DType::F32, DType::F64] {
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        for (rule, make) in makers {
            let w0 = randn3(&[7, 5], 22, dtype);
            // A copy: on the CPU `to_device` shares the buffer, which the steps overwrite.
            let p = Tensor::from_array(w0.deep_copy().unwrap().to_device(dev)?, true)?;
            let mut opt = make(vec![p.clone()])?;
            let mut grads = Vec::new();
            for step in 0..3 {
                let g = randn3(&[7, 5], 30 + step, dtype);
                grads.push(f64s(&g));
                p.set_grad(Some(Tensor::new(g.to_device(dev)?)))?;
                opt.step()?;
            }
            assert_eq!(p.device(), dev);
            let want = reference(rule, &f64s(&w0), &grads);
            assert_close_values(
                &f64s(p.array()),
                &want,
                tol,
                &format!("{dtype} {rule:?} on {dev}"),
            );
        }
    }
    Ok(())
}

device_test!(random_numbers_made_on_the_device -> Result<()>);
fn random_numbers_made_on_the_device(dev: Device) -> Result<()> {
    // Integer dtypes have no random constructor anywhere.
    assert!(NDArray::rand_on(&[2], 1, DType::I32, dev).is_err());
    for dtype in [DType::F32, DType::F64, DType::F16] {
        let n = 1 << 16;
        let u = NDArray::rand_on(&[n], 7, dtype, dev)?;
        assert_eq!((u.device(), u.dtype()), (dev, dtype));
        let v = f64s(&u);
        assert!(
            v.iter().all(|&x| (0.0..1.0).contains(&x)),
            "{dtype} uniform in [0, 1) on {dev}"
        );
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(
            (mean - 0.5).abs() < 0.01 && (var - 1.0 / 12.0).abs() < 0.005,
            "{dtype} on {dev}: {mean} {var}"
        );
        assert_eq!(
            v,
            f64s(&NDArray::rand_on(&[n], 7, dtype, dev)?),
            "same seed, same numbers"
        );
        assert_ne!(
            v,
            f64s(&NDArray::rand_on(&[n], 8, dtype, dev)?),
            "another seed"
        );
        let z = f64s(&NDArray::randn_on(&[n], 7, dtype, dev)?);
        let zm = z.iter().sum::<f64>() / n as f64;
        let zv = z.iter().map(|x| (x - zm) * (x - zm)).sum::<f64>() / n as f64;
        assert!(
            zm.abs() < 0.02 && (zv - 1.0).abs() < 0.03,
            "{dtype} normal on {dev}: {zm} {zv}"
        );
    }
    // On the CPU, rand_on is rand.
    let c = NDArray::rand_on(&[5], 9, DType::F32, Device::Cpu)?;
    assert_eq!(f64s(&c), f64s(&NDArray::rand(&[5], 9, DType::F32)?));
    Ok(())
}
