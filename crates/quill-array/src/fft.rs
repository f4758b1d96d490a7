//! Discrete Fourier transforms with NumPy's and the Array API's semantics: `fft` / `ifft` of
//! complex (or real, made complex) data along one axis, cropped or zero-padded to `n` points;
//! `rfft` / `irfft` between real signals and their half spectra; `hfft` / `ihfft` for Hermitian
//! signals; the n-dimensional forms over several axes; the sample frequencies. The transforms
//! run on the host with rustfft (any length: mixed radix, Rader and Bluestein) and, between real
//! signals and half spectra, realfft over it, one plan per call over every lane of the axis
//! (lanes along an inner axis a wave of columns at a time, `fft/columns.rs`); f32 and
//! complex64 compute in single precision, everything else in double, as NumPy 2 does.

use crate::device::Device;
use crate::ndarray::axis_range;
use crate::NDArray;
use num_complex::Complex;
use quill_core::shape::normalize_axis;
use quill_core::{DType, Error, Result};
use rayon::prelude::*;
use realfft::RealFftPlanner;
use rustfft::{Fft, FftNum, FftPlanner};
use std::sync::{Arc, Mutex, OnceLock};

mod columns;

/// Which direction carries the `1/n` scale (NumPy's `norm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norm {
    /// The forward transform unscaled, the inverse scaled by `1/n` (the default).
    Backward,
    /// Both scaled by `1/sqrt(n)`.
    Ortho,
    /// The forward transform scaled by `1/n`, the inverse unscaled.
    Forward,
}

impl Norm {
    /// The norm called `name` (`"backward"`, `"ortho"`, `"forward"`).
    pub fn parse(name: &str) -> Result<Norm> {
        match name {
            "backward" => Ok(Norm::Backward),
            "ortho" => Ok(Norm::Ortho),
            "forward" => Ok(Norm::Forward),
            other => Err(Error::invalid(
                "fft",
                format!("norm must be 'backward', 'ortho' or 'forward', got {other:?}"),
            )),
        }
    }

    /// The factor a transform of `n` points in direction `inverse` is scaled by.
    fn scale(self, n: usize, inverse: bool) -> f64 {
        match (self, inverse) {
            (Norm::Ortho, _) => 1.0 / (n as f64).sqrt(),
            (Norm::Backward, true) | (Norm::Forward, false) => 1.0 / n as f64,
            _ => 1.0,
        }
    }

    /// The norm with its direction swapped (how hfft and ihfft reuse irfft and rfft).
    fn swapped(self) -> Norm {
        match self {
            Norm::Backward => Norm::Forward,
            Norm::Forward => Norm::Backward,
            Norm::Ortho => Norm::Ortho,
        }
    }
}

/// The complex dtype a transform of `dtype` computes in.
fn complex_of(op: &'static str, dtype: DType) -> Result<DType> {
    match dtype {
        DType::C64 | DType::F32 | DType::F16 | DType::BF16 => Ok(DType::C64),
        DType::Bool => Err(Error::invalid(
            op,
            "takes numbers, not bool; astype a float first",
        )),
        _ => Ok(DType::C128),
    }
}

fn check_points(op: &'static str, n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::invalid(
            op,
            "invalid number of data points (0): n must be at least 1",
        ));
    }
    Ok(())
}

/// `a` with `axis` moved last, cropped or zero-padded to `n` there, as host lanes of `n`
/// values of `E` (a's dtype) in C order, with the permuted shape.
fn lanes<E: quill_core::Element>(
    a: &NDArray,
    axis: usize,
    n: usize,
) -> Result<(Vec<E>, Vec<usize>)> {
    let nd = a.ndim();
    let mut order: Vec<isize> = (0..nd as isize).filter(|&i| i != axis as isize).collect();
    order.push(axis as isize);
    let moved = a.permute(&order)?;
    let len = a.shape()[axis];
    let kept = len.min(n);
    let cut = if kept < len {
        moved.slice(&axis_range(nd, nd - 1, 0, kept))?
    } else {
        moved
    };
    let v: Vec<E> = cut.to_device(Device::Cpu)?.to_vec()?;
    let mut shape = cut.shape().to_vec();
    if kept == n {
        return Ok((v, shape));
    }
    let rows: usize = shape[..nd - 1].iter().product();
    let mut out = vec![E::zero(); rows * n];
    for r in 0..rows {
        out[r * n..r * n + kept].copy_from_slice(&v[r * kept..(r + 1) * kept]);
    }
    shape[nd - 1] = n;
    Ok((out, shape))
}

/// The array of `shape` (axis last) from `v`, with the last axis moved back to `axis`.
fn unlanes<E: quill_core::Element>(
    v: Vec<E>,
    shape: &[usize],
    axis: usize,
    device: Device,
) -> Result<NDArray> {
    let nd = shape.len();
    let a = NDArray::from_vec(v, shape)?;
    // Position i of the result takes dim order[i] of the lanes' layout.
    let order: Vec<isize> = (0..nd)
        .map(|i| {
            if i == axis {
                nd as isize - 1
            } else if i < axis {
                i as isize
            } else {
                i as isize - 1
            }
        })
        .collect();
    on_device(a.permute(&order)?.compact()?, device)
}

/// An element type with one process-wide planner, which keeps every plan it made: planning a
/// large or prime length costs more than the transform, so a repeated length plans once.
trait Planned: FftNum {
    fn planner() -> &'static Mutex<FftPlanner<Self>>;
}

macro_rules! planned {
    ($t:ty) => {
        impl Planned for $t {
            fn planner() -> &'static Mutex<FftPlanner<Self>> {
                static P: OnceLock<Mutex<FftPlanner<$t>>> = OnceLock::new();
                P.get_or_init(|| Mutex::new(FftPlanner::new()))
            }
        }
    };
}
planned!(f32);
planned!(f64);

/// realfft's planner for the transforms between real signals and half spectra (about twice as
/// fast as a complex transform of the same length), one per precision, kept as `Planned`'s.
trait RealPlanned: FftNum {
    fn real_planner() -> &'static Mutex<RealFftPlanner<Self>>;
}

macro_rules! real_planned {
    ($t:ty) => {
        impl RealPlanned for $t {
            fn real_planner() -> &'static Mutex<RealFftPlanner<Self>> {
                static P: OnceLock<Mutex<RealFftPlanner<$t>>> = OnceLock::new();
                P.get_or_init(|| Mutex::new(RealFftPlanner::new()))
            }
        }
    };
}
real_planned!(f32);
real_planned!(f64);

/// How many lanes of `n` points each thread-pool task takes: at least 32k values a task.
fn lanes_per_task(n: usize) -> usize {
    (32_768 / n.max(1)).max(1)
}

/// The half spectra (`n / 2 + 1` values a lane) of every real lane of `n` values of `v`,
/// scaled. Each lane is copied into a task's own buffer first (realfft uses its input as
/// scratch), so `v` can be the array's own memory.
fn forward_real<T: RealPlanned>(v: &[T], n: usize, scale: f64) -> Vec<Complex<T>> {
    let half = n / 2 + 1;
    let rows = v.len() / n;
    let mut out = vec![Complex::new(T::zero(), T::zero()); rows * half];
    if rows == 0 {
        return out;
    }
    let plan = T::real_planner()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .plan_fft_forward(n);
    let s = T::from_f64(scale).unwrap_or_else(T::one);
    let per = lanes_per_task(n);
    v.par_chunks(per * n)
        .zip(out.par_chunks_mut(per * half))
        .for_each(|(src, dst)| {
            let mut scratch = plan.make_scratch_vec();
            let mut x = plan.make_input_vec();
            for (lane, y) in src.chunks(n).zip(dst.chunks_mut(half)) {
                x.copy_from_slice(lane);
                // The lengths are the plan's own, so realfft has nothing to refuse.
                let _ = plan.process_with_scratch(&mut x, y, &mut scratch);
                if scale != 1.0 {
                    y.iter_mut().for_each(|z| *z = *z * s);
                }
            }
        });
    out
}

/// The real signals (`n` values a lane) of every half spectrum (`n / 2 + 1` values a lane) of
/// `v` (used as scratch), scaled. The imaginary parts of the zero and (even `n`) Nyquist
/// frequencies are dropped first, as NumPy's `irfft` ignores them.
fn inverse_real<T: RealPlanned>(v: &mut [Complex<T>], n: usize, scale: f64) -> Vec<T> {
    let half = n / 2 + 1;
    let rows = v.len() / half;
    let mut out = vec![T::zero(); rows * n];
    if rows == 0 {
        return out;
    }
    let plan = T::real_planner()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .plan_fft_inverse(n);
    let s = T::from_f64(scale).unwrap_or_else(T::one);
    let per = lanes_per_task(n);
    v.par_chunks_mut(per * half)
        .zip(out.par_chunks_mut(per * n))
        .for_each(|(src, dst)| {
            let mut scratch = plan.make_scratch_vec();
            for (x, y) in src.chunks_mut(half).zip(dst.chunks_mut(n)) {
                x[0].im = T::zero();
                if n.is_multiple_of(2) {
                    x[half - 1].im = T::zero();
                }
                let _ = plan.process_with_scratch(x, y, &mut scratch);
                if scale != 1.0 {
                    y.iter_mut().for_each(|r| *r = *r * s);
                }
            }
        });
    out
}

/// `out` (on the host) moved to `device`.
fn on_device(out: NDArray, device: Device) -> Result<NDArray> {
    if device == Device::Cpu {
        Ok(out)
    } else {
        out.to_device(device)
    }
}

/// The process-wide plan for a complex transform of `n` points.
fn plan_of<T: Planned>(n: usize, inverse: bool) -> Arc<dyn Fft<T>> {
    // A poisoned lock only means another thread panicked mid-plan; the cache is still a valid
    // planner.
    let mut p = T::planner().lock().unwrap_or_else(|e| e.into_inner());
    if inverse {
        p.plan_fft_inverse(n)
    } else {
        p.plan_fft_forward(n)
    }
}

/// Transforms every lane of `n` values of `v` in place, then scales it. Lanes are shared out
/// to the thread pool in blocks of at least 32k values.
fn transform<T: Planned>(v: &mut [Complex<T>], n: usize, inverse: bool, scale: f64) {
    if v.is_empty() {
        return;
    }
    let plan = plan_of::<T>(n, inverse);
    let s = T::from_f64(scale).unwrap_or_else(T::one);
    v.par_chunks_mut(lanes_per_task(n) * n).for_each(|block| {
        plan.process(block);
        if scale != 1.0 {
            block.iter_mut().for_each(|z| *z = *z * s);
        }
    });
}

/// Transforms `v`, a C-order array of `shape`, along each of `axes` in turn (whole axes, no
/// crop or pad), in place: the last axis lane by lane, the others through `columns::along`.
fn in_place<T: Planned>(
    v: &mut [Complex<T>],
    shape: &[usize],
    axes: &[usize],
    inverse: bool,
    norm: Norm,
) {
    for &ax in axes {
        let len = shape[ax];
        let scale = norm.scale(len, inverse);
        if ax + 1 == shape.len() {
            transform(v, len, inverse, scale);
        } else {
            let outer = shape[..ax].iter().product();
            let inner = shape[ax + 1..].iter().product();
            let s = T::from_f64(scale).unwrap_or_else(T::one);
            columns::along(v, [outer, len, inner], &plan_of::<T>(len, inverse), s);
        }
    }
}

/// The complex transform of `z` (complex64 or complex128) along whole `axes`, in order, as a
/// CPU array: one host copy, transformed in place.
fn whole_axes(z: &NDArray, axes: &[usize], inverse: bool, norm: Norm) -> Result<NDArray> {
    macro_rules! go {
        ($t:ty) => {{
            let mut v: Vec<Complex<$t>> = z.to_vec()?;
            in_place(&mut v, z.shape(), axes, inverse, norm);
            NDArray::from_vec(v, z.shape())
        }};
    }
    if z.dtype() == DType::C64 {
        go!(f32)
    } else {
        go!(f64)
    }
}

/// The axes of an n-dimensional plan when every one is transformed whole (its `s` entry absent
/// or the axis' length) and the array has elements, in the order they run (the plan's last
/// axis first); `None` otherwise.
fn whole_plan(a: &NDArray, plan: &[(isize, Option<usize>)]) -> Option<Vec<usize>> {
    if a.numel() == 0 {
        return None;
    }
    plan.iter()
        .rev()
        .map(|&(ax, n)| {
            let ax = normalize_axis("fftn", ax, a.ndim(), 0).ok()?;
            (n.is_none() || n == Some(a.shape()[ax])).then_some(ax)
        })
        .collect()
}

/// A complex transform of `a` along `axis` in the precision of `dtype` (c64 or c128).
fn complex_fft(
    op: &'static str,
    a: &NDArray,
    n: Option<usize>,
    axis: isize,
    norm: Norm,
    inverse: bool,
) -> Result<NDArray> {
    if a.ndim() == 0 {
        return Err(Error::invalid(
            op,
            "needs at least one dimension, got a 0-d array",
        ));
    }
    let ax = normalize_axis(op, axis, a.ndim(), 0)?;
    let n = n.unwrap_or(a.shape()[ax]);
    check_points(op, n)?;
    let dtype = complex_of(op, a.dtype())?;
    let z = if a.dtype() == dtype {
        a.clone()
    } else {
        a.astype(dtype)?
    };
    crate::fallback::note_off_host(op, a.device());
    let scale = norm.scale(n, inverse);
    if ax + 1 < z.ndim() && n == z.shape()[ax] && z.numel() > 0 {
        return on_device(whole_axes(&z, &[ax], inverse, norm)?, a.device());
    }
    if dtype == DType::C64 {
        let (mut v, shape) = lanes::<Complex<f32>>(&z, ax, n)?;
        transform(&mut v, n, inverse, scale);
        unlanes(v, &shape, ax, a.device())
    } else {
        let (mut v, shape) = lanes::<Complex<f64>>(&z, ax, n)?;
        transform(&mut v, n, inverse, scale);
        unlanes(v, &shape, ax, a.device())
    }
}

/// The one-dimensional DFT of `a` along `axis` (NumPy's `fft.fft`): `n` points (the axis'
/// length by default; fewer crop, more zero-pad), complex64 for f32 / complex64 input, else
/// complex128.
pub fn fft(a: &NDArray, n: Option<usize>, axis: isize, norm: Norm) -> Result<NDArray> {
    complex_fft("fft", a, n, axis, norm, false)
}

/// The inverse of [`fft`] (NumPy's `fft.ifft`).
pub fn ifft(a: &NDArray, n: Option<usize>, axis: isize, norm: Norm) -> Result<NDArray> {
    complex_fft("ifft", a, n, axis, norm, true)
}

fn refuse_complex(op: &'static str, a: &NDArray) -> Result<()> {
    if a.dtype().is_complex() {
        return Err(Error::invalid(
            op,
            format!(
                "takes a real signal, got {}; use fft for complex input",
                a.dtype()
            ),
        ));
    }
    Ok(())
}

/// The DFT of a real signal keeping the `n / 2 + 1` non-negative frequencies (NumPy's
/// `fft.rfft`).
pub fn rfft(a: &NDArray, n: Option<usize>, axis: isize, norm: Norm) -> Result<NDArray> {
    const OP: &str = "rfft";
    refuse_complex(OP, a)?;
    if a.ndim() == 0 {
        return Err(Error::invalid(
            OP,
            "needs at least one dimension, got a 0-d array",
        ));
    }
    let ax = normalize_axis(OP, axis, a.ndim(), 0)?;
    let n = n.unwrap_or(a.shape()[ax]);
    check_points(OP, n)?;
    let real = complex_of(OP, a.dtype())?.real_part();
    let x = if a.dtype() == real {
        a.clone()
    } else {
        a.astype(real)?
    };
    crate::fallback::note_off_host(OP, a.device());
    let scale = norm.scale(n, false);
    let last = ax + 1 == a.ndim() && n == a.shape()[ax];
    macro_rules! go {
        ($t:ty) => {{
            // Whole last-axis lanes are read where they lie; others are gathered first.
            let (out, mut shape) = if last {
                let out = x.with_host_slice(|v: &[$t]| forward_real(v, n, scale))?;
                (out, x.shape().to_vec())
            } else {
                let (v, shape) = lanes::<$t>(&x, ax, n)?;
                (forward_real(&v, n, scale), shape)
            };
            shape[a.ndim() - 1] = n / 2 + 1;
            unlanes(out, &shape, ax, a.device())
        }};
    }
    if real == DType::F32 {
        go!(f32)
    } else {
        go!(f64)
    }
}

/// The real signal of `n` points (default `2 (m - 1)` for `m` given frequencies) whose
/// [`rfft`] is `a` (NumPy's `fft.irfft`): the half spectrum is extended by conjugate symmetry;
/// the imaginary parts of the zero and Nyquist frequencies do not contribute.
pub fn irfft(a: &NDArray, n: Option<usize>, axis: isize, norm: Norm) -> Result<NDArray> {
    const OP: &str = "irfft";
    if a.ndim() == 0 {
        return Err(Error::invalid(
            OP,
            "needs at least one dimension, got a 0-d array",
        ));
    }
    let ax = normalize_axis(OP, axis, a.ndim(), 0)?;
    let m = a.shape()[ax];
    let n = match n {
        Some(n) => n,
        None if m >= 1 => 2 * (m - 1),
        None => 0,
    };
    check_points(OP, n)?;
    let dtype = complex_of(OP, a.dtype())?;
    let z = if a.dtype() == dtype {
        a.clone()
    } else {
        a.astype(dtype)?
    };
    crate::fallback::note_off_host(OP, a.device());
    let scale = norm.scale(n, true);
    // The half spectrum needs n / 2 + 1 entries: crop or zero-pad to that.
    let half = n / 2 + 1;
    macro_rules! go {
        ($t:ty) => {{
            let (mut v, mut shape) = lanes::<Complex<$t>>(&z, ax, half)?;
            let out = inverse_real(&mut v, n, scale);
            shape[a.ndim() - 1] = n;
            unlanes(out, &shape, ax, a.device())
        }};
    }
    if dtype == DType::C64 {
        go!(f32)
    } else {
        go!(f64)
    }
}

/// The real spectrum of a signal with Hermitian symmetry given by its first half (NumPy's
/// `fft.hfft`): `irfft(conj(a))` with the norm's direction swapped.
pub fn hfft(a: &NDArray, n: Option<usize>, axis: isize, norm: Norm) -> Result<NDArray> {
    let c = if a.dtype().is_complex() {
        a.conj()?
    } else {
        a.clone()
    };
    irfft(&c, n, axis, norm.swapped())
}

/// The inverse of [`hfft`] (NumPy's `fft.ihfft`): `conj(rfft(a))` with the norm's direction
/// swapped.
pub fn ihfft(a: &NDArray, n: Option<usize>, axis: isize, norm: Norm) -> Result<NDArray> {
    rfft(a, n, axis, norm.swapped())?.conj()
}

/// The axes and sizes of an n-dimensional transform: `axes` default to the last `s.len()`
/// (or all) axes, `s` to their lengths.
fn plan_axes(
    op: &'static str,
    a: &NDArray,
    s: Option<&[usize]>,
    axes: Option<&[isize]>,
) -> Result<Vec<(isize, Option<usize>)>> {
    let nd = a.ndim() as isize;
    let axes: Vec<isize> = match (axes, s) {
        (Some(ax), _) => ax.to_vec(),
        (None, Some(s)) => (nd - s.len() as isize..nd).collect(),
        (None, None) => (0..nd).collect(),
    };
    if let Some(s) = s {
        if s.len() != axes.len() {
            return Err(Error::invalid(
                op,
                format!(
                    "s has {} entries but axes has {}; give one size per axis",
                    s.len(),
                    axes.len()
                ),
            ));
        }
    }
    let mut seen = Vec::new();
    for &ax in &axes {
        let n = normalize_axis(op, ax, a.ndim(), 0)?;
        if seen.contains(&n) {
            return Err(Error::DuplicateAxis {
                op,
                axis: ax,
                axes: axes.clone(),
            });
        }
        seen.push(n);
    }
    Ok(axes
        .iter()
        .enumerate()
        .map(|(i, &ax)| (ax, s.map(|s| s[i])))
        .collect())
}

/// The n-dimensional DFT over `axes` (NumPy's `fft.fftn`).
pub fn fftn(
    a: &NDArray,
    s: Option<&[usize]>,
    axes: Option<&[isize]>,
    norm: Norm,
) -> Result<NDArray> {
    let mut out = a.astype(complex_of("fftn", a.dtype())?)?;
    let plan = plan_axes("fftn", a, s, axes)?;
    if let Some(order) = whole_plan(a, &plan) {
        crate::fallback::note_off_host("fftn", a.device());
        return on_device(whole_axes(&out, &order, false, norm)?, a.device());
    }
    for (ax, n) in plan.into_iter().rev() {
        out = fft(&out, n, ax, norm)?;
    }
    Ok(out)
}

/// The inverse of [`fftn`] (NumPy's `fft.ifftn`).
pub fn ifftn(
    a: &NDArray,
    s: Option<&[usize]>,
    axes: Option<&[isize]>,
    norm: Norm,
) -> Result<NDArray> {
    let mut out = a.astype(complex_of("ifftn", a.dtype())?)?;
    let plan = plan_axes("ifftn", a, s, axes)?;
    if let Some(order) = whole_plan(a, &plan) {
        crate::fallback::note_off_host("ifftn", a.device());
        return on_device(whole_axes(&out, &order, true, norm)?, a.device());
    }
    for (ax, n) in plan.into_iter().rev() {
        out = ifft(&out, n, ax, norm)?;
    }
    Ok(out)
}

/// The n-dimensional DFT of a real signal (NumPy's `fft.rfftn`): `rfft` over the last axis,
/// then `fft` over the others.
pub fn rfftn(
    a: &NDArray,
    s: Option<&[usize]>,
    axes: Option<&[isize]>,
    norm: Norm,
) -> Result<NDArray> {
    refuse_complex("rfftn", a)?;
    let plan = plan_axes("rfftn", a, s, axes)?;
    let Some(&(last, n_last)) = plan.last() else {
        return Ok(a.clone());
    };
    let nd = a.ndim();
    let last_whole = normalize_axis("rfftn", last, nd, 0)? + 1 == nd
        && n_last.is_none_or(|n| n == a.shape()[nd - 1]);
    if let (true, Some(order)) = (last_whole, whole_plan(a, &plan[..plan.len() - 1])) {
        if !order.is_empty() {
            return rfftn_whole(a, &order, norm);
        }
    }
    let mut out = rfft(a, n_last, last, norm)?;
    for &(ax, n) in plan[..plan.len() - 1].iter().rev() {
        out = fft(&out, n, ax, norm)?;
    }
    Ok(out)
}

/// `rfftn` over the whole last axis and then the whole `order` axes: the half spectra are
/// made from the array where it lies and transformed in place, one array-sized buffer in all.
fn rfftn_whole(a: &NDArray, order: &[usize], norm: Norm) -> Result<NDArray> {
    crate::fallback::note_off_host("rfftn", a.device());
    let real = complex_of("rfftn", a.dtype())?.real_part();
    let x = if a.dtype() == real {
        a.clone()
    } else {
        a.astype(real)?
    };
    let nd = a.ndim();
    let n = a.shape()[nd - 1];
    let mut shape = a.shape().to_vec();
    shape[nd - 1] = n / 2 + 1;
    let scale = norm.scale(n, false);
    macro_rules! go {
        ($t:ty) => {{
            let mut v = x.with_host_slice(|s: &[$t]| forward_real(s, n, scale))?;
            in_place(&mut v, &shape, order, false, norm);
            on_device(NDArray::from_vec(v, &shape)?, a.device())
        }};
    }
    if real == DType::F32 {
        go!(f32)
    } else {
        go!(f64)
    }
}

/// The inverse of [`rfftn`] (NumPy's `fft.irfftn`): `ifft` over all axes but the last, then
/// `irfft` over the last (its output length `s[-1]`, default `2 (m - 1)`).
pub fn irfftn(
    a: &NDArray,
    s: Option<&[usize]>,
    axes: Option<&[isize]>,
    norm: Norm,
) -> Result<NDArray> {
    let plan = plan_axes("irfftn", a, s, axes)?;
    let Some(&(last, n_last)) = plan.last() else {
        return Ok(a.clone());
    };
    let mut out = a.clone();
    for &(ax, n) in plan[..plan.len() - 1].iter().rev() {
        out = ifft(&out, n, ax, norm)?;
    }
    irfft(&out, n_last, last, norm)
}

/// The sample frequencies of an `n`-point DFT with sample spacing `d` (NumPy's
/// `fft.fftfreq`): `[0, 1, ..., n/2 - 1, -n/2, ..., -1] / (d n)` (for even `n`), in `dtype`.
pub fn fftfreq(n: usize, d: f64, dtype: DType) -> Result<NDArray> {
    check_points("fftfreq", n)?;
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let k = if i < n.div_ceil(2) {
                i as f64
            } else {
                i as f64 - n as f64
            };
            k / (d * n as f64)
        })
        .collect();
    NDArray::from_vec(v, &[n])?.astype(dtype)
}

/// The non-negative sample frequencies of an `n`-point [`rfft`] (NumPy's `fft.rfftfreq`):
/// `[0, 1, ..., n / 2] / (d n)`, in `dtype`.
pub fn rfftfreq(n: usize, d: f64, dtype: DType) -> Result<NDArray> {
    check_points("rfftfreq", n)?;
    let v: Vec<f64> = (0..=n / 2).map(|i| i as f64 / (d * n as f64)).collect();
    NDArray::from_vec(v, &[n / 2 + 1])?.astype(dtype)
}
