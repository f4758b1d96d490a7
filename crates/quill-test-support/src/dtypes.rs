//! Every dtype as a list, and `with_dtype!`, which runs a generic body with the Rust element type
//! of a runtime `DType`.

use quill_core::DType;

/// Every dtype, in `DType::ALL`'s order.
pub const ALL_DTYPES: [DType; 13] = DType::ALL;

/// Calls `$body` with `$T` bound to the Rust element type of `$dtype`.
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {{
        use $crate::__reexport::quill_core as __qc;
        match $dtype {
            __qc::DType::C64 => {
                type $T = __qc::C64;
                $body
            }
            __qc::DType::C128 => {
                type $T = __qc::C128;
                $body
            }
            __qc::DType::F32 => {
                type $T = f32;
                $body
            }
            __qc::DType::F64 => {
                type $T = f64;
                $body
            }
            __qc::DType::F16 => {
                type $T = __qc::f16;
                $body
            }
            __qc::DType::BF16 => {
                type $T = __qc::bf16;
                $body
            }
            __qc::DType::I32 => {
                type $T = i32;
                $body
            }
            __qc::DType::I64 => {
                type $T = i64;
                $body
            }
            __qc::DType::U8 => {
                type $T = u8;
                $body
            }
            __qc::DType::Bool => {
                type $T = bool;
                $body
            }
            __qc::DType::I8 => {
                type $T = i8;
                $body
            }
            __qc::DType::I16 => {
                type $T = i16;
                $body
            }
            __qc::DType::U16 => {
                type $T = u16;
                $body
            }
            __qc::DType::U32 => {
                type $T = u32;
                $body
            }
            __qc::DType::U64 => {
                type $T = u64;
                $body
            }
        }
    }};
}
