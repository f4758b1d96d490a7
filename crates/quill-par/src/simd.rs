//! Run-time SIMD selection for code written as plain loops: the same body is compiled again
//! inside a function with AVX-512 (or AVX2 + FMA) enabled, and the best one the CPU supports is
//! called. LLVM then vectorises the inlined loops for that width; a portable build keeps working
//! on any x86_64 (and any other architecture, through the plain call).

/// Calls `f` inside the widest SIMD context this CPU supports. `f` and what it calls should be
/// `#[inline(always)]`, the closure too (`with_best_simd(#[inline(always)] || ...)`): LLVM
/// does not always inline a large closure into the SIMD context, and then the loop compiles
/// for baseline x86_64 (and `mul_add` becomes a libm call).
#[inline(always)]
pub fn with_best_simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the target features `avx512` enables were detected just above.
            return unsafe { avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the target features `avx2` enables were detected just above.
            return unsafe { avx2(f) };
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}
