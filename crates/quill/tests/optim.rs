//! optim: every optimizer against PyTorch's documented algorithm written out in plain f64
//! loops (several steps, each option, f32 and f64 params, broadcast-view gradients, a strided
//! parameter, a parameter that skips a step), a quadratic whose loss must fall, gradient
//! clipping against a hand-computed norm, schedules against their closed forms, state-dict
//! resumption bit for bit, and the typed errors of constructors and `load_state_dict`.

use quill::optim::{
    apply_schedule, clip_grad_norm, Adam, AdamW, ConstantLr, CosineLr, LinearWarmup, LrSchedule,
    Optimizer, Sgd, StepLr,
};
use quill::{DType, Error, NDArray, Result, Tensor};
use std::collections::HashMap;

/// A test parameter: its dtype, logical shape, whether its gradient is a broadcast view
/// (non-contiguous), whether it is itself a transposed (strided) view, and a step it skips.
struct Spec {
    dtype: DType,
    shape: &'static [usize],
    broadcast_grad: bool,
    transposed: bool,
    skip_step: Option<usize>,
}

const SPECS: &[Spec] = &[
    Spec {
        dtype: DType::F64,
        shape: &[2, 3],
        broadcast_grad: false,
        transposed: false,
        skip_step: None,
    },
    Spec {
        dtype: DType::F32,
        shape: &[4],
        broadcast_grad: false,
        transposed: false,
        skip_step: None,
    },
    Spec {
        dtype: DType::F64,
        shape: &[3, 2],
        broadcast_grad: true,
        transposed: false,
        skip_step: None,
    },
    Spec {
        dtype: DType::F32,
        shape: &[2, 2],
        broadcast_grad: true,
        transposed: false,
        skip_step: Some(2),
    },
    Spec {
        dtype: DType::F64,
        shape: &[3, 2],
        broadcast_grad: false,
        transposed: true,
        skip_step: Some(1),
    },
];

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.array()
        .astype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

/// The parameters of `SPECS` (the transposed one returned with its base array too).
fn make_params() -> Result<(Vec<Tensor>, NDArray)> {
    let mut params = Vec::new();
    let mut base = None;
    for (j, s) in SPECS.iter().enumerate() {
        let init: Vec<f64> = (0..numel(s.shape))
            .map(|i| 0.5 - 0.3 * i as f64 + 0.7 * j as f64)
            .collect();
        let arr = if s.transposed {
            let b = NDArray::from_vec(init, &[s.shape[1], s.shape[0]])?
                .astype(s.dtype)
                .unwrap();
            base = Some(b.clone());
            b.transpose(0, 1)?
        } else {
            NDArray::from_vec(init, s.shape)?.astype(s.dtype).unwrap()
        };
        params.push(Tensor::from_array(arr, true)?);
    }
    Ok((params, base.expect("one transposed spec")))
}

/// Sets the gradients for `step` from the current parameter values and returns them as the
/// parameter's dtype rounds them (None for a parameter that skips this step).
fn set_grads(params: &[Tensor], step: usize) -> Result<Vec<Option<Vec<f64>>>> {
    let mut out = Vec::new();
    for (j, (p, s)) in params.iter().zip(SPECS).enumerate() {
        p.zero_grad();
        if s.skip_step == Some(step) {
            out.push(None);
            continue;
        }
        let g = if s.broadcast_grad {
            let v = 0.4 - 0.15 * step as f64 + 0.05 * j as f64;
            NDArray::full(&[1], v, s.dtype)?.broadcast_to(s.shape)?
        } else {
            let g: Vec<f64> = values(p)
                .iter()
                .enumerate()
                .map(|(i, &x)| 2.0 * (x - 0.1 * i as f64) + 0.05 * ((step + i) as f64).sin())
                .collect();
            NDArray::from_vec(g, s.shape)?.astype(s.dtype).unwrap()
        };
        assert_eq!(g.is_contiguous(), !s.broadcast_grad);
        out.push(Some(g.astype(DType::F64).unwrap().to_vec::<f64>()?));
        p.set_grad(Some(Tensor::new(g)))?;
    }
    Ok(out)
}

fn assert_close(got: &[f64], want: &[f64], dtype: DType, what: &str) {
    let tol = if dtype == DType::F64 { 1e-12 } else { 2e-5 };
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, want {w} (all: {got:?} vs {want:?})"
        );
    }
}

/// Runs `opt` and `reference` (one parameter's step: index, values, gradient) side by side for
/// six steps, comparing every parameter after every step.
fn check<O: Optimizer>(
    name: &str,
    make: impl Fn(Vec<Tensor>) -> Result<O>,
    mut reference: impl FnMut(usize, &mut [f64], &[f64]),
) -> Result<()> {
    let (params, base) = make_params()?;
    let mut want: Vec<Vec<f64>> = params.iter().map(values).collect();
    let mut opt = make(params.clone())?;
    for step in 0..6 {
        let grads = set_grads(&params, step)?;
        opt.step()?;
        for (j, g) in grads.iter().enumerate() {
            if let Some(g) = g {
                reference(j, &mut want[j], g);
            }
            let what = format!("{name}: step {step} param {j}");
            assert_close(&values(&params[j]), &want[j], SPECS[j].dtype, &what);
        }
    }
    assert_eq!(opt.step_count(), 6);
    // The strided parameter was written back through its view into the base buffer.
    let t = base
        .transpose(0, 1)?
        .astype(DType::F64)
        .unwrap()
        .to_vec::<f64>()?;
    assert_close(&t, &want[4], DType::F64, &format!("{name}: base buffer"));
    Ok(())
}

#[derive(Clone, Copy, Default)]
struct SgdRef {
    lr: f64,
    momentum: f64,
    dampening: f64,
    nesterov: bool,
    wd: f64,
}

/// torch.optim.SGD as documented, for one parameter.
fn sgd_ref(c: SgdRef) -> impl FnMut(usize, &mut [f64], &[f64]) {
    let mut bufs: HashMap<usize, Vec<f64>> = HashMap::new();
    move |j, p, g| {
        let first = !bufs.contains_key(&j);
        let b = bufs.entry(j).or_insert_with(|| vec![0.0; p.len()]);
        for i in 0..p.len() {
            let mut d = g[i];
            if c.wd != 0.0 {
                d += c.wd * p[i];
            }
            if c.momentum != 0.0 {
                b[i] = if first {
                    d
                } else {
                    c.momentum * b[i] + (1.0 - c.dampening) * d
                };
                d = if c.nesterov {
                    d + c.momentum * b[i]
                } else {
                    b[i]
                };
            }
            p[i] -= c.lr * d;
        }
    }
}

/// needle's SGD, for one parameter: `u = m * u + (1 - m) * (g + wd * p)` from `u = 0`,
/// `p -= lr * u` (written from needle's documented rule, not from the code under test).
fn needle_sgd_ref(lr: f64, m: f64, wd: f64) -> impl FnMut(usize, &mut [f64], &[f64]) {
    let mut us: HashMap<usize, Vec<f64>> = HashMap::new();
    move |j, p, g| {
        let u = us.entry(j).or_insert_with(|| vec![0.0; p.len()]);
        for i in 0..p.len() {
            u[i] = m * u[i] + (1.0 - m) * (g[i] + wd * p[i]);
            p[i] -= lr * u[i];
        }
    }
}

#[test]
fn sgd_with_a_zero_initialised_buffer_is_needles_rule() -> Result<()> {
    check(
        "needle sgd",
        |p| {
            Ok(Sgd::new(p, 0.1)?
                .momentum(0.9)?
                .dampening(0.9)?
                .weight_decay(0.01)?
                .zero_init_buffer(true))
        },
        needle_sgd_ref(0.1, 0.9, 0.01),
    )
}

#[derive(Clone, Copy)]
struct AdamRef {
    lr: f64,
    b1: f64,
    b2: f64,
    eps: f64,
    wd: f64,
    decoupled: bool,
}

/// torch.optim.Adam / AdamW as documented (bias-corrected m-hat and v-hat), per parameter
/// with its own step count.
fn adam_ref(c: AdamRef) -> impl FnMut(usize, &mut [f64], &[f64]) {
    let mut st: HashMap<usize, (i32, Vec<f64>, Vec<f64>)> = HashMap::new();
    move |j, p, g| {
        let (t, m, v) = st
            .entry(j)
            .or_insert_with(|| (0, vec![0.0; p.len()], vec![0.0; p.len()]));
        *t += 1;
        for i in 0..p.len() {
            let mut gi = g[i];
            if c.decoupled {
                p[i] *= 1.0 - c.lr * c.wd;
            } else if c.wd != 0.0 {
                gi += c.wd * p[i];
            }
            m[i] = c.b1 * m[i] + (1.0 - c.b1) * gi;
            v[i] = c.b2 * v[i] + (1.0 - c.b2) * gi * gi;
            let m_hat = m[i] / (1.0 - c.b1.powi(*t));
            let v_hat = v[i] / (1.0 - c.b2.powi(*t));
            p[i] -= c.lr * m_hat / (v_hat.sqrt() + c.eps);
        }
    }
}

#[test]
fn sgd_matches_reference() -> Result<()> {
    let base = SgdRef {
        lr: 0.1,
        ..Default::default()
    };
    check("sgd", |p| Sgd::new(p, 0.1), sgd_ref(base))?;
    check(
        "sgd wd",
        |p| Sgd::new(p, 0.1)?.weight_decay(0.05),
        sgd_ref(SgdRef { wd: 0.05, ..base }),
    )?;
    check(
        "sgd momentum",
        |p| Sgd::new(p, 0.1)?.momentum(0.9),
        sgd_ref(SgdRef {
            momentum: 0.9,
            ..base
        }),
    )?;
    check(
        "sgd momentum dampening wd",
        |p| {
            Sgd::new(p, 0.05)?
                .momentum(0.9)?
                .dampening(0.3)?
                .weight_decay(0.01)
        },
        sgd_ref(SgdRef {
            lr: 0.05,
            momentum: 0.9,
            dampening: 0.3,
            wd: 0.01,
            ..base
        }),
    )?;
    check(
        "sgd nesterov wd",
        |p| {
            Sgd::new(p, 0.1)?
                .momentum(0.8)?
                .nesterov(true)?
                .weight_decay(0.05)
        },
        sgd_ref(SgdRef {
            momentum: 0.8,
            nesterov: true,
            wd: 0.05,
            ..base
        }),
    )
}

#[test]
fn adam_and_adamw_match_reference() -> Result<()> {
    let base = AdamRef {
        lr: 0.01,
        b1: 0.9,
        b2: 0.999,
        eps: 1e-8,
        wd: 0.0,
        decoupled: false,
    };
    check("adam", |p| Adam::new(p, 0.01), adam_ref(base))?;
    check(
        "adam betas eps wd",
        |p| {
            Adam::new(p, 0.05)?
                .betas(0.8, 0.99)?
                .eps(1e-6)?
                .weight_decay(0.1)
        },
        adam_ref(AdamRef {
            lr: 0.05,
            b1: 0.8,
            b2: 0.99,
            eps: 1e-6,
            wd: 0.1,
            ..base
        }),
    )?;
    // beta1 <= 0.5 takes the other branch of PyTorch's lerp.
    check(
        "adam small beta1",
        |p| Adam::new(p, 0.02)?.betas(0.3, 0.9),
        adam_ref(AdamRef {
            lr: 0.02,
            b1: 0.3,
            b2: 0.9,
            ..base
        }),
    )?;
    check(
        "adamw default wd",
        |p| AdamW::new(p, 0.01),
        adam_ref(AdamRef {
            wd: 0.01,
            decoupled: true,
            ..base
        }),
    )?;
    check(
        "adamw wd betas",
        |p| AdamW::new(p, 0.05)?.weight_decay(0.1)?.betas(0.85, 0.98),
        adam_ref(AdamRef {
            lr: 0.05,
            b1: 0.85,
            b2: 0.98,
            wd: 0.1,
            decoupled: true,
            ..base
        }),
    )
}

#[test]
fn half_precision_param_and_mixed_dtype_grad() -> Result<()> {
    for dtype in [DType::F16, DType::BF16] {
        let p = Tensor::from_array(NDArray::full(&[3], 1.0, dtype)?, true)?;
        let mut opt = Sgd::new(vec![p.clone()], 0.5)?;
        p.set_grad(Some(Tensor::new(NDArray::full(&[3], 0.5, DType::F32)?)))?;
        opt.step()?;
        assert_eq!(p.dtype(), dtype);
        assert_eq!(values(&p), vec![0.75; 3]);
    }
    Ok(())
}

#[test]
fn update_is_seen_through_shared_buffer_and_records_no_graph() -> Result<()> {
    let data = NDArray::from_vec(vec![1.0f32, 2.0], &[2])?;
    let p = Tensor::from_array(data.clone(), true)?;
    let mut opt = Sgd::new(vec![p.clone()], 0.5)?;
    p.set_grad(Some(Tensor::new(NDArray::from_vec(
        vec![1.0f32, -2.0],
        &[2],
    )?)))?;
    opt.step()?;
    assert_eq!(data.to_vec::<f32>()?, vec![0.5, 3.0]);
    assert!(p.is_leaf());
    // The gradient is left for the caller to clear.
    assert!(p.grad().is_some());
    opt.zero_grad();
    assert!(p.grad().is_none());
    // A step with no gradients changes nothing.
    opt.step()?;
    assert_eq!(data.to_vec::<f32>()?, vec![0.5, 3.0]);
    Ok(())
}

/// sum((p - target)^2) through autograd, minimised by each optimizer: the loss must fall well.
#[test]
fn quadratic_loss_falls() -> Result<()> {
    let target = Tensor::from_vec(vec![1.0f32, -2.0, 0.5, 3.0], &[2, 2])?;
    let run = |opt: &mut dyn Optimizer, p: &Tensor| -> Result<(f64, f64)> {
        let mut first = None;
        let mut last = 0.0;
        for _ in 0..200 {
            opt.zero_grad();
            let loss = p.sub(&target)?.square()?.sum(None, false)?;
            loss.backward()?;
            opt.step()?;
            last = loss.item()?;
            first.get_or_insert(last);
        }
        Ok((first.unwrap_or(0.0), last))
    };
    let make = || Tensor::from_array(NDArray::zeros(&[2, 2], DType::F32).unwrap(), true);
    let p = make()?;
    let (a, b) = run(&mut Sgd::new(vec![p.clone()], 0.05)?.momentum(0.9)?, &p)?;
    assert!(b < a * 1e-4, "sgd: {a} -> {b}");
    let p = make()?;
    let (a, b) = run(&mut Adam::new(vec![p.clone()], 0.1)?, &p)?;
    assert!(b < a * 1e-2, "adam: {a} -> {b}");
    let p = make()?;
    let (a, b) = run(&mut AdamW::new(vec![p.clone()], 0.1)?, &p)?;
    assert!(b < a * 1e-2, "adamw: {a} -> {b}");
    Ok(())
}

#[test]
fn clip_grad_norm_matches_hand_computed_norm() -> Result<()> {
    let a = Tensor::from_array(NDArray::zeros(&[3], DType::F32)?, true)?;
    let b = Tensor::from_array(NDArray::zeros(&[2, 2], DType::F64)?, true)?;
    let no_grad = Tensor::from_array(NDArray::zeros(&[5], DType::F32)?, true)?;
    let params = [a.clone(), b.clone(), no_grad.clone()];
    let set = || -> Result<()> {
        a.set_grad(Some(Tensor::new(NDArray::from_vec(
            vec![3.0f32, -4.0, 0.0],
            &[3],
        )?)))?;
        // A broadcast view (read-only, non-contiguous) of ones.
        b.set_grad(Some(Tensor::new(
            NDArray::ones(&[1], DType::F64)?.broadcast_to(&[2, 2])?,
        )))
    };
    set()?;
    let want = 29f64.sqrt();
    // Under the limit: the norm is reported and nothing is scaled.
    let norm = clip_grad_norm(&params, 10.0)?;
    assert!((norm - want).abs() < 1e-12);
    assert_eq!(values(&a.grad().unwrap()), vec![3.0, -4.0, 0.0]);
    // Over the limit: scaled by max_norm / (norm + 1e-6).
    let norm = clip_grad_norm(&params, 1.0)?;
    assert!((norm - want).abs() < 1e-12);
    let coef = 1.0 / (want + 1e-6);
    assert_close(
        &values(&a.grad().unwrap()),
        &[3.0 * coef, -4.0 * coef, 0.0],
        DType::F32,
        "a",
    );
    assert_close(&values(&b.grad().unwrap()), &[coef; 4], DType::F64, "b");
    assert!(no_grad.grad().is_none());
    let after = clip_grad_norm(&params, 1.0)?;
    assert!((after - 1.0).abs() < 1e-5, "{after}");

    // One gradient array shared by two parameters (as `add`'s backward hands out) is scaled
    // once for each, and the shared array itself is left alone.
    let shared = Tensor::new(NDArray::from_vec(vec![6.0f64, 8.0], &[2])?);
    let (c, d) = (
        Tensor::from_array(NDArray::zeros(&[2], DType::F64)?, true)?,
        Tensor::from_array(NDArray::zeros(&[2], DType::F64)?, true)?,
    );
    c.set_grad(Some(shared.clone()))?;
    d.set_grad(Some(shared.clone()))?;
    let norm = clip_grad_norm(&[c.clone(), d.clone()], 1.0)?;
    assert!((norm - 200f64.sqrt()).abs() < 1e-12);
    let k = 1.0 / (200f64.sqrt() + 1e-6);
    assert_close(
        &values(&c.grad().unwrap()),
        &[6.0 * k, 8.0 * k],
        DType::F64,
        "c",
    );
    assert_close(
        &values(&d.grad().unwrap()),
        &[6.0 * k, 8.0 * k],
        DType::F64,
        "d",
    );
    assert_eq!(values(&shared), vec![6.0, 8.0]);

    assert!(matches!(
        clip_grad_norm(&params, -1.0),
        Err(Error::InvalidArgument { .. })
    ));
    Ok(())
}

#[test]
fn schedules_follow_closed_forms() -> Result<()> {
    let step = StepLr::new(0.1, 3, 0.5)?;
    for t in 0..20 {
        let want = 0.1 * 0.5f64.powi((t / 3) as i32);
        assert!((step.lr_at(t) - want).abs() < 1e-15, "step {t}");
    }
    assert_eq!(step.lr_at(2), 0.1);
    assert_eq!(step.lr_at(3), 0.05);

    let cos = CosineLr::new(1.0, 10, 0.1)?;
    for t in 0..=30 {
        let want = 0.1 + 0.9 * (1.0 + (std::f64::consts::PI * t as f64 / 10.0).cos()) / 2.0;
        assert!((cos.lr_at(t) - want).abs() < 1e-15, "cos {t}");
    }
    assert!((cos.lr_at(0) - 1.0).abs() < 1e-15);
    assert!((cos.lr_at(5) - 0.55).abs() < 1e-15);
    assert!((cos.lr_at(10) - 0.1).abs() < 1e-15);

    let warm = LinearWarmup::new(4, Box::new(CosineLr::new(1.0, 10, 0.1)?));
    for t in 0..4 {
        assert!(
            (warm.lr_at(t) - (t + 1) as f64 / 4.0).abs() < 1e-15,
            "warm {t}"
        );
    }
    for t in 4..20 {
        assert_eq!(warm.lr_at(t), cos.lr_at(t - 4));
    }
    let flat = LinearWarmup::new(0, Box::new(ConstantLr::new(0.3)?));
    assert_eq!(flat.lr_at(0), 0.3);

    let p = Tensor::from_array(NDArray::zeros(&[1], DType::F32)?, true)?;
    let mut opt = Sgd::new(vec![p], 1.0)?;
    assert_eq!(apply_schedule(&mut opt, &step, 7), 0.025);
    assert_eq!(opt.lr(), 0.025);

    assert!(StepLr::new(0.1, 0, 0.5).is_err());
    assert!(StepLr::new(-0.1, 1, 0.5).is_err());
    assert!(CosineLr::new(0.1, 0, 0.0).is_err());
    assert!(CosineLr::new(0.1, 5, f64::NAN).is_err());
    assert!(ConstantLr::new(f64::INFINITY).is_err());
    Ok(())
}

/// One optimizer runs 6 steps; another runs 3, saves, and a fresh one over fresh copies of
/// the parameters loads that state and runs 3 more: the parameters agree bit for bit.
fn resume_is_exact<O: Optimizer>(make: impl Fn(Vec<Tensor>) -> Result<O>) -> Result<()> {
    let (pa, _) = make_params()?;
    let mut a = make(pa.clone())?;
    for step in 0..6 {
        set_grads(&pa, step)?;
        a.step()?;
    }
    let (pb, _) = make_params()?;
    let mut b = make(pb.clone())?;
    for step in 0..3 {
        set_grads(&pb, step)?;
        b.step()?;
    }
    let saved = b.state_dict()?;
    let saved_params: Vec<NDArray> = pb.iter().map(|p| p.array().deep_copy().unwrap()).collect();
    // The snapshot does not move with later steps.
    let before: Vec<Vec<f64>> = saved
        .iter()
        .map(|(_, x)| x.astype(DType::F64).unwrap().to_vec::<f64>().unwrap())
        .collect();
    set_grads(&pb, 3)?;
    b.step()?;
    for ((_, x), v) in saved.iter().zip(&before) {
        assert_eq!(&x.astype(DType::F64)?.to_vec::<f64>()?, v);
    }

    // Fresh parameters (same layouts, the transposed one included) holding b's values.
    let (pc, _) = make_params()?;
    for (c, src) in pc.iter().zip(&saved_params) {
        c.array().assign(src)?;
    }
    let mut c = make(pc.clone())?;
    c.load_state_dict(&saved)?;
    assert_eq!(c.step_count(), 3);
    for step in 3..6 {
        set_grads(&pc, step)?;
        c.step()?;
    }
    for (x, y) in pa.iter().zip(&pc) {
        let (x, y) = (values(x), values(y));
        assert!(
            x.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{x:?} vs {y:?}"
        );
    }
    Ok(())
}

#[test]
fn state_dict_round_trip_resumes_identically() -> Result<()> {
    resume_is_exact(|p| {
        Sgd::new(p, 0.1)?
            .momentum(0.9)?
            .nesterov(true)?
            .weight_decay(0.01)
    })?;
    resume_is_exact(|p| Sgd::new(p, 0.1)?.momentum(0.5)?.dampening(0.2))?;
    resume_is_exact(|p| Adam::new(p, 0.01)?.weight_decay(0.1))?;
    resume_is_exact(|p| AdamW::new(p, 0.01))?;
    Ok(())
}

#[test]
fn state_dict_names_and_load_errors() -> Result<()> {
    let (params, _) = make_params()?;
    let mut opt = Adam::new(params.clone(), 0.01)?;
    set_grads(&params, 1)?; // parameter 4 skips step 1
    opt.step()?;
    let sd = opt.state_dict().unwrap();
    let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"step") && names.contains(&"lr"));
    assert!(names.contains(&"state.3.exp_avg") && names.contains(&"state.3.exp_avg_sq"));
    assert!(names.contains(&"state.0.step"));
    assert!(!names.iter().any(|n| n.starts_with("state.4.")));
    let lookup = |name: &str| sd.iter().find(|(n, _)| n == name).map(|(_, a)| a.clone());
    assert_eq!(lookup("step").unwrap().item::<i64>()?, 1);
    assert_eq!(lookup("state.1.exp_avg").unwrap().shape(), &[4]);

    let fresh = || Adam::new(params.clone(), 0.01);
    let with = |name: &str, arr: NDArray| {
        let mut v: Vec<(String, NDArray)> = sd.iter().filter(|(n, _)| n != name).cloned().collect();
        v.push((name.to_string(), arr));
        v
    };
    // Wrong shape.
    let mut o = fresh()?;
    let e = o
        .load_state_dict(&with(
            "state.0.exp_avg",
            NDArray::zeros(&[3, 2], DType::F64)?,
        ))
        .unwrap_err();
    assert!(
        matches!(&e, Error::ShapeMismatch { op, .. } if *op == "Adam::load_state_dict"),
        "{e}"
    );
    assert_eq!(o.step_count(), 0);
    assert!(
        o.state_dict().unwrap().len() == 2,
        "a failed load changes nothing"
    );
    // Unknown name, index out of range, repeated entry, partial state, bad step.
    let unknown = with(
        "state.0.momentum_buffer",
        NDArray::zeros(&[2, 3], DType::F64)?,
    );
    let out_of_range = with("state.9.exp_avg", NDArray::zeros(&[2, 3], DType::F64)?);
    let mut repeated = sd.clone();
    repeated.push(sd[0].clone());
    let partial: Vec<_> = sd
        .iter()
        .filter(|(n, _)| n != "state.2.exp_avg_sq")
        .cloned()
        .collect();
    let bad_step = with("step", NDArray::scalar(-1i64));
    let frac_step = with("step", NDArray::scalar(1.5f64));
    for (what, entries) in [
        ("unknown", unknown),
        ("out of range", out_of_range),
        ("repeated", repeated),
        ("partial", partial),
        ("negative step", bad_step),
        ("fractional step", frac_step),
    ] {
        let e = fresh()?.load_state_dict(&entries).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument { op, .. } if *op == "Adam::load_state_dict"),
            "{what}: {e}"
        );
    }
    // SGD names its buffer momentum_buffer and rejects Adam's entries.
    let mut sgd = Sgd::new(params.clone(), 0.1)?.momentum(0.9)?;
    sgd.step()?;
    assert!(sgd
        .state_dict()
        .unwrap()
        .iter()
        .any(|(n, _)| n == "state.0.momentum_buffer"));
    assert!(matches!(
        sgd.load_state_dict(&sd),
        Err(Error::InvalidArgument { .. })
    ));
    Ok(())
}

#[test]
fn constructor_errors_are_typed() -> Result<()> {
    let p = || Tensor::from_array(NDArray::zeros(&[2], DType::F32).unwrap(), true).unwrap();
    let invalid = |r: Result<(), Error>, op: &str| {
        assert!(
            matches!(&r, Err(Error::InvalidArgument { op: o, .. }) if *o == op),
            "{op}: {r:?}"
        );
    };
    let sgd = |r: Result<Sgd>| r.map(|_| ());
    invalid(sgd(Sgd::new(vec![p()], -0.1)), "Sgd::new");
    invalid(sgd(Sgd::new(vec![p()], f64::NAN)), "Sgd::new");
    invalid(sgd(Sgd::new(vec![p()], 0.1)?.momentum(-0.5)), "Sgd::new");
    invalid(
        sgd(Sgd::new(vec![p()], 0.1)?.weight_decay(-1.0)),
        "Sgd::new",
    );
    invalid(sgd(Sgd::new(vec![p()], 0.1)?.nesterov(true)), "Sgd::new");
    invalid(
        sgd(Sgd::new(vec![p()], 0.1)?
            .momentum(0.9)?
            .dampening(0.1)?
            .nesterov(true)),
        "Sgd::new",
    );
    invalid(
        sgd(Sgd::new(vec![p()], 0.1)?
            .momentum(0.9)?
            .nesterov(true)?
            .dampening(0.1)),
        "Sgd::new",
    );
    invalid(
        sgd(Sgd::new(vec![p()], 0.1)?
            .momentum(0.9)?
            .nesterov(true)?
            .momentum(0.0)),
        "Sgd::new",
    );
    let q = p();
    invalid(sgd(Sgd::new(vec![q.clone(), q], 0.1)), "Sgd::new");
    let int = Tensor::new(NDArray::zeros(&[2], DType::I64)?);
    invalid(sgd(Sgd::new(vec![int], 0.1)), "Sgd::new");

    let adam = |r: Result<Adam>| r.map(|_| ());
    invalid(adam(Adam::new(vec![p()], -1e-3)), "Adam::new");
    invalid(
        adam(Adam::new(vec![p()], 1e-3)?.betas(1.0, 0.999)),
        "Adam::new",
    );
    invalid(
        adam(Adam::new(vec![p()], 1e-3)?.betas(-0.1, 0.999)),
        "Adam::new",
    );
    invalid(
        adam(Adam::new(vec![p()], 1e-3)?.betas(0.9, 1.0)),
        "Adam::new",
    );
    invalid(adam(Adam::new(vec![p()], 1e-3)?.eps(-1e-8)), "Adam::new");
    invalid(
        adam(Adam::new(vec![p()], 1e-3)?.weight_decay(-0.1)),
        "Adam::new",
    );
    let adamw = |r: Result<AdamW>| r.map(|_| ());
    invalid(
        adamw(AdamW::new(vec![p()], 1e-3)?.betas(0.9, 1.5)),
        "AdamW::new",
    );
    invalid(adamw(AdamW::new(vec![p()], f64::INFINITY)), "AdamW::new");
    // Valid edge values are accepted.
    Sgd::new(vec![], 0.0)?;
    Adam::new(vec![p()], 0.0)?.betas(0.0, 0.0)?.eps(0.0)?;
    Ok(())
}

/// A parameter large enough to be split across threads (> 2 x 32 Ki elements, not a multiple
/// of the piece size): every piece is updated as the reference loop does, in f64 and in f32.
#[test]
fn large_parameters_split_across_threads_match_reference() -> Result<()> {
    let n = 3 * (1 << 15) + 77;
    for dtype in [DType::F64, DType::F32] {
        let p0: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f64 / 500.0 - 1.0)
            .collect();
        let param = Tensor::from_array(
            NDArray::from_vec(p0.clone(), &[n])?.astype(dtype).unwrap(),
            true,
        )?;
        let mut opt = AdamW::new(vec![param.clone()], 0.01)?.weight_decay(0.1)?;
        let mut reference = adam_ref(AdamRef {
            lr: 0.01,
            b1: 0.9,
            b2: 0.999,
            eps: 1e-8,
            wd: 0.1,
            decoupled: true,
        });
        let mut want = values(&param);
        for step in 0..3 {
            let g: Vec<f64> = (0..n)
                .map(|i| (((i + step) * 31) % 17) as f64 / 8.0 - 1.0)
                .collect();
            let ga = NDArray::from_vec(g.clone(), &[n])?.astype(dtype).unwrap();
            param.set_grad(Some(Tensor::new(ga)))?;
            opt.step()?;
            let g_used: Vec<f64> = NDArray::from_vec(g, &[n])?
                .astype(dtype)
                .unwrap()
                .astype(DType::F64)
                .unwrap()
                .to_vec::<f64>()?;
            reference(0, &mut want, &g_used);
            assert_close(
                &values(&param),
                &want,
                dtype,
                &format!("{dtype} step {step}"),
            );
        }
    }
    Ok(())
}
