//! `std::ops` operators on array references: `&a + &b`, `&a * 2.0`, `2.0 - &a`, `-&a`. Each
//! gives a `Result<NDArray>` (as candle's operators do): a shape mismatch or an unsupported
//! dtype is an error to `?`, never a panic. There are no compound-assignment operators
//! (`a += &b` could only panic); use `add_assign`, `binary_scalar_assign`, ... instead.

use super::NDArray;
use quill_core::{BinaryOp, Result};
use std::ops;

macro_rules! operators {
    ($($tr:ident, $f:ident => $op:ident),*) => {$(
        impl ops::$tr<&NDArray> for &NDArray {
            type Output = Result<NDArray>;
            fn $f(self, rhs: &NDArray) -> Result<NDArray> {
                self.binary(BinaryOp::$op, rhs)
            }
        }
        // Only f64 and i64: with one float and one integer impl, a bare literal (`&a * 2.0`,
        // `&a + 1`) picks its impl, and scalars are weak, so the array keeps its dtype anyway.
        scalar_operators!($tr, $f, $op, f64, i64);
    )*};
}

macro_rules! scalar_operators {
    ($tr:ident, $f:ident, $op:ident, $($t:ty),*) => {$(
        impl ops::$tr<$t> for &NDArray {
            type Output = Result<NDArray>;
            fn $f(self, rhs: $t) -> Result<NDArray> {
                self.binary_scalar(BinaryOp::$op, rhs, false)
            }
        }
        impl ops::$tr<&NDArray> for $t {
            type Output = Result<NDArray>;
            fn $f(self, rhs: &NDArray) -> Result<NDArray> {
                rhs.binary_scalar(BinaryOp::$op, self, true)
            }
        }
    )*};
}

operators!(
    Add, add => Add,
    Sub, sub => Sub,
    Mul, mul => Mul,
    Div, div => Div,
    Rem, rem => Remainder
);

impl ops::Neg for &NDArray {
    type Output = Result<NDArray>;
    fn neg(self) -> Result<NDArray> {
        self.unary(quill_core::UnaryOp::Neg)
    }
}

impl ops::Not for &NDArray {
    type Output = Result<NDArray>;
    fn not(self) -> Result<NDArray> {
        self.unary(quill_core::UnaryOp::LogicalNot)
    }
}
