//! `std::ops` on `&Tensor` (`&a + &b`, `&a * 2.0`, `-&a`). Like NDArray's, they panic with the
//! fallible method's error message (use `add`, `mul`, ... for a `Result`).

use super::Tensor;
use std::ops::{Add, Div, Mul, Neg, Sub};

macro_rules! tensor_ops {
    ($($tr:ident $m:ident => $method:ident, $scalar:ident);* $(;)?) => {$(
        impl $tr<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $m(self, o: &Tensor) -> Tensor {
                self.$method(o).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        impl $tr<f64> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $m(self, o: f64) -> Tensor {
                self.$scalar(o).unwrap_or_else(|e| panic!("{e}"))
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
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(self).unwrap_or_else(|e| panic!("{e}"))
    }
}
