//! Autograd on complex tensors in PyTorch's convention (the gradient of a real loss with
//! respect to z = x + iy is dL/dx + i dL/dy): each op gradchecked in both directions of every
//! element on strided inputs, closed forms for |z|², Re(z²) and a real weight times a complex
//! input (whose gradient is real), and a second derivative through create_graph.

use quill::tensor::{grad, gradcheck, set_grad_enabled, BackwardOptions, GradcheckOptions, Tensor};
use quill::{s, DType, NDArray, C128};

/// A complex128 leaf of `shape` with parts from two seeds, read through a reversed view.
fn leaf(shape: &[usize], seed: u64) -> Tensor {
    let re = NDArray::randn(shape, seed, DType::F64).unwrap();
    let im = NDArray::randn(shape, seed + 100, DType::F64).unwrap();
    let z = NDArray::complex(&re, &im).unwrap();
    let z = if shape.len() > 1 {
        z.slice(&s![..;-1]).unwrap()
    } else {
        z
    };
    Tensor::from_array(z, true).unwrap()
}

fn check(name: &str, f: impl Fn(&[Tensor]) -> quill::Result<Tensor>, inputs: &[Tensor]) {
    let r = gradcheck(f, inputs, GradcheckOptions::default()).unwrap();
    assert!(r.passed, "{name}: {r}");
    assert!(r.checked > 0);
}

fn vals(t: &Tensor) -> Vec<C128> {
    t.array()
        .astype(DType::C128)
        .unwrap()
        .to_vec::<C128>()
        .unwrap()
}

#[test]
fn holomorphic_ops_gradcheck() {
    let (a, b) = (leaf(&[3, 4], 1), leaf(&[3, 4], 2));
    let row = leaf(&[4], 3);
    let two = [a.clone(), b.clone()];
    check("add", |t| t[0].add(&t[1]), &two);
    check("sub", |t| t[0].sub(&t[1]), &two);
    check("mul", |t| t[0].mul(&t[1]), &two);
    check("div", |t| t[0].div(&t[1]), &two);
    check("mul broadcast", |t| t[0].mul(&t[1]), &[a.clone(), row]);
    let one = std::slice::from_ref(&a);
    check("exp", |t| t[0].exp(), one);
    check("log", |t| t[0].log(), one);
    check("sqrt", |t| t[0].sqrt(), one);
    check("square", |t| t[0].square(), one);
    check("reciprocal", |t| t[0].reciprocal(), one);
    check("sin", |t| t[0].sin(), one);
    check("tanh", |t| t[0].tanh(), one);
    check(
        "neg, scalar",
        |t| t[0].neg()?.mul_scalar(2.5)?.add_scalar(1.0),
        one,
    );
    check(
        "sum, mean",
        |t| t[0].sum(Some(&[0]), false)?.mul(&t[0].mean(None, true)?),
        one,
    );
    check("views", |t| t[0].permute(&[1, 0])?.reshape(&[2, 6]), one);
    let m = leaf(&[4, 2], 4);
    check("matmul", |t| t[0].matmul(&t[1]), &[a.clone(), m]);
}

#[test]
fn non_holomorphic_ops_gradcheck() {
    let a = leaf(&[2, 5], 7);
    let one = std::slice::from_ref(&a);
    check("abs", |t| t[0].abs(), one);
    check("conj", |t| t[0].conj()?.mul(&t[0]), one);
    check("real", |t| t[0].real(), one);
    check("imag", |t| t[0].imag()?.mul(&t[0].real()?), one);
    check("var", |t| t[0].var(Some(&[1]), 1, false), one);
    check("abs of a product", |t| t[0].mul(&t[0].exp()?)?.abs(), one);
    // A real weight times a complex input: the real weight gets a real gradient.
    let w = Tensor::from_array(NDArray::randn(&[2, 5], 9, DType::F64).unwrap(), true).unwrap();
    check("real x complex", |t| t[0].mul(&t[1]), &[w, a.clone()]);
}

#[test]
fn closed_forms_and_second_derivatives() {
    let z = leaf(&[6], 11);
    let zv = vals(&z);
    // L = sum |z|^2 = sum z conj(z): dL/dx + i dL/dy = 2z.
    z.mul(&z.conj().unwrap())
        .unwrap()
        .real()
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let g = vals(&z.grad().unwrap());
    for (gi, zi) in g.iter().zip(&zv) {
        assert!((gi - zi * 2.0).norm() < 1e-12, "{gi} vs 2 * {zi}");
    }
    // L = Re(sum z^2) = sum x^2 - y^2: the gradient is 2 conj(z).
    let z = leaf(&[6], 11);
    let l = z
        .square()
        .unwrap()
        .real()
        .unwrap()
        .sum(None, false)
        .unwrap();
    let g = grad(
        &l,
        std::slice::from_ref(&z),
        None,
        BackwardOptions::default(),
    )
    .unwrap();
    for (gi, zi) in vals(&g[0]).iter().zip(&zv) {
        assert!((gi - zi.conj() * 2.0).norm() < 1e-12);
    }
    // A real leaf scaling a complex constant: its gradient is real (the real part of g).
    let w = Tensor::from_array(NDArray::full(&[6], 0.5, DType::F64).unwrap(), true).unwrap();
    let c = Tensor::new(z.array().clone());
    let l = w.mul(&c).unwrap().abs().unwrap().sum(None, false).unwrap();
    let g = grad(
        &l,
        std::slice::from_ref(&w),
        None,
        BackwardOptions::default(),
    )
    .unwrap();
    assert_eq!(g[0].dtype(), DType::F64);
    for (gi, zi) in g[0].array().to_vec::<f64>().unwrap().iter().zip(&zv) {
        assert!((gi - zi.norm()).abs() < 1e-12);
    }
    // Second derivative: d/dz of the gradient of sum |z|^4 / 4 = sum (z conj z)^2 / 4; its
    // gradient is |z|^2 z; differentiate Re(sum(gradient)) again and check by gradcheck.
    let f = |t: &[Tensor]| -> quill::Result<Tensor> {
        // gradcheck's central differences run under no_grad; this f needs the graph.
        let _mode = set_grad_enabled(true);
        let z = &t[0];
        let r = z.mul(&z.conj()?)?.real()?;
        let l = r.square()?.mul_scalar(0.25)?.sum(None, false)?;
        let opts = BackwardOptions {
            create_graph: true,
            ..BackwardOptions::default()
        };
        let g = grad(&l, std::slice::from_ref(z), None, opts)?;
        g[0].clone().real()
    };
    let z = leaf(&[4], 13);
    let r = gradcheck(f, std::slice::from_ref(&z), GradcheckOptions::default()).unwrap();
    assert!(r.passed, "second derivative: {r}");
    // gradcheck refuses complex64 (its differences need double precision) by name.
    let c64 = Tensor::from_array(z.array().astype(DType::C64).unwrap(), true).unwrap();
    let e = gradcheck(|t| t[0].exp(), &[c64], GradcheckOptions::default()).unwrap_err();
    assert!(e.to_string().contains("complex128"), "{e}");
}

/// Complex logsumexp (PyTorch's): against log(sum(exp(z))) summed here pair by pair, on a
/// reversed view whose real parts would overflow exp unshifted, keepdims either way, an empty
/// axis giving -inf; and gradchecked.
#[test]
fn complex_logsumexp_matches_the_sum_and_gradchecks() {
    let re = NDArray::randn(&[4, 5], 11, DType::F64).unwrap();
    let im = NDArray::randn(&[4, 5], 12, DType::F64).unwrap();
    let shift = NDArray::full(&[], 800.0, DType::F64).unwrap();
    let z = NDArray::complex(&re.add(&shift).unwrap(), &im).unwrap();
    let v = z.slice(&s![..;-1, ..]).unwrap();
    let host: Vec<C128> = v.to_vec().unwrap();
    for keep in [false, true] {
        let got = v.logsumexp(Some(&[1]), keep).unwrap();
        assert_eq!(got.shape(), if keep { &[4, 1][..] } else { &[4][..] });
        let got: Vec<C128> = got.to_vec().unwrap();
        for (r, g) in got.iter().enumerate() {
            let row = &host[r * 5..(r + 1) * 5];
            // The reference shifts by 800 itself, so exp stays finite.
            let sum: C128 = row.iter().map(|x| (x - 800.0).exp()).sum();
            let want = sum.ln() + 800.0;
            assert!((g - want).norm() < 1e-10 * want.norm(), "{g} vs {want}");
        }
    }
    let empty = NDArray::zeros(&[3, 0], DType::C64).unwrap();
    let e: Vec<quill::C64> = empty
        .logsumexp(Some(&[1]), false)
        .unwrap()
        .to_vec()
        .unwrap();
    assert!(e.iter().all(|x| x.re == f32::NEG_INFINITY));
    let a = leaf(&[3, 4], 21);
    check("logsumexp", |t| t[0].logsumexp(Some(&[1]), false), &[a]);
}
