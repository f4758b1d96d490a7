//! The per-op methods of NDArray (`a.exp()`, `a.add(&b)`, `a.add_scalar(1.0)`, `a.rsub_scalar(1.0)`,
//! `a.add_assign(&b)`, ...), stamped from quill-core's op tables (`unary_ops!`, `binary_ops!`), so
//! a new op gets its methods from its table row. The callbacks serve quill's Tensor too
//! (exported, hidden: `quill_array::unary_methods`, `quill_array::binary_methods`): each takes
//! the type in its brackets, which must have `unary`, `binary` and `binary_scalar` (and
//! `binary_assign`, `binary_scalar_assign` for the in-place forms).

use super::NDArray;

/// `fn NAME(&self) -> Result<T>` for every unary op.
#[doc(hidden)]
#[macro_export]
macro_rules! unary_methods {
    ([$t:ident] $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr) ),* $(,)?) => {
        impl $t {$(
            #[doc = concat!("Elementwise `", stringify!($n), "` (see `UnaryOp::", stringify!($v), "`).")]
            pub fn $n(&self) -> ::quill_core::Result<$t> {
                self.unary(::quill_core::UnaryOp::$v)
            }
        )*}
    };
}

/// For every binary op: `NAME(&self, other)`, its scalar form and, where the table names one,
/// its reversed scalar form (`rsub_scalar(v)` is `v - self`).
#[doc(hidden)]
#[macro_export]
macro_rules! binary_methods {
    ([$t:ident] $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr, $s:ident,
        [$($rs:ident)?], [$($a:ident, $sa:ident)?]) ),* $(,)?) => {
        impl $t {$(
            #[doc = concat!("Elementwise `", stringify!($n), "` with broadcasting and promotion.")]
            pub fn $n(&self, other: &$t) -> ::quill_core::Result<$t> {
                self.binary(::quill_core::BinaryOp::$v, other)
            }
            #[doc = concat!("`", stringify!($n), "(self, value)` with a weak scalar.")]
            pub fn $s(&self, value: impl Into<::quill_core::Scalar>) -> ::quill_core::Result<$t> {
                self.binary_scalar(::quill_core::BinaryOp::$v, value, false)
            }
            $(
                #[doc = concat!("`", stringify!($n), "(value, self)` with a weak scalar.")]
                pub fn $rs(&self, value: impl Into<::quill_core::Scalar>) -> ::quill_core::Result<$t> {
                    self.binary_scalar(::quill_core::BinaryOp::$v, value, true)
                }
            )?
        )*}
    };
}

/// The in-place forms the table names: `add_assign(&other)`, `add_scalar_assign(value)`.
macro_rules! assign_methods {
    ([$t:ident] $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr, $s:ident,
        [$($rs:ident)?], [$($a:ident, $sa:ident)?]) ),* $(,)?) => {
        impl $t {$($(
            #[doc = concat!("`self = ", stringify!($n), "(self, other)` in place.")]
            pub fn $a(&self, other: &$t) -> ::quill_core::Result<()> {
                self.binary_assign(::quill_core::BinaryOp::$v, other)
            }
            #[doc = concat!("`self = ", stringify!($n), "(self, value)` in place.")]
            pub fn $sa(&self, value: impl Into<::quill_core::Scalar>) -> ::quill_core::Result<()> {
                self.binary_scalar_assign(::quill_core::BinaryOp::$v, value)
            }
        )?)*}
    };
}

quill_core::unary_ops!(unary_methods { NDArray });
quill_core::binary_ops!(binary_methods { NDArray });
quill_core::binary_ops!(assign_methods { NDArray });
