//! Fused optimizer updates on the CPU: one pass over a parameter, its gradient and its state
//! buffers per step (PyTorch's SGD and Adam / AdamW rules, element for element), split across
//! threads for large parameters, each piece inside the widest SIMD context the CPU has.

use crate::{CpuElement, CpuStorage};
use quill_core::backend::AdamScalars;
use quill_core::{DType, Error, Result, Update};
use std::ops::{Add, Div, Mul, Sub};

/// The element types the update rules run in: f64 params update in f64, every other float
/// dtype (f32, f16, bf16) in f32.
trait Float:
    CpuElement
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + PartialOrd
{
    fn sqrt(self) -> Self;
}

impl Float for f32 {
    #[inline]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}
impl Float for f64 {
    #[inline]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// PyTorch's `lerp`: the two forms keep the result exact at weight 0 and 1 respectively.
#[inline]
fn lerp<T: Float>(a: T, b: T, w: T, small: bool, one: T) -> T {
    if small {
        a + w * (b - a)
    } else {
        b - (b - a) * (one - w)
    }
}

/// One rule over one piece: hyper-parameters are converted to `T` once per call, as PyTorch
/// converts its scalar arguments to the tensor's dtype.
#[inline(always)]
fn run<T: Float>(rule: &Update, p: &mut [T], g: &[T], state: &mut [&mut [T]]) {
    match *rule {
        Update::Sgd {
            lr,
            weight_decay,
            momentum,
            dampening,
            nesterov,
            first,
        } => {
            let neg_lr = T::from_f64(-lr);
            // Skipped entirely at 0 (not added as 0 * p), as PyTorch, so inf/NaN stay local.
            let wd = (weight_decay != 0.0).then(|| T::from_f64(weight_decay));
            let decayed = |p: T, g: T| wd.map_or(g, |wd| g + wd * p);
            match state {
                [buf, ..] => {
                    let m = T::from_f64(momentum);
                    let keep = T::from_f64(1.0 - dampening);
                    for ((p, &g), b) in p.iter_mut().zip(g).zip(buf.iter_mut()) {
                        let g = decayed(*p, g);
                        *b = if first { g } else { *b * m + keep * g };
                        let d = if nesterov { g + m * *b } else { *b };
                        *p = *p + neg_lr * d;
                    }
                }
                [] => {
                    for (p, &g) in p.iter_mut().zip(g) {
                        *p = *p + neg_lr * decayed(*p, g);
                    }
                }
            }
        }
        Update::Adam {
            lr,
            betas: (b1, b2),
            eps,
            weight_decay,
            decoupled,
            step,
        } => {
            let [m, v] = state else { return };
            let s = AdamScalars::new(lr, (b1, b2), eps, weight_decay, decoupled, step);
            let c = T::from_f64;
            let (neg_step_size, bc2_sqrt, w1t, one) =
                (c(s.neg_step), c(s.bc2_sqrt), c(s.w1), c(1.0));
            let (b2t, w2t, eps, decay, l2) = (c(s.b2), c(s.w2), c(s.eps), c(s.decay), c(s.l2));
            let (small, decoupled, coupled) = (s.small, s.decoupled, s.coupled);
            for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                let mut pv = *p;
                let g = if coupled { g + l2 * pv } else { g };
                if decoupled {
                    pv = pv * decay;
                }
                *m = lerp(*m, g, w1t, small, one);
                *v = *v * b2t + w2t * g * g;
                let denom = v.sqrt() / bc2_sqrt + eps;
                *p = pv + neg_step_size * *m / denom;
            }
        }
    }
}

/// Elements per task: large parameters are split across threads, and each piece runs inside
/// the widest SIMD context the CPU has (a portable build would otherwise run the rule's sqrt
/// and division at SSE2 width, on one core).
const CHUNK: usize = 1 << 15;

fn run_chunks<T: Float>(rule: &Update, p: &mut [T], g: &[T], mut s: Vec<&mut [T]>) {
    let one = |p: &mut [T], g: &[T], s: &mut [&mut [T]]| {
        crate::simd::with_best_simd(
            #[inline(always)]
            || run(rule, p, g, s),
        )
    };
    if p.len() < 2 * CHUNK {
        return one(p, g, &mut s);
    }
    let mut pieces: Vec<Vec<&mut [T]>> = (0..p.len().div_ceil(CHUNK)).map(|_| Vec::new()).collect();
    for buf in s.iter_mut() {
        for (i, c) in buf.chunks_mut(CHUNK).enumerate() {
            pieces[i].push(c);
        }
    }
    let items = p.chunks_mut(CHUNK).zip(g.chunks(CHUNK)).zip(pieces);
    crate::par::for_each_item(items, crate::par::threads(), |((p, g), mut st)| {
        one(p, g, &mut st)
    });
}

fn internal(op: &'static str, what: &str, n: usize) -> Error {
    Error::invalid(
        op,
        format!("{what} is not {n} elements of the compute dtype (f32 or f64) from its offset"),
    )
}

fn typed<T: Float>(
    rule: &Update,
    (p, po): (&mut CpuStorage, usize),
    (g, go): (&CpuStorage, usize),
    state: &mut [(&mut CpuStorage, usize)],
    n: usize,
) -> Result<()> {
    let op = rule.name();
    let g = T::slice(g)
        .and_then(|v| v.get(go..go + n))
        .ok_or_else(|| internal(op, "the gradient", n))?;
    let mut s: Vec<&mut [T]> = Vec::with_capacity(state.len());
    for (buf, off) in state.iter_mut() {
        let slice = T::slice_mut(buf)
            .and_then(|v| v.get_mut(*off..*off + n))
            .ok_or_else(|| internal(op, "a state buffer", n))?;
        s.push(slice);
    }
    let p = T::slice_mut(p)
        .and_then(|v| v.get_mut(po..po + n))
        .ok_or_else(|| internal(op, "the parameter", n))?;
    run_chunks(rule, p, g, s);
    Ok(())
}

/// One step of `rule` over `n` elements from the given offsets; every buffer is f32 or f64
/// (the parameter's), and they are distinct (the borrow rules see to it).
pub fn update(
    rule: &Update,
    param: (&mut CpuStorage, usize),
    grad: (&CpuStorage, usize),
    state: &mut [(&mut CpuStorage, usize)],
    n: usize,
) -> Result<()> {
    if state.len() != rule.state_len() {
        return Err(Error::invalid(
            rule.name(),
            format!(
                "the rule keeps {} state buffers, {} given",
                rule.state_len(),
                state.len()
            ),
        ));
    }
    match param.0.dtype() {
        DType::F64 => typed::<f64>(rule, param, grad, state, n),
        _ => typed::<f32>(rule, param, grad, state, n),
    }
}
