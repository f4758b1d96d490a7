//! Elementwise maps from a strided source into a fresh contiguous destination; `astype` is the
//! map through `Element::cast` (NumPy's cast rules, see quill-core's dtype module), except
//! between f32 and bf16, f64 or f32 (what autocast and mixed precision convert every step),
//! which convert directly, bit-identical to the general path but vectorised.

use crate::par::for_dst_rows;
use crate::simd::with_best_simd;
use crate::storage::{CpuElement, CpuStorage};
use crate::{dispatch_dtype, with_storage};
use half::bf16;
use quill_core::{DType, Element, Layout, LoopPlan, Result};

/// `dst[i] = f(src[offset of element i of src_l])`, `dst` contiguous with `src_l.numel()` elements.
pub fn map_into<A, B, F>(dst: &mut [B], src: &[A], src_l: &Layout, f: F)
where
    A: Copy + Sync,
    B: Copy + Send,
    F: Fn(A) -> B + Sync + Send,
{
    let dst_l = Layout::contiguous(src_l.shape())
        .expect("a valid layout's shape has a valid element count");
    let plan = LoopPlan::new(&[&dst_l, src_l]);
    if plan.numel() == 0 {
        return;
    }
    if plan.ndim() == 0 {
        dst[0] = f(src[plan.offsets[1]]);
        return;
    }
    // `dst` is operand 0, contiguous: a run's destination is its linear position.
    let row_len: usize = plan.shape[1..].iter().product();
    for_dst_rows(dst, &plan, 1, |chunk, base, r0, r1| {
        let runs = plan.runs_of([1], r0 * row_len..r1 * row_len);
        let [sl] = runs.inner_strides();
        for r in runs {
            let [s] = r.offsets;
            let out = &mut chunk[r.pos - base..r.pos - base + r.len];
            if sl == 1 {
                let run = &src[s..s + r.len];
                with_best_simd(
                    #[inline(always)]
                    || {
                        for (o, &a) in out.iter_mut().zip(run) {
                            *o = f(a);
                        }
                    },
                );
            } else {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = f(src[(s as isize + i as isize * sl) as usize]);
                }
            }
        }
    });
}

/// A contiguous copy of `src` seen through `l`, converted to `dtype` with NumPy's cast rules.
pub fn cast(src: &CpuStorage, l: &Layout, dtype: DType) -> Result<CpuStorage> {
    use CpuStorage as S;
    match (src, dtype) {
        (S::BF16(s), DType::F32) => return direct(s, l, bf16_to_f32),
        (S::F32(s), DType::BF16) => return direct(s, l, f32_to_bf16),
        (S::F32(s), DType::F64) => return direct(s, l, |x: f32| x as f64),
        (S::F64(s), DType::F32) => return direct(s, l, |x: f64| x as f32),
        _ => {}
    }
    Ok(dispatch_dtype!(dtype, B => {
        let mut out = crate::pool::take::<B>("astype", l.numel())?;
        with_storage!(src, s => map_into(&mut out, s, l, |a| a.cast::<B>()));
        <B as CpuElement>::wrap(out)
    }))
}

/// `cast` between two float types through `f`, which gives what `Element::cast` would.
fn direct<A, B>(src: &[A], l: &Layout, f: impl Fn(A) -> B + Sync + Send) -> Result<CpuStorage>
where
    A: Copy + Sync,
    B: CpuElement + Copy + Send,
{
    let mut out = crate::pool::take::<B>("astype", l.numel())?;
    map_into(&mut out, src, l, f);
    Ok(<B as CpuElement>::wrap(out))
}

/// bf16 to f32: exact, the bits shifted into place.
#[inline(always)]
fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits(u32::from(x.to_bits()) << 16)
}

/// f32 to bf16, to nearest even, a NaN kept as a quiet NaN of its sign: `half`'s `from_f32`
/// (what `Element::cast` calls), without its branch, so that the loop vectorises.
#[inline(always)]
fn f32_to_bf16(x: f32) -> bf16 {
    let b = x.to_bits();
    // Wrapping: a NaN near the top of the range may carry out; the select discards it.
    let rounded = b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16;
    let nan = (b >> 16) | 0x40;
    bf16::from_bits(if x.is_nan() { nan } else { rounded } as u16)
}

/// Reads one element as a `Scalar`-convertible value of type `T` (used by `item()` and printing).
pub fn read_as<T: Element>(src: &CpuStorage, offset: usize) -> T {
    with_storage!(src, s => s[offset].cast::<T>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// Every bf16 widens as `Element::cast` widens it; f32 values (a sweep of bit patterns
    /// with every exponent, the ties, infinities and NaNs with payloads) round as it rounds.
    #[test]
    fn direct_float_casts_equal_the_general_path() {
        for bits in 0..=u16::MAX {
            let x = bf16::from_bits(bits);
            let (d, g) = (bf16_to_f32(x), x.cast::<f32>());
            assert!(
                d.to_bits() == g.to_bits() || (d.is_nan() && g.is_nan()),
                "{bits:#x}"
            );
        }
        let specials = [
            0x7F80_0000u32,
            0xFF80_0000,
            0x7FC0_0001,
            0xFFBF_FFFF,
            0x7F80_0001,
            0x3F80_8000,
            0x3F81_8000,
            0x3F80_8001,
            0x7F7F_FFFF,
            0x0000_8000,
            0x0001_8000,
            0x8000_0000,
        ];
        let sweep = (0..u32::MAX / 9973).map(|i| i * 9973);
        for bits in specials.into_iter().chain(sweep) {
            let x = f32::from_bits(bits);
            let (d, g) = (f32_to_bf16(x), x.cast::<bf16>());
            assert_eq!(d.to_bits(), g.to_bits(), "{bits:#x}");
            let (d, g) = (x as f64, x.cast::<f64>());
            assert!(d.to_bits() == g.to_bits() || d.is_nan(), "{bits:#x}");
            let w = f64::from(x) * 1.000_000_1;
            assert!((w as f32).to_bits() == w.cast::<f32>().to_bits() || w.is_nan());
        }
    }

    /// Through `cast` over a transposed, reversed view: every element lands where the general
    /// path puts it.
    #[test]
    fn direct_casts_read_strided_views() {
        let v: Vec<f32> = (0..6 * 7).map(|i| (i as f32 - 20.0) * 0.3713).collect();
        let l = Layout::contiguous(&[6, 7])
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let src = CpuStorage::F32(crate::buf::Buf::from(v.clone()));
        let cast_out = cast(&src, &l, DType::BF16).unwrap();
        let CpuStorage::BF16(out) = &cast_out else {
            panic!("dtype")
        };
        for (i, o) in out.iter().enumerate() {
            let (r, c) = (i / 6, i % 6);
            assert_eq!(o.to_bits(), v[c * 7 + r].cast::<bf16>().to_bits());
        }
    }
}
