//! `std::ops` on `&Tensor` (`&a + &b`, `&a * 2.0`, `-&a`). Like NDArray's, each gives a
//! `Result<Tensor>` to `?` (as candle's operators do): a shape mismatch is an error, never a
//! panic.

use super::Tensor;
use quill_core::Result;
use std::ops::{Add, Div, Mul, Neg, Sub};

macro_rules! tensor_ops {
    ($($tr:ident $m:ident => $method:ident, $scalar:ident);* $(;)?) => {$(
        impl $tr<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $m(self, o: &Tensor) -> Result<Tensor> {
                self.$method(o)
            }
        }
        impl $tr<f64> for &Tensor {
            type Output = Result<Tensor>;
            fn $m(self, o: f64) -> Result<Tensor> {
                self.$scalar(o)
            }
        }
    )*};
}
tensor_ops!(
    Add add => add, add_scalar;
    Sub sub => sub, sub_scalar;
    Mul mul => mul, mul_scalar;
    Div div => div, div_scalar;
);

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}
