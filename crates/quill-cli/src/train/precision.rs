//! `--precision f32|bf16`: the arithmetic a training run uses. bf16 is mixed precision through
//! `quill::autocast` (matmul and attention in bf16 with f32 accumulation; convolutions, norms,
//! softmax and losses in f32; f32 parameters and optimizer state), set on the thread that
//! trains. bf16 runs on every CPU: where neither AMX nor AVX512_BF16 is present the GEMM widens
//! bf16 to f32 while packing, so the log line names the kernel a run gets.

use quill::DType;

/// The arithmetic of a training run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    /// Everything in f32 (the default).
    #[default]
    F32,
    /// bf16 autocast with f32 master weights.
    Bf16,
}

impl Precision {
    /// The value of `--precision`, or an error naming the flag and what it accepts.
    pub fn parse(flag: &str, v: &str) -> Result<Precision, String> {
        match v {
            "f32" | "fp32" | "float32" => Ok(Precision::F32),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            other => Err(format!("{flag}: '{other}' is not f32 or bf16")),
        }
    }

    /// The name as `--precision` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        }
    }

    /// The autocast region this precision needs on the calling thread (none for f32); the
    /// caller keeps it alive for as long as the model runs.
    pub fn guard(self) -> Result<Option<quill::AutocastGuard>, String> {
        match self {
            Precision::F32 => Ok(None),
            Precision::Bf16 => quill::autocast(DType::BF16)
                .map(Some)
                .map_err(|e| e.to_string()),
        }
    }

    /// For the setup line: "f32", or "bf16 autocast" with the GEMM kernel bf16 gets here. It
    /// also says that convolutions stay f32 (autocast keeps `conv2d` there until the CPU conv
    /// kernel has bf16 arithmetic) and that the attention kernel widens bf16 to compute.
    pub fn describe(self) -> String {
        match self {
            Precision::F32 => "f32".into(),
            Precision::Bf16 => format!(
                "bf16 autocast (matmul in bf16 on {}, f32 accumulation; conv2d in f32; attention computes in f32)",
                bf16_kernel()
            ),
        }
    }
}

/// Which kernel the bf16 GEMM runs on this CPU, in words, by the rules the GEMM applies: AMX
/// tiles where the CPU has AMX-BF16, `vdpbf16ps` where it has AVX512_BF16 (and the AVX-512
/// family is not overridden by `QUILL_MATMUL_KERNEL`), else bf16 widened to f32.
pub fn bf16_kernel() -> &'static str {
    let forced = std::env::var("QUILL_MATMUL_KERNEL").ok();
    let forced = forced.as_deref().map(str::to_ascii_lowercase);
    let narrow_allowed = |name: &str| forced.as_deref().is_none_or(|f| f == name);
    #[cfg(target_arch = "x86_64")]
    {
        let bf16_dot = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512bf16");
        if bf16_dot && has_amx_bf16() && narrow_allowed("amx") {
            return "AMX tiles";
        }
        if bf16_dot && narrow_allowed("avx512") {
            return "AVX512_BF16 vdpbf16ps";
        }
    }
    let _ = narrow_allowed;
    "the f32 kernel, bf16 widened while packing: no AMX or AVX512_BF16 here"
}

/// Whether CPUID reports AMX-BF16 and AMX-TILE (leaf 7, EDX bits 22 and 24); the GEMM also asks
/// the OS for the tile state, which a CPU that has them is granted on Linux 5.16 and later.
#[cfg(target_arch = "x86_64")]
fn has_amx_bf16() -> bool {
    use std::arch::x86_64::{__cpuid_count, __get_cpuid_max};
    // Leaf 7 is read only when the CPU reports it.
    if __get_cpuid_max(0).0 < 7 {
        return false;
    }
    let edx = __cpuid_count(7, 0).edx;
    edx >> 22 & 1 == 1 && edx >> 24 & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::Precision;

    #[test]
    fn parses_the_two_precisions_and_names_the_flag_otherwise() {
        assert_eq!(Precision::parse("--precision", "bf16"), Ok(Precision::Bf16));
        assert_eq!(Precision::parse("--precision", "f32"), Ok(Precision::F32));
        let e = Precision::parse("--precision", "f16").unwrap_err();
        assert!(e.contains("--precision") && e.contains("f16"), "{e}");
    }

    #[test]
    fn bf16_sets_autocast_until_the_guard_drops() {
        {
            let _g = Precision::Bf16.guard().unwrap();
            assert_eq!(quill::autocast_dtype(), Some(quill::DType::BF16));
        }
        assert_eq!(quill::autocast_dtype(), None);
        assert!(Precision::F32.guard().unwrap().is_none());
    }
}
