//! Autograd semantics: accumulation, zero_grad, detach, no_grad, retain_graph, errors,
//! second-order gradients (d2/dx2 of x^3, a Hessian-vector product of a tanh MLP against finite
//! differences). The memory test is in autograd_memory.rs (its own binary: it counts heap bytes).

use quill::tensor::{grad, no_grad, BackwardOptions, Tensor};
use quill::{DType, NDArray};

fn leaf(v: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_array(NDArray::from_vec(v, shape).unwrap(), true).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.astype(DType::F64)
        .unwrap()
        .array()
        .compact()
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

#[test]
fn accumulation_zero_grad_and_detach() {
    let x = leaf(vec![1.0, 2.0, 3.0], &[3]);
    for _ in 0..2 {
        x.mul(&x)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
    }
    assert_eq!(
        vals(&x.grad().unwrap()),
        vec![4.0, 8.0, 12.0],
        "two passes accumulate 2x each"
    );
    x.zero_grad();
    assert!(x.grad().is_none());
    // detach cuts the graph: only the live factor contributes.
    x.mul(&x.detach())
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(vals(&x.grad().unwrap()), vec![1.0, 2.0, 3.0]);
    // A variable used twice through different paths gets both contributions.
    x.zero_grad();
    let y = x.exp().unwrap().add(&x.mul_scalar(3.0).unwrap()).unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    let want: Vec<f64> = [1.0f64, 2.0, 3.0].iter().map(|v| v.exp() + 3.0).collect();
    for (g, w) in vals(&x.grad().unwrap()).iter().zip(want) {
        assert!((g - w).abs() < 1e-12);
    }
}

#[test]
fn no_grad_and_requires_grad_rules() {
    let x = leaf(vec![1.0, 2.0], &[2]);
    {
        let _g = no_grad();
        let y = x.mul_scalar(2.0).unwrap();
        assert!(!y.requires_grad() && y.is_leaf());
        assert!(y.sum(None, false).unwrap().backward().is_err());
    }
    let y = x.mul_scalar(2.0).unwrap();
    assert!(y.requires_grad() && !y.is_leaf());
    // Int tensors cannot require grad, with a message that says how to fix it.
    let e = Tensor::from_array(NDArray::ones(&[2], DType::I64).unwrap(), true).unwrap_err();
    assert!(e.to_string().contains("astype"), "{e}");
    // backward of a non-scalar needs a seed; a wrongly shaped seed names both shapes.
    let e = y.backward().unwrap_err().to_string();
    assert!(e.contains("backward_with"), "{e}");
    let e = y
        .backward_with(&Tensor::ones(&[3], DType::F64).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("[2]") && e.contains("[3]"), "{e}");
    y.backward_with(&Tensor::from_vec(vec![1.0, 10.0], &[2]).unwrap())
        .unwrap();
    assert_eq!(vals(&x.grad().unwrap()), vec![2.0, 20.0]);
    // Mixed dtypes promote forward, and each input's gradient comes back in its own dtype.
    let a = Tensor::from_array(NDArray::ones(&[2], DType::F32).unwrap(), true).unwrap();
    let b = leaf(vec![3.0, 4.0], &[2]);
    let c = a.mul(&b).unwrap();
    assert_eq!(c.dtype(), DType::F64);
    c.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(a.grad().unwrap().dtype(), DType::F32);
    assert_eq!(vals(&a.grad().unwrap()), vec![3.0, 4.0]);
}

#[test]
fn retain_graph_and_release() {
    let x = leaf(vec![0.5, -1.0], &[2]);
    let y = x.tanh().unwrap().sum(None, false).unwrap();
    y.backward_opts(
        None,
        BackwardOptions {
            retain_graph: true,
            create_graph: false,
            overwrite_grad: false,
        },
    )
    .unwrap();
    y.backward().unwrap(); // the graph was retained: a second pass works
    let once: Vec<f64> = [0.5f64, -1.0]
        .iter()
        .map(|v| 1.0 - v.tanh().powi(2))
        .collect();
    for (g, w) in vals(&x.grad().unwrap()).iter().zip(&once) {
        assert!((g - 2.0 * w).abs() < 1e-12);
    }
    // ...but that pass released it: a third one is an error that says what to do.
    let e = y.backward().unwrap_err().to_string();
    assert!(
        e.contains("second time") && e.contains("retain_graph"),
        "{e}"
    );
}

#[test]
fn second_derivative_of_cube() {
    let xs = vec![-1.5, 0.0, 0.5, 2.0];
    let x = leaf(xs.clone(), &[4]);
    let y = x.pow_scalar(3.0).unwrap().sum(None, false).unwrap();
    let opts = BackwardOptions {
        retain_graph: false,
        create_graph: true,
        overwrite_grad: false,
    };
    let g = grad(&y, std::slice::from_ref(&x), None, opts)
        .unwrap()
        .remove(0);
    for (gv, xv) in vals(&g).iter().zip(&xs) {
        assert!((gv - 3.0 * xv * xv).abs() < 1e-12);
    }
    let h = grad(
        &g.sum(None, false).unwrap(),
        std::slice::from_ref(&x),
        None,
        opts,
    )
    .unwrap()
    .remove(0);
    for (hv, xv) in vals(&h).iter().zip(&xs) {
        assert!((hv - 6.0 * xv).abs() < 1e-12, "{hv} vs {}", 6.0 * xv);
    }
    // Third order through backward() accumulation.
    h.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(vals(&x.grad().unwrap()), vec![6.0; 4]);
}

/// Loss of a small tanh MLP with parameters packed in one flat vector `p`.
fn mlp_loss(p: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let w1 = p
        .slice(&quill::s![0..12])
        .unwrap()
        .reshape(&[3, 4])
        .unwrap();
    let b1 = p.slice(&quill::s![12..16]).unwrap();
    let w2 = p
        .slice(&quill::s![16..24])
        .unwrap()
        .reshape(&[4, 2])
        .unwrap();
    let h = x.matmul(&w1).unwrap().add(&b1).unwrap().tanh().unwrap();
    let o = h.matmul(&w2).unwrap();
    o.sub(y)
        .unwrap()
        .square()
        .unwrap()
        .mean(None, false)
        .unwrap()
}

#[test]
fn hessian_vector_product_of_a_tanh_mlp() {
    let p0 = NDArray::randn(&[24], 1, DType::F64).unwrap();
    let x = Tensor::new(NDArray::randn(&[5, 3], 2, DType::F64).unwrap());
    let y = Tensor::new(NDArray::randn(&[5, 2], 3, DType::F64).unwrap());
    let v = NDArray::randn(&[24], 4, DType::F64).unwrap();
    let opts = BackwardOptions {
        retain_graph: false,
        create_graph: true,
        overwrite_grad: false,
    };
    let p = Tensor::from_array(p0.clone(), true).unwrap();
    let g = grad(&mlp_loss(&p, &x, &y), std::slice::from_ref(&p), None, opts)
        .unwrap()
        .remove(0);
    let gv = g
        .mul(&Tensor::new(v.clone()))
        .unwrap()
        .sum(None, false)
        .unwrap();
    let hv = vals(&grad(&gv, std::slice::from_ref(&p), None, opts).unwrap()[0]);
    // Finite differences of the gradient along v.
    let eps = 1e-5;
    let grad_at = |t: f64| -> Vec<f64> {
        let pt = Tensor::from_array(p0.add(&v.mul_scalar(t).unwrap()).unwrap(), true).unwrap();
        mlp_loss(&pt, &x, &y).backward().unwrap();
        vals(&pt.grad().unwrap())
    };
    let (hi, lo) = (grad_at(eps), grad_at(-eps));
    for i in 0..24 {
        let fd = (hi[i] - lo[i]) / (2.0 * eps);
        assert!(
            (hv[i] - fd).abs() < 1e-6 * (1.0 + fd.abs()),
            "[{i}] {} vs {fd}",
            hv[i]
        );
    }
}
