//! The kernel choice: which GEMM a product runs, from the active kernel family
//! ([`active_kernel`](crate::active_kernel)), the element type's kernels (`types::KernelSet`,
//! stamped in `kernels.rs`), this machine's caches and the tuning row for that path
//! (`tuning.rs`). One table serves f32 and f64 ([`select`]); bf16 runs AMX tiles or
//! `vdpbf16ps` pairs where the CPU has them, and is widened to f32 elsewhere.

use crate::amx::{self, TilePair};
use crate::bf16;
use crate::cache::CacheSizes;
use crate::gemm::Gemm;
use crate::kernel::{active_kernel, Kernel};
use crate::tuning::{Features, Tuning};
use crate::types::Real;
#[cfg(target_arch = "x86_64")]
use crate::types::SimdFamily;

/// The GEMM for element type `T` (f32 or f64) under the active kernel family, with block
/// sizes for this machine's caches.
pub fn select<T: Real>() -> Gemm<T> {
    let caches = CacheSizes::get();
    let kernel = active_kernel();
    let tuning = Tuning::find(real_path(kernel), caches);
    let set = T::kernels();
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 | Kernel::Amx => simd(set.avx512, tuning, caches),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => simd(set.avx2, tuning, caches),
        _ => {
            let g = set.generic;
            Gemm::tuned(g.packed, [g.mr, g.nr, 1], tuning, caches).with_direct(g.direct)
        }
    }
}

/// The path f32 and f64 products (and f16 / bf16 ones widened to f32) take under `k`: AMX
/// CPUs run the AVX-512 kernels for them.
fn real_path(k: Kernel) -> Features {
    match k {
        Kernel::Amx | Kernel::Avx512 => Features::Avx512,
        Kernel::Avx2 => Features::Avx2,
        Kernel::Generic => Features::Generic,
    }
}

/// A SIMD family's GEMM: its full tile, its stampings for the edges, and its fusing form where
/// the tuning row has limits for it.
#[cfg(target_arch = "x86_64")]
fn simd<T: Real>(f: SimdFamily<T>, tuning: &Tuning, caches: CacheSizes) -> Gemm<T> {
    let g =
        Gemm::tuned(f.stamps.packed[2][2], [f.mr, f.nr, 1], tuning, caches).with_stamps(f.stamps);
    match tuning.fuse {
        Some(l) => g.with_fused(f.fused, l.below, l.rows),
        None => g,
    }
}

/// The bf16 GEMM on AVX512_BF16 (`vdpbf16ps` on bf16 pairs) when the AVX-512 family is the
/// active one (so that `with_kernel` can route bf16 to the widening path too). Its kernel
/// rounds a product's last depth block to bf16 itself (`Tile::narrow`).
pub(crate) fn bf16_pairs() -> Option<Gemm<f32, u32>> {
    #[cfg(target_arch = "x86_64")]
    if active_kernel() == Kernel::Avx512 && bf16::narrows_here() {
        let caches = CacheSizes::get();
        let tuning = Tuning::find(Features::Avx512Bf16, caches);
        let g = Gemm::tuned(bf16::avx512bf16, [12, 32, 2], tuning, caches).with_narrow();
        return Some(match tuning.fuse {
            Some(l) => g.with_fused(bf16::avx512bf16_fused, l.below, l.rows),
            None => g,
        });
    }
    None
}

/// The bf16 GEMM on AMX tiles when [`Kernel::Amx`] is the active family.
pub(crate) fn amx_tiles() -> Option<Gemm<f32, TilePair>> {
    #[cfg(target_arch = "x86_64")]
    if active_kernel() == Kernel::Amx {
        let caches = CacheSizes::get();
        let tuning = Tuning::find(Features::Amx, caches);
        let tile = [amx::MR, amx::NR, 2];
        return Some(Gemm::tuned(amx::amx_bf16, tile, tuning, caches).with_narrow());
    }
    None
}
