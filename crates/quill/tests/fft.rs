//! `quill::fft` against the DFT's definition summed here term by term (O(n^2), in f64), for
//! lengths that take each of rustfft's algorithms (1, powers of two, mixed radix, primes),
//! over a permuted, reversed view along each axis; the inverse pairs round-trip; crop and pad;
//! the three norms; the real transforms; refusals.

use num_complex::Complex;
use quill::fft::{self, Norm};
use quill::{s, DType, NDArray};

type C = Complex<f64>;

fn dft(x: &[C], inverse: bool) -> Vec<C> {
    let n = x.len() as f64;
    let sign = if inverse { 1.0 } else { -1.0 };
    (0..x.len())
        .map(|k| {
            x.iter()
                .enumerate()
                .map(|(j, &v)| {
                    let t = sign * 2.0 * std::f64::consts::PI * (j * k) as f64 / n;
                    v * C::new(t.cos(), t.sin())
                })
                .sum()
        })
        .collect()
}

fn vals(a: &NDArray) -> Vec<C> {
    a.astype(DType::C128).unwrap().to_vec::<C>().unwrap()
}

fn signal(n: usize, phase: f64) -> Vec<C> {
    (0..n)
        .map(|i| {
            C::new(
                (i as f64 * 0.7 + phase).sin(),
                (i as f64 * 1.3 - phase).cos(),
            )
        })
        .collect()
}

fn close(a: &[C], b: &[C], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).norm() <= tol * (1.0 + y.norm()), "[{i}] {x} vs {y}");
    }
}

#[test]
fn matches_the_definition_along_each_axis_of_a_view() {
    for n in [1usize, 2, 7, 8, 12, 13, 30] {
        // (3, n) rows of distinct signals; the view is (n, 3) reversed along n.
        let rows: Vec<Vec<C>> = (0..3).map(|r| signal(n, r as f64)).collect();
        let flat: Vec<C> = rows.iter().flatten().copied().collect();
        let a = NDArray::from_vec(flat, &[3, n]).unwrap();
        let v = a.permute(&[1, 0]).unwrap().slice(&s![..;-1, ..]).unwrap(); // (n, 3)
        let got = vals(&fft::fft(&v, None, 0, Norm::Backward).unwrap());
        for (r, row) in rows.iter().enumerate() {
            let rev: Vec<C> = row.iter().rev().copied().collect();
            let want = dft(&rev, false);
            let col: Vec<C> = (0..n).map(|k| got[k * 3 + r]).collect();
            close(&col, &want, 1e-12);
        }
        // The inverse, on the rows (last axis), scaled by 1/n.
        let inv = vals(&fft::ifft(&a, None, -1, Norm::Backward).unwrap());
        for (r, row) in rows.iter().enumerate() {
            let want: Vec<C> = dft(row, true).iter().map(|z| z / n as f64).collect();
            close(&inv[r * n..(r + 1) * n], &want, 1e-12);
        }
    }
}

#[test]
fn crop_pad_norms_and_real_transforms() {
    let x = signal(10, 0.3);
    let a = NDArray::from_vec(x.clone(), &[10]).unwrap();
    // Cropped to 6 and padded to 16: the definition of the cropped / padded signal.
    let crop = vals(&fft::fft(&a, Some(6), -1, Norm::Backward).unwrap());
    close(&crop, &dft(&x[..6], false), 1e-12);
    let mut padded = x.clone();
    padded.resize(16, C::new(0.0, 0.0));
    close(
        &vals(&fft::fft(&a, Some(16), 0, Norm::Backward).unwrap()),
        &dft(&padded, false),
        1e-12,
    );
    // Norms: ortho scales both ways by 1/sqrt(n), forward puts 1/n on the forward transform.
    let ortho = vals(&fft::fft(&a, None, 0, Norm::Ortho).unwrap());
    let want: Vec<C> = dft(&x, false).iter().map(|z| z / 10f64.sqrt()).collect();
    close(&ortho, &want, 1e-12);
    let fwd = vals(&fft::fft(&a, None, 0, Norm::Forward).unwrap());
    let want: Vec<C> = dft(&x, false).iter().map(|z| z / 10.0).collect();
    close(&fwd, &want, 1e-12);
    // rfft of a real f32 signal: complex64, the first n/2 + 1 terms; irfft inverts it.
    let re: Vec<f32> = (0..9)
        .map(|i| (i as f32 * 0.9).cos() + 0.1 * i as f32)
        .collect();
    let r = NDArray::from_vec(re.clone(), &[9]).unwrap();
    let spec = fft::rfft(&r, None, 0, Norm::Backward).unwrap();
    assert_eq!((spec.dtype(), spec.shape()), (DType::C64, &[5usize][..]));
    let full = dft(
        &re.iter()
            .map(|&v| C::new(v as f64, 0.0))
            .collect::<Vec<_>>(),
        false,
    );
    close(&vals(&spec), &full[..5], 1e-5);
    let back = fft::irfft(&spec, Some(9), 0, Norm::Backward).unwrap();
    assert_eq!(back.dtype(), DType::F32);
    let b = back.to_vec::<f32>().unwrap();
    for (g, w) in b.iter().zip(&re) {
        assert!((g - w).abs() < 1e-5, "{g} vs {w}");
    }
    // fftn over two axes is fft along one, then the other.
    let m = NDArray::from_vec(signal(12, 1.0), &[3, 4]).unwrap();
    let two = vals(&fft::fftn(&m, None, None, Norm::Backward).unwrap());
    let step = fft::fft(
        &fft::fft(&m, None, 1, Norm::Backward).unwrap(),
        None,
        0,
        Norm::Backward,
    )
    .unwrap();
    close(&two, &vals(&step), 1e-12);
    let round = fft::irfftn(
        &fft::rfftn(&m.real().unwrap(), None, None, Norm::Ortho).unwrap(),
        Some(&[3, 4]),
        None,
        Norm::Ortho,
    )
    .unwrap();
    let want = m.real().unwrap().to_vec::<f64>().unwrap();
    for (g, w) in round.to_vec::<f64>().unwrap().iter().zip(&want) {
        assert!((g - w).abs() < 1e-12);
    }
    // Frequencies.
    assert_eq!(
        fft::fftfreq(5, 0.5, DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap(),
        [0.0, 0.4, 0.8, -0.8, -0.4]
    );
    assert_eq!(
        fft::rfftfreq(4, 1.0, DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap(),
        [0.0, 0.25, 0.5]
    );
}

#[test]
fn refusals_name_the_problem() {
    let a = NDArray::from_vec(signal(4, 0.0), &[4]).unwrap();
    let msg = |r: quill::Result<NDArray>| r.unwrap_err().to_string();
    assert!(msg(fft::fft(&a, Some(0), 0, Norm::Backward)).contains("at least 1"));
    assert!(msg(fft::rfft(&a, None, 0, Norm::Backward)).contains("real signal"));
    assert!(msg(fft::fft(&a, None, 1, Norm::Backward)).contains("axis 1"));
    assert!(msg(fft::fft(&NDArray::scalar(1.0f64), None, 0, Norm::Backward)).contains("0-d"));
    let b = NDArray::zeros(&[2], DType::Bool).unwrap();
    assert!(msg(fft::fft(&b, None, 0, Norm::Backward)).contains("bool"));
    let m = NDArray::zeros(&[2, 2], DType::F64).unwrap();
    assert!(msg(fft::fftn(&m, None, Some(&[0, -2]), Norm::Backward)).contains("repeated"));
    assert!(
        msg(fft::fftn(&m, Some(&[2]), Some(&[0, 1]), Norm::Backward)).contains("one size per axis")
    );
    assert!(Norm::parse("both")
        .unwrap_err()
        .to_string()
        .contains("ortho"));
}

/// Along an inner axis the lanes go a wave of columns at a time (`fft/columns.rs`): shapes
/// whose waves are several and uneven, batched in front, with a stepped, reversed view as the
/// input, each lane checked against the definition; complex64 in single precision.
#[test]
fn inner_axes_in_several_waves_match_the_definition() {
    // outer * len = 2 * 512 gives waves of 256 columns: 600 columns make 256 + 256 + 88.
    let (outer, len, inner) = (2usize, 512usize, 600usize);
    let full: Vec<C> = (0..outer * len * 2 * inner)
        .map(|i| C::new((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
        .collect();
    let base = NDArray::from_vec(full, &[outer, len, 2 * inner]).unwrap();
    // Every other column, reversed: a view with stride -2 on the inner axis.
    let v = base.slice(&s![.., .., ..;-2]).unwrap();
    let host = vals(&v);
    for (dtype, tol) in [(DType::C128, 1e-10), (DType::C64, 2e-4)] {
        let x = v.astype(dtype).unwrap();
        for inverse in [false, true] {
            let got = if inverse {
                fft::ifft(&x, None, 1, Norm::Ortho)
            } else {
                fft::fft(&x, None, 1, Norm::Ortho)
            };
            let got = vals(&got.unwrap());
            // A sample of lanes in every wave, including the last column.
            for o in 0..outer {
                for c in [0, 1, 255, 256, 300, 511, 512, 599] {
                    let lane: Vec<C> = (0..len).map(|i| host[(o * len + i) * inner + c]).collect();
                    let want: Vec<C> = dft(&lane, inverse)
                        .into_iter()
                        .map(|z| z / (len as f64).sqrt())
                        .collect();
                    let have: Vec<C> = (0..len).map(|i| got[(o * len + i) * inner + c]).collect();
                    close(&have, &want, tol);
                }
            }
        }
    }
    // rfftn: the real transform along the last axis, then this path along the first.
    let re = v.real().unwrap().compact().unwrap();
    let two = vals(&fft::rfftn(&re, None, None, Norm::Backward).unwrap());
    let rows = vals(&fft::rfft(&re, None, -1, Norm::Backward).unwrap());
    let half = inner / 2 + 1;
    for c in [0, 7, half - 1] {
        for o in 0..outer {
            let lane: Vec<C> = (0..len).map(|i| rows[(o * len + i) * half + c]).collect();
            let mut want = dft(&lane, false);
            // rfftn also transforms the leading axis of 2: combine the two blocks.
            if o == 0 {
                let other: Vec<C> = (0..len).map(|i| rows[(len + i) * half + c]).collect();
                want = want
                    .iter()
                    .zip(dft(&other, false))
                    .map(|(a, b)| a + b)
                    .collect();
            } else {
                let other: Vec<C> = (0..len).map(|i| rows[i * half + c]).collect();
                want = dft(&other, false)
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| a - b)
                    .collect();
            }
            let have: Vec<C> = (0..len).map(|i| two[(o * len + i) * half + c]).collect();
            close(&have, &want, 1e-9);
        }
    }
}

/// fftn / ifftn over whole axes transform one host copy in place (`fft.rs`'s `whole_axes`):
/// on a permuted, stepped 3-D view, any axis order, they equal the one-axis transforms applied
/// in turn, and ifftn undoes fftn.
#[test]
fn fftn_in_place_equals_axis_by_axis() {
    let full: Vec<C> = (0..6 * 10 * 9)
        .map(|i| C::new((i as f64 * 0.3).sin(), (i as f64 * 0.7).cos()))
        .collect();
    let base = NDArray::from_vec(full, &[6, 10, 9]).unwrap();
    let v = base
        .permute(&[2, 0, 1])
        .unwrap()
        .slice(&s![.., ..;2, ..;-1])
        .unwrap(); // (9, 3, 10)
    for axes in [vec![0isize, 1, 2], vec![2, 0], vec![1], vec![-1, 0]] {
        for norm in [Norm::Backward, Norm::Ortho, Norm::Forward] {
            let got = fft::fftn(&v, None, Some(&axes), norm).unwrap();
            let mut want = v.clone();
            for &ax in axes.iter().rev() {
                want = fft::fft(&want, None, ax, norm).unwrap();
            }
            close(&vals(&got), &vals(&want), 1e-12);
            let back = fft::ifftn(&got, None, Some(&axes), norm).unwrap();
            close(&vals(&back), &vals(&v), 1e-12);
        }
    }
}
