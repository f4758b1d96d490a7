//! The differentiable linalg ops (`inv`, `det`, `slogdet`, `solve`, `cholesky`, `eigh`, `svd`,
//! `qr`) against central differences (`gradcheck`), on batched and transposed inputs, with
//! broadcast batch dims in `solve`; and their second derivatives: `grad` with `create_graph`, differentiated again and
//! checked by central differences of the first gradient.

use quill::tensor::{grad, gradcheck, set_grad_enabled, BackwardOptions, GradcheckOptions, Tensor};
use quill::{DType, NDArray};

/// A leaf of `shape` (last two dims square) that is well conditioned: normal entries plus n
/// on the diagonal, read through a transposed view.
fn well_conditioned(shape: &[usize], seed: u64) -> Tensor {
    let n = shape[shape.len() - 1];
    let a = NDArray::randn(shape, seed, DType::F64).unwrap();
    let eye = NDArray::eye(n, n, 0, DType::F64)
        .unwrap()
        .mul_scalar(n as f64)
        .unwrap();
    let a = a.add(&eye).unwrap().transpose(-1, -2).unwrap();
    Tensor::from_array(a, true).unwrap()
}

fn leaf(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_array(NDArray::randn(shape, seed, DType::F64).unwrap(), true).unwrap()
}

fn check(name: &str, f: impl Fn(&[Tensor]) -> quill::Result<Tensor>, inputs: &[Tensor]) {
    let r = gradcheck(f, inputs, GradcheckOptions::default()).unwrap();
    assert!(r.passed, "{name}: {r}");
    assert!(r.checked > 0);
}

#[test]
fn first_derivatives_match_central_differences() {
    let a = well_conditioned(&[2, 3, 3], 1);
    check("inv", |t| t[0].inv(), std::slice::from_ref(&a));
    check("det", |t| t[0].det(), std::slice::from_ref(&a));
    check(
        "slogdet",
        |t| Ok(t[0].slogdet()?.1),
        std::slice::from_ref(&a),
    );
    // solve: a stack of right-hand sides whose batch broadcasts, and a vector.
    let b = leaf(&[1, 3, 2], 2);
    check("solve", |t| t[0].solve(&t[1]), &[a.clone(), b]);
    let v = leaf(&[3], 3);
    check("solve vector", |t| t[0].solve(&t[1]), &[a.clone(), v]);
    // cholesky of a symmetric positive-definite function of a free matrix: A = M Mᵀ + I.
    let m = leaf(&[2, 4, 4], 4);
    for upper in [false, true] {
        check(
            "cholesky",
            |t| {
                let eye = Tensor::new(NDArray::eye(4, 4, 0, DType::F64)?);
                t[0].matmul(&t[0].mt()?)?.add(&eye)?.cholesky(upper)
            },
            std::slice::from_ref(&m),
        );
    }
}

#[test]
fn eigh_gradients_through_a_symmetric_input() {
    // A = M + Mᵀ (symmetric, distinct eigenvalues); V enters squared, so its signs do not matter.
    let m = leaf(&[2, 4, 4], 9);
    check(
        "eigh values",
        |t| Ok(t[0].add(&t[0].mt()?)?.eigh()?.0),
        std::slice::from_ref(&m),
    );
    check(
        "eigh vectors",
        |t| {
            let v = t[0].add(&t[0].mt()?)?.eigh()?.1;
            v.mul(&v)
        },
        std::slice::from_ref(&m),
    );
}

#[test]
fn svd_gradients_of_sign_free_functions() {
    // Wide and tall batches; S, and u_i v_iᵀ / u_i² (unchanged when a pair flips its sign).
    for shape in [[2, 3, 5], [2, 5, 3]] {
        let a = leaf(&shape, 11);
        check(
            "svd values",
            |t| Ok(t[0].svd()?.1),
            std::slice::from_ref(&a),
        );
        check(
            "svd rank-1 terms",
            |t| {
                let (u, _, vh) = t[0].svd()?;
                // sum_i u_i v_iᵀ w_i with distinct weights per term.
                let k = u.shape()[2];
                let w: Vec<f64> = (0..k).map(|i| 1.0 + i as f64).collect();
                let w = Tensor::new(NDArray::from_vec(w, &[k])?);
                u.mul(&w)?.matmul(&vh)
            },
            std::slice::from_ref(&a),
        );
        check(
            "svd u squared",
            |t| {
                let u = t[0].svd()?.0;
                u.mul(&u)
            },
            std::slice::from_ref(&a),
        );
    }
}

#[test]
fn qr_gradients_of_tall_and_square_matrices() {
    for shape in [[2, 5, 3], [2, 4, 4]] {
        let a = leaf(&shape, 13);
        check("qr q", |t| Ok(t[0].qr()?.0), std::slice::from_ref(&a));
        check("qr r", |t| Ok(t[0].qr()?.1), std::slice::from_ref(&a));
    }
    // A wide matrix factors, but its gradient is refused by name.
    let wide = leaf(&[3, 5], 14);
    let (q, _) = wide.qr().unwrap();
    let e = q
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap_err()
        .to_string();
    assert!(e.contains("m >= n"), "{e}");
}

#[test]
fn second_derivatives_through_create_graph() {
    let opts = BackwardOptions {
        retain_graph: true,
        create_graph: true,
        overwrite_grad: false,
    };
    let a = well_conditioned(&[3, 3], 5);
    // f(A) = d/dA sum(w * op(A)): differentiable again, checked by central differences.
    let w = Tensor::new(NDArray::randn(&[3, 3], 6, DType::F64).unwrap());
    for name in ["inv", "det"] {
        let first = |t: &[Tensor]| -> quill::Result<Tensor> {
            // gradcheck's central differences run under no_grad; this f needs the graph.
            let _mode = set_grad_enabled(true);
            let y = match name {
                "inv" => t[0].inv()?.mul(&w)?.sum(None, false)?,
                _ => t[0].det()?,
            };
            Ok(grad(&y, &t[..1], None, opts)?.remove(0))
        };
        check(name, first, std::slice::from_ref(&a));
    }
}

#[test]
fn errors_pass_through() {
    let sing = Tensor::from_array(
        NDArray::from_vec(vec![1.0f64, 2.0, 2.0, 4.0], &[2, 2]).unwrap(),
        true,
    )
    .unwrap();
    assert!(sing.inv().unwrap_err().to_string().contains("singular"));
    let rect = Tensor::new(NDArray::ones(&[2, 3], DType::F64).unwrap());
    assert!(rect.det().unwrap_err().to_string().contains("square"));
}
