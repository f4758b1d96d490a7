//! The per-op methods of NDArray (`a.exp()`, `a.add(&b)`, `a.add_scalar(1.0)`, `a.rsub_scalar(1.0)`,
//! `a.add_assign(&b)`, ...), stamped from quill-core's op tables (`unary_ops!`, `binary_ops!`), so
//! a new op gets its methods from its table row. The callbacks serve Tensor too
//! (`tensor/ops/elementwise.rs`): each takes the type in its brackets, which must have `unary`,
//! `binary` and `binary_scalar` (and `binary_assign`, `binary_scalar_assign` for the in-place
//! forms).

use super::NDArray;
use quill_core::{BinaryOp, Result, Scalar, UnaryOp};

/// `fn NAME(&self) -> Result<T>` for every unary op.
macro_rules! unary_methods {
    ([$t:ident] $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr) ),* $(,)?) => {
        impl $t {$(
            #[doc = concat!("Elementwise `", stringify!($n), "` (see `UnaryOp::", stringify!($v), "`).")]
            pub fn $n(&self) -> Result<$t> {
                self.unary(UnaryOp::$v)
            }
        )*}
    };
}
pub(crate) use unary_methods;

/// For every binary op: `NAME(&self, other)`, its scalar form and, where the table names one,
/// its reversed scalar form (`rsub_scalar(v)` is `v - self`).
macro_rules! binary_methods {
    ([$t:ident] $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr, $s:ident,
        [$($rs:ident)?], [$($a:ident, $sa:ident)?]) ),* $(,)?) => {
        impl $t {$(
            #[doc = concat!("Elementwise `", stringify!($n), "` with broadcasting and promotion.")]
            pub fn $n(&self, other: &$t) -> Result<$t> {
                self.binary(BinaryOp::$v, other)
            }
            #[doc = concat!("`", stringify!($n), "(self, value)` with a weak scalar.")]
            pub fn $s(&self, value: impl Into<Scalar>) -> Result<$t> {
                self.binary_scalar(BinaryOp::$v, value, false)
            }
            $(
                #[doc = concat!("`", stringify!($n), "(value, self)` with a weak scalar.")]
                pub fn $rs(&self, value: impl Into<Scalar>) -> Result<$t> {
                    self.binary_scalar(BinaryOp::$v, value, true)
                }
            )?
        )*}
    };
}
pub(crate) use binary_methods;

/// The in-place forms the table names: `add_assign(&other)`, `add_scalar_assign(value)`.
macro_rules! assign_methods {
    ([$t:ident] $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr, $s:ident,
        [$($rs:ident)?], [$($a:ident, $sa:ident)?]) ),* $(,)?) => {
        impl $t {$($(
            #[doc = concat!("`self = ", stringify!($n), "(self, other)` in place.")]
            pub fn $a(&self, other: &$t) -> Result<()> {
                self.binary_assign(BinaryOp::$v, other)
            }
            #[doc = concat!("`self = ", stringify!($n), "(self, value)` in place.")]
            pub fn $sa(&self, value: impl Into<Scalar>) -> Result<()> {
                self.binary_scalar_assign(BinaryOp::$v, value)
            }
        )?)*}
    };
}

quill_core::unary_ops!(unary_methods { NDArray });
quill_core::binary_ops!(binary_methods { NDArray });
quill_core::binary_ops!(assign_methods { NDArray });
