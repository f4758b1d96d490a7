//! Gradient checks of the first and second order for ops with a hand-written backward.

use crate::prng::Prng;
use quill::tensor::{
    grad, gradcheck, set_grad_enabled, BackwardOptions, GradcheckOptions, GradcheckReport, Tensor,
};
use quill::{NDArray, Result};

/// `gradcheck` of `f` (a scalar of `inputs`, f64 leaves), then of its gradient contracted with
/// fixed random vectors, `sum_i <df/dt_i, v_i>`, taken through `create_graph`: the second
/// passes only if the backward is itself differentiable in every input. Returns both reports.
pub fn gradcheck_two_orders(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    rng: &mut Prng,
) -> Result<(GradcheckReport, GradcheckReport)> {
    let first = gradcheck(&f, inputs, GradcheckOptions::default())?;
    let vs: Vec<Tensor> = inputs
        .iter()
        .map(|t| {
            let v: Vec<f64> = (0..t.numel()).map(|_| 2.0 * rng.unit() - 1.0).collect();
            NDArray::from_vec(v, t.shape()).map(Tensor::new)
        })
        .collect::<Result<_>>()?;
    let second = |t: &[Tensor]| -> Result<Tensor> {
        // gradcheck's finite differences run under no_grad on constants: they get fresh
        // leaves (over the same buffers) for the inner gradient; its analytic pass does not.
        let _mode = set_grad_enabled(true);
        let fresh: Vec<Tensor>;
        let t = if t.iter().all(|x| x.requires_grad()) {
            t
        } else {
            fresh = t
                .iter()
                .map(|x| Tensor::from_array(x.array().clone(), true))
                .collect::<Result<_>>()?;
            &fresh[..]
        };
        let opts = BackwardOptions {
            create_graph: true,
            overwrite_grad: false,
            ..Default::default()
        };
        let gs = grad(&f(t)?, t, None, opts)?;
        let mut acc = gs[0].mul(&vs[0])?.sum(None, false)?;
        for (g, v) in gs.iter().zip(&vs).skip(1) {
            acc = acc.add(&g.mul(v)?.sum(None, false)?)?;
        }
        Ok(acc)
    };
    let second = gradcheck(second, inputs, GradcheckOptions::default())?;
    Ok((first, second))
}
