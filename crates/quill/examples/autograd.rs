//! Lesson 3: autograd, higher derivatives, a gradient check, and an op of your own. A Tensor is
//! an NDArray plus its place in the graph; `backward` fills each leaf's `grad()`, `grad` returns
//! gradients without touching them, and `create_graph` records the backward pass so that a
//! gradient can be differentiated again. A `CustomOp` (PyTorch's `autograd.Function`) joins the
//! graph with a forward you compute and a backward written in Tensor ops.
//!
//! `cargo run --example autograd`

use quill::tensor::{grad, gradcheck, BackwardOptions, CustomOp, GradcheckOptions, Tensor};
use quill::{DType, NDArray, Result};
use std::any::Any;
use std::rc::Rc;

/// softplus(x) = log(1 + exp(x)), whose derivative is sigmoid(x).
struct Softplus;

impl CustomOp for Softplus {
    fn name(&self) -> String {
        "softplus".into()
    }
    fn backward(
        &self,
        g: &Tensor,
        _out: &Tensor,
        inputs: &[Tensor],
    ) -> Result<Vec<Option<Tensor>>> {
        // In Tensor ops, so the backward is itself differentiable (second order below).
        Ok(vec![Some(g.mul(&inputs[0].sigmoid()?)?)])
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn softplus(x: &Tensor) -> Result<Tensor> {
    // The forward on arrays: nothing here is recorded; the op records itself.
    let y = x.array().exp()?.add_scalar(1.0)?.log()?;
    Ok(Tensor::from_custom_op(y, &[x], Rc::new(Softplus)))
}

fn main() -> Result<()> {
    // f(x) = sum(x^3): f' = 3x^2, f'' = 6x.
    let x = Tensor::from_array(NDArray::from_vec(vec![1.0f64, -2.0, 0.5], &[3])?, true)?;
    let f = x.pow_scalar(3.0)?.sum(None, false)?;
    let record = BackwardOptions {
        create_graph: true,
        ..Default::default()
    };
    let d1 = grad(&f, std::slice::from_ref(&x), None, record)?.remove(0);
    println!("f'  = {:?}", d1.to_vec::<f64>()?); // [3, 12, 0.75]
    let d2 = grad(
        &d1.sum(None, false)?,
        std::slice::from_ref(&x),
        None,
        Default::default(),
    )?
    .remove(0);
    println!("f'' = {:?}", d2.to_vec::<f64>()?); // [6, -12, 3]
    assert_eq!(d2.to_vec::<f64>()?, vec![6.0, -12.0, 3.0]);

    // The custom op beside built-in ops; backward() fills x.grad().
    let y = softplus(&x)?.mul(&x)?.sum(None, false)?;
    y.backward()?;
    println!(
        "d/dx sum(x softplus(x)) = {:?}",
        x.grad().unwrap().to_vec::<f64>()?
    );

    // Central differences agree with the analytic gradient (f64 inputs)...
    let xs = Tensor::from_array(NDArray::randn(&[5], 1, DType::F64)?, true)?;
    let report = gradcheck(
        |t| softplus(&t[0])?.tanh(),
        std::slice::from_ref(&xs),
        GradcheckOptions::default(),
    )?;
    println!("gradcheck: {report}");
    assert!(report.passed);
    // ...and the second derivative comes through the recorded backward of the custom op:
    // softplus'' = sigmoid' = sigmoid (1 - sigmoid).
    let y = softplus(&xs)?.sum(None, false)?;
    let d1 = grad(&y, std::slice::from_ref(&xs), None, record)?.remove(0); // sigmoid(x), itself recorded
    let d2 = grad(
        &d1.sum(None, false)?,
        std::slice::from_ref(&xs),
        None,
        Default::default(),
    )?
    .remove(0);
    let s = xs.array().sigmoid()?;
    let want = s.mul(&s.rsub_scalar(1.0)?)?;
    let err = d2
        .array()
        .sub(&want)?
        .abs()?
        .max(None, false)?
        .item::<f64>()?;
    println!("second derivative: largest error {err:e}");
    assert!(err < 1e-12);
    Ok(())
}
