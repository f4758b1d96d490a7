//! `std::ops` operators on array references: `&a + &b`, `&a * 2.0`, `2.0 - &a`, `-&a`, and
//! `a += &b`. They call the fallible methods and **panic** with the same message on error (shape
//! mismatch, unsupported dtype), as ndarray and PyTorch users expect from operators; use the
//! methods (`add`, `add_scalar`, `add_assign`, ...) to get a `Result` instead.

use super::NDArray;
use quill_core::BinaryOp;
use std::ops;

#[track_caller]
fn ok<T>(r: quill_core::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

macro_rules! operators {
    ($($tr:ident, $f:ident, $atr:ident, $af:ident => $op:ident),*) => {$(
        impl ops::$tr<&NDArray> for &NDArray {
            type Output = NDArray;
            #[track_caller]
            fn $f(self, rhs: &NDArray) -> NDArray {
                ok(self.binary(BinaryOp::$op, rhs))
            }
        }
        impl ops::$atr<&NDArray> for NDArray {
            #[track_caller]
            fn $af(&mut self, rhs: &NDArray) {
                ok(self.binary_assign(BinaryOp::$op, rhs))
            }
        }
        // Only f64 and i64: with one float and one integer impl, a bare literal (`&a * 2.0`,
        // `&a + 1`) picks its impl, and scalars are weak, so the array keeps its dtype anyway.
        scalar_operators!($tr, $f, $atr, $af, $op, f64, i64);
    )*};
}

macro_rules! scalar_operators {
    ($tr:ident, $f:ident, $atr:ident, $af:ident, $op:ident, $($t:ty),*) => {$(
        impl ops::$tr<$t> for &NDArray {
            type Output = NDArray;
            #[track_caller]
            fn $f(self, rhs: $t) -> NDArray {
                ok(self.binary_scalar(BinaryOp::$op, rhs, false))
            }
        }
        impl ops::$tr<&NDArray> for $t {
            type Output = NDArray;
            #[track_caller]
            fn $f(self, rhs: &NDArray) -> NDArray {
                ok(rhs.binary_scalar(BinaryOp::$op, self, true))
            }
        }
        impl ops::$atr<$t> for NDArray {
            #[track_caller]
            fn $af(&mut self, rhs: $t) {
                ok(self.binary_scalar_assign(BinaryOp::$op, rhs))
            }
        }
    )*};
}

operators!(
    Add, add, AddAssign, add_assign => Add,
    Sub, sub, SubAssign, sub_assign => Sub,
    Mul, mul, MulAssign, mul_assign => Mul,
    Div, div, DivAssign, div_assign => Div,
    Rem, rem, RemAssign, rem_assign => Remainder
);

impl ops::Neg for &NDArray {
    type Output = NDArray;
    #[track_caller]
    fn neg(self) -> NDArray {
        ok(self.unary(quill_core::UnaryOp::Neg))
    }
}

impl ops::Not for &NDArray {
    type Output = NDArray;
    #[track_caller]
    fn not(self) -> NDArray {
        ok(self.unary(quill_core::UnaryOp::LogicalNot))
    }
}
