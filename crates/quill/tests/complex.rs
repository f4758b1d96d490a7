//! complex64 and complex128 arrays against references computed here element by element (in
//! f64 with the textbook formulas, not the kernels' code): arithmetic over permuted, reversed,
//! stepped and broadcast views, NumPy's promotion, casts, the parts, reductions, the 4M
//! matmul, special values (exact integer powers, expm1 / log1p near 0, branch cuts), refusals
//! with their reasons, printing and safetensors.

use num_complex::Complex;
use quill::{s, BinaryOp, DType, NDArray, Scalar, UnaryOp};
use quill_test_support::Prng;

type C = Complex<f64>;

fn c128(v: &[C], shape: &[usize]) -> NDArray {
    NDArray::from_vec(v.to_vec(), shape).unwrap()
}

fn vals(a: &NDArray) -> Vec<C> {
    a.astype(DType::C128).unwrap().to_vec::<C>().unwrap()
}

fn random(rng: &mut Prng, n: usize) -> Vec<C> {
    (0..n)
        .map(|_| C::new(6.0 * rng.unit() - 3.0, 6.0 * rng.unit() - 3.0))
        .collect()
}

fn close(a: C, b: C, tol: f64) -> bool {
    (a - b).norm() <= tol * (1.0 + b.norm())
}

fn assert_close(got: &[C], want: &[C], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, tol), "{what}[{i}]: got {g}, want {w}");
    }
}

/// The textbook product and quotient, written out.
fn mul(a: C, b: C) -> C {
    C::new(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re)
}
fn div(a: C, b: C) -> C {
    let d = b.re * b.re + b.im * b.im;
    C::new(
        (a.re * b.re + a.im * b.im) / d,
        (a.im * b.re - a.re * b.im) / d,
    )
}

#[test]
fn arithmetic_over_views_matches_the_formulas() {
    let mut rng = Prng::new(7);
    let av = random(&mut rng, 24);
    let bv = random(&mut rng, 4);
    let a = c128(&av, &[2, 3, 4]);
    // a permuted, reversed view against a broadcast row.
    let x = a
        .permute(&[2, 1, 0])
        .unwrap()
        .slice(&s![..;-1, .., ..])
        .unwrap(); // (4, 3, 2)
    let b = c128(&bv, &[4, 1, 1]).broadcast_to(&[4, 3, 2]).unwrap();
    let xs = vals(&x);
    let bs = vals(&b);
    for (op, f) in [
        (BinaryOp::Add, (|p: C, q: C| p + q) as fn(C, C) -> C),
        (BinaryOp::Sub, |p, q| p - q),
        (BinaryOp::Mul, mul),
        (BinaryOp::Div, div),
    ] {
        let got = vals(&x.binary(op, &b).unwrap());
        let want: Vec<C> = xs.iter().zip(&bs).map(|(&p, &q)| f(p, q)).collect();
        assert_close(&got, &want, 1e-14, op.name());
    }
    // complex64 in its own precision, and mixed with a real operand (promotion).
    let x64 = x.astype(DType::C64).unwrap();
    let r = NDArray::arange(1.0, 3.0, 1.0, DType::F32).unwrap(); // (2,), broadcast last
    let got = x64.mul(&r).unwrap();
    assert_eq!(got.dtype(), DType::C64);
    let want: Vec<C> = xs
        .iter()
        .enumerate()
        .map(|(i, &p)| p * (1.0 + (i % 2) as f64))
        .collect();
    assert_close(&vals(&got), &want, 1e-6, "c64 * f32");
    assert_eq!(
        x64.add(&NDArray::ones(&[2], DType::F64).unwrap())
            .unwrap()
            .dtype(),
        DType::C128
    );
    assert_eq!(
        NDArray::ones(&[2], DType::I32)
            .unwrap()
            .add(&x64.slice(&s![0, 0]).unwrap())
            .unwrap()
            .dtype(),
        DType::C128
    );
    // Scalars: a complex scalar makes a float array complex; a float scalar keeps complex64.
    let f = NDArray::ones(&[3], DType::F32).unwrap();
    let z = f.add_scalar(Scalar::C(0.0, 2.0)).unwrap();
    assert_eq!(z.dtype(), DType::C64);
    assert_eq!(vals(&z), vec![C::new(1.0, 2.0); 3]);
    assert_eq!(x64.mul_scalar(2.0).unwrap().dtype(), DType::C64);
    // Equality only.
    let eq = x.binary(BinaryOp::Eq, &x).unwrap();
    assert_eq!(eq.to_vec::<bool>().unwrap(), vec![true; 24]);
    let e = x.binary(BinaryOp::Lt, &x).unwrap_err().to_string();
    assert!(e.contains("no order"), "{e}");
}

#[test]
fn special_values() {
    let z = c128(
        &[
            C::new(1.0, 1.0),
            C::new(1.0, 2.0),
            C::new(0.0, 0.0),
            C::new(-4.0, 0.0),
            C::new(3.0, 4.0),
        ],
        &[5],
    );
    // Integer powers by repeated multiplication: (1+i)^2 = 2i exactly, (1+i)^-2 = -i/2.
    let p = vals(
        &z.binary(
            BinaryOp::Pow,
            &NDArray::full(&[5], 2.0, DType::F64).unwrap(),
        )
        .unwrap(),
    );
    assert_eq!(p[0], C::new(0.0, 2.0));
    assert_eq!(p[2], C::new(0.0, 0.0));
    let p = vals(&z.slice(&s![0..1]).unwrap().pow_scalar(-2.0).unwrap());
    assert_eq!(p[0], C::new(0.0, -0.5));
    // Branch cut: sqrt(-4 + 0i) = 2i; sqrt(-4 - 0i) = -2i; abs is hypot.
    let r = vals(&z.unary(UnaryOp::Sqrt).unwrap());
    assert_eq!(r[3], C::new(0.0, 2.0));
    let neg0 = c128(&[C::new(-4.0, -0.0)], &[1]);
    assert_eq!(
        vals(&neg0.unary(UnaryOp::Sqrt).unwrap())[0],
        C::new(0.0, -2.0)
    );
    let a = z.unary(UnaryOp::Abs).unwrap();
    assert_eq!(a.dtype(), DType::F64);
    assert_eq!(a.to_vec::<f64>().unwrap()[4], 5.0);
    // exp(i pi) = -1; sign = z / |z|, 0 at 0.
    let e = vals(
        &c128(&[C::new(0.0, std::f64::consts::PI)], &[1])
            .unary(UnaryOp::Exp)
            .unwrap(),
    );
    assert!(close(e[0], C::new(-1.0, 0.0), 1e-15), "{}", e[0]);
    let s = vals(&z.unary(UnaryOp::Sign).unwrap());
    assert!(close(s[4], C::new(0.6, 0.8), 1e-15) && s[2] == C::new(0.0, 0.0));
    // expm1 and log1p near 0 keep every digit (exp(z) - 1 would lose them).
    let tiny = c128(&[C::new(1e-10, 1e-10)], &[1]);
    let m = vals(&tiny.unary(UnaryOp::Expm1).unwrap())[0];
    // Taylor: z + z^2/2, z^2 = 2e-20 i.
    assert!(close(m, C::new(1e-10, 1e-10 + 1e-20), 1e-12), "{m}");
    let l = vals(&tiny.unary(UnaryOp::Log1p).unwrap())[0];
    // ln(1+z) = z - z^2/2.
    assert!(close(l, C::new(1e-10, 1e-10 - 1e-20), 1e-12), "{l}");
    // Division by zero and by huge numbers (Smith's method does not overflow).
    let big = c128(&[C::new(1e300, 1e300)], &[1]);
    let q = vals(&big.binary(BinaryOp::Div, &big).unwrap())[0];
    assert!(close(q, C::new(1.0, 0.0), 1e-15), "{q}");
    let isnan = c128(
        &[
            C::new(f64::NAN, 0.0),
            C::new(0.0, f64::INFINITY),
            C::new(1.0, 1.0),
        ],
        &[3],
    );
    assert_eq!(
        isnan
            .unary(UnaryOp::IsNan)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [true, false, false]
    );
    assert_eq!(
        isnan
            .unary(UnaryOp::IsInf)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [false, true, false]
    );
    assert_eq!(
        isnan
            .unary(UnaryOp::IsFinite)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [false, false, true]
    );
}

#[test]
fn casts_and_parts() {
    let z = c128(&[C::new(1.9, -2.5), C::new(-3.0, 0.5)], &[2]);
    assert_eq!(
        z.astype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        [1, -3]
    );
    assert_eq!(
        z.astype(DType::F32).unwrap().to_vec::<f32>().unwrap(),
        [1.9, -3.0]
    );
    assert_eq!(
        z.astype(DType::Bool).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    let back = NDArray::from_vec(vec![2i64, -7], &[2])
        .unwrap()
        .astype(DType::C64)
        .unwrap();
    assert_eq!(vals(&back), [C::new(2.0, 0.0), C::new(-7.0, 0.0)]);
    assert_eq!(z.real().unwrap().to_vec::<f64>().unwrap(), [1.9, -3.0]);
    assert_eq!(z.imag().unwrap().to_vec::<f64>().unwrap(), [-2.5, 0.5]);
    assert_eq!(
        vals(&z.conj().unwrap()),
        [C::new(1.9, 2.5), C::new(-3.0, -0.5)]
    );
    let ang = z.angle().unwrap().to_vec::<f64>().unwrap();
    assert_eq!(ang, [(-2.5f64).atan2(1.9), 0.5f64.atan2(-3.0)]);
    let r = NDArray::from_vec(vec![-1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(
        r.angle().unwrap().to_vec::<f32>().unwrap(),
        [std::f32::consts::PI, 0.0]
    );
    assert_eq!(r.imag().unwrap().to_vec::<f32>().unwrap(), [0.0, 0.0]);
    // complex(re, im) broadcasts and picks complex64 for f32 parts.
    let im = NDArray::from_vec(vec![10.0f32, 20.0, 30.0], &[3, 1]).unwrap();
    let w = NDArray::complex(&r, &im).unwrap();
    assert_eq!((w.dtype(), w.shape()), (DType::C64, &[3usize, 2][..]));
    assert_eq!(vals(&w)[3], C::new(2.0, 20.0));
    // Parts of a strided view read the view.
    let m = c128(
        &(0..6)
            .map(|i| C::new(i as f64, -(i as f64)))
            .collect::<Vec<_>>(),
        &[2, 3],
    );
    let t = m.permute(&[1, 0]).unwrap();
    assert_eq!(
        t.imag().unwrap().to_vec::<f64>().unwrap(),
        [0.0, -3.0, -1.0, -4.0, -2.0, -5.0]
    );
}

#[test]
fn reductions_and_matmul_match_naive_loops() {
    let mut rng = Prng::new(11);
    let v = random(&mut rng, 2 * 3 * 4);
    let a = c128(&v, &[2, 3, 4]).slice(&s![.., ..;2, ..]).unwrap(); // (2, 2, 4), stepped
    let av = vals(&a);
    let sum = vals(&a.sum(Some(&[1]), false).unwrap());
    let prod = vals(&a.prod(Some(&[-1]), false).unwrap());
    for i in 0..2 {
        for k in 0..4 {
            let want: C = (0..2).map(|j| av[i * 8 + j * 4 + k]).sum();
            assert!(close(sum[i * 4 + k], want, 1e-14));
        }
        for j in 0..2 {
            let want = (0..4).fold(C::new(1.0, 0.0), |p, k| mul(p, av[i * 8 + j * 4 + k]));
            assert!(close(prod[i * 2 + j], want, 1e-13));
        }
    }
    let mean = vals(&a.mean(None, false).unwrap())[0];
    let want: C = av.iter().sum::<C>() / 16.0;
    assert!(close(mean, want, 1e-14));
    // var / std: the mean of |x - mean|^2 (over n - ddof), real f64, here with ddof 1.
    let var = a.var(None, 1, false).unwrap();
    let sd = a.std(None, 1, false).unwrap();
    assert_eq!((var.dtype(), sd.dtype()), (DType::F64, DType::F64));
    let want_var = av.iter().map(|x| (x - want).norm_sqr()).sum::<f64>() / 15.0;
    let (v, s) = (var.item::<f64>().unwrap(), sd.item::<f64>().unwrap());
    assert!((v - want_var).abs() < 1e-13 * want_var && (s - want_var.sqrt()).abs() < 1e-13);
    let c64 = a
        .astype(DType::C64)
        .unwrap()
        .var(Some(&[-1]), 0, true)
        .unwrap();
    assert_eq!((c64.dtype(), c64.shape()), (DType::F32, &[2, 2, 1][..]));
    let any = a.any(None, false).unwrap().to_vec::<bool>().unwrap();
    assert_eq!(any, [true]);
    for e in [
        a.max(None, false).unwrap_err().to_string(),
        a.sort(-1, false).unwrap_err().to_string(),
        a.unary(UnaryOp::Floor).unwrap_err().to_string(),
    ] {
        assert!(e.contains("complex"), "{e}");
    }
    // Matmul: batched, a transposed operand, a 1-D one; against the triple loop.
    let x = c128(&random(&mut rng, 2 * 3 * 5), &[2, 5, 3])
        .permute(&[0, 2, 1])
        .unwrap(); // (2,3,5)
    let y = c128(&random(&mut rng, 5 * 4), &[5, 4]);
    let (xv, yv) = (vals(&x), vals(&y));
    let got = vals(&x.matmul(&y).unwrap());
    for b in 0..2 {
        for i in 0..3 {
            for j in 0..4 {
                let want = (0..5).fold(C::new(0.0, 0.0), |acc, k| {
                    acc + mul(xv[b * 15 + i * 5 + k], yv[k * 4 + j])
                });
                assert!(close(got[b * 12 + i * 4 + j], want, 1e-13));
            }
        }
    }
    let vec1 = c128(&random(&mut rng, 5), &[5]);
    let mv = vals(&x.astype(DType::C64).unwrap().matmul(&vec1).unwrap());
    assert_eq!(mv.len(), 6);
    let vv = vals(&vec1);
    let want = (0..5).fold(C::new(0.0, 0.0), |acc, k| acc + mul(xv[k], vv[k]));
    assert!(close(mv[0], want, 1e-5));
}

#[test]
fn printing_and_safetensors() {
    let z = c128(&[C::new(1.0, 2.0), C::new(3.0, -4.5)], &[2]);
    let text = format!("{z}");
    assert!(text.contains("+2.") && text.contains("-4.5j"), "{text}");
    let dir = std::env::temp_dir().join(format!("quill-complex-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("z.safetensors");
    let meta = Default::default();
    let e = quill::io::save_safetensors(&path, &[("z".into(), z.clone())], &meta).unwrap_err();
    assert!(e.to_string().contains("complex128"), "{e}");
    let z64 = z.astype(DType::C64).unwrap().slice(&s![..;-1]).unwrap();
    quill::io::save_safetensors(&path, &[("z".into(), z64.clone())], &meta).unwrap();
    let (back, _) = quill::io::load_safetensors(&path).unwrap();
    assert_eq!(back[0].1.dtype(), DType::C64);
    assert_eq!(vals(&back[0].1), vals(&z64));
    let _ = std::fs::remove_dir_all(&dir);
}
