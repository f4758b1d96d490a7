//! concat / stack / split / chunk and gather / scatter_add / index_select / take_along_axis
//! against naive references that loop over multi-indices. Values are small integers, exact in
//! every dtype, so each result is compared exactly after conversion to f64. Inputs are built in
//! many layouts (contiguous, random strided with gaps / reversal / offset, negative-step slices,
//! permuted, broadcast stride 0), ranks 0 to 5 with size-0 dims, every dtype; then each error.

use quill::{s, DType, Element, Error, NDArray};
use quill_test_support::{numel, ravel, strided_from, unravel, with_dtype, Prng, ALL_DTYPES};

const INDEX_DTYPES: [DType; 3] = [DType::I32, DType::I64, DType::U8];

// ---------------------------------------------------------------------------------------------
// Inputs

/// A typed array of `shape` whose C-order elements are `vals` (cast exactly), in layout `mode`:
/// 0 contiguous, 1 random strided (permuted, gapped, reversed, offset), 2 every other row of a
/// larger array taken with step -2 on axis 0, 3 a permuted view of a contiguous array.
fn build(rng: &mut Prng, vals: &[f64], shape: &[usize], dtype: DType, mode: usize) -> NDArray {
    assert_eq!(vals.len(), numel(shape));
    with_dtype!(dtype, T => {
        let typed: Vec<T> = vals.iter().map(|&v| T::from_f64(v)).collect();
        build_typed(rng, &typed, shape, mode)
    })
}

fn build_typed<T: quill::Element>(
    rng: &mut Prng,
    vals: &[T],
    shape: &[usize],
    mode: usize,
) -> NDArray {
    let rank = shape.len();
    match mode {
        1 => strided_from(rng, vals, shape, T::zero()),
        2 if rank > 0 => {
            let mut big = shape.to_vec();
            big[0] *= 2;
            let mut buf = vec![T::zero(); numel(&big)];
            for (k, &v) in vals.iter().enumerate() {
                let mut m = unravel(shape, k);
                m[0] = big[0] - 1 - 2 * m[0];
                buf[ravel(&big, &m)] = v;
            }
            let a = NDArray::from_vec(buf, &big).unwrap();
            let v = a.slice(&s![..;-2]).unwrap();
            assert!(shape[0] < 2 || v.strides()[0] < 0);
            v
        }
        3 if rank > 1 => {
            let p = rng.permutation(rank);
            let base_shape: Vec<usize> = p.iter().map(|&i| shape[i]).collect();
            let mut buf = vec![T::zero(); vals.len()];
            for (k, &v) in vals.iter().enumerate() {
                let m = unravel(shape, k);
                let b: Vec<usize> = p.iter().map(|&i| m[i]).collect();
                buf[ravel(&base_shape, &b)] = v;
            }
            let mut inv = vec![0isize; rank];
            for (j, &i) in p.iter().enumerate() {
                inv[i] = j as isize;
            }
            NDArray::from_vec(buf, &base_shape)
                .unwrap()
                .permute(&inv)
                .unwrap()
        }
        _ => NDArray::from_vec(vals.to_vec(), shape).unwrap(),
    }
}

/// A random input of `shape` with values from `gen`, in a random layout: one of `build`'s, or
/// (mode 4) a smaller array broadcast with stride 0 on some dims. Returns the array and its
/// C-order values.
fn random_input(
    rng: &mut Prng,
    shape: &[usize],
    dtype: DType,
    gen: &mut dyn FnMut(&mut Prng) -> f64,
) -> (NDArray, Vec<f64>) {
    let mode = rng.below(5);
    if mode == 4 && !shape.is_empty() {
        let small: Vec<usize> = shape
            .iter()
            .map(|&d| if rng.chance(0.5) { 1 } else { d })
            .collect();
        let vals: Vec<f64> = (0..numel(&small)).map(|_| gen(rng)).collect();
        let inner = rng.below(4);
        let a = build(rng, &vals, &small, dtype, inner)
            .broadcast_to(shape)
            .unwrap();
        let full = (0..numel(shape))
            .map(|k| {
                let m: Vec<usize> = unravel(shape, k)
                    .iter()
                    .zip(&small)
                    .map(|(&i, &n)| if n == 1 { 0 } else { i })
                    .collect();
                vals[ravel(&small, &m)]
            })
            .collect();
        return (a, full);
    }
    let vals: Vec<f64> = (0..numel(shape)).map(|_| gen(rng)).collect();
    (build(rng, &vals, shape, dtype, mode), vals)
}

/// Small integers exact in `dtype` (0 or 1 for bool).
fn data_gen(dtype: DType) -> impl FnMut(&mut Prng) -> f64 {
    move |r: &mut Prng| {
        if dtype == DType::Bool {
            r.below(2) as f64
        } else {
            r.below(8) as f64
        }
    }
}

/// Valid positions for an axis of `n` (negative too unless the dtype is unsigned).
fn index_gen(dtype: DType, n: usize) -> impl FnMut(&mut Prng) -> f64 {
    move |r: &mut Prng| {
        if n == 0 {
            // Only reached for a broadcast index whose result is empty: never read.
            return 0.0;
        }
        let lo = if dtype == DType::U8 { 0 } else { -(n as isize) };
        r.int(lo, n as isize - 1) as f64
    }
}

fn values(a: &NDArray) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn random_shape(rng: &mut Prng, rank: usize, max_dim: usize) -> Vec<usize> {
    (0..rank)
        .map(|_| {
            if rng.chance(0.06) {
                0
            } else {
                rng.int(1, max_dim as isize) as usize
            }
        })
        .collect()
}

/// A random axis of a rank-`ndim` array, negative half the time.
fn random_axis(rng: &mut Prng, ndim: usize) -> (isize, usize) {
    let ax = rng.below(ndim);
    let given = if rng.chance(0.5) {
        ax as isize - ndim as isize
    } else {
        ax as isize
    };
    (given, ax)
}

fn wrap(v: f64, n: usize) -> usize {
    let v = v as i64;
    (if v < 0 { v + n as i64 } else { v }) as usize
}

#[track_caller]
fn assert_err(r: Result<impl std::fmt::Debug, Error>, op: &str, parts: &[&str]) -> Error {
    let e = r.expect_err("expected an error");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{op}:")),
        "{msg:?} does not name {op}"
    );
    for p in parts {
        assert!(msg.contains(p), "{msg:?} does not mention {p:?}");
    }
    e
}

// ---------------------------------------------------------------------------------------------
// concat / stack

#[test]
fn concat_matches_reference() {
    let mut rng = Prng::new(1);
    for case in 0..300 {
        let rank = 1 + rng.below(5);
        let mut shape = random_shape(&mut rng, rank, 4);
        let (axis, ax) = random_axis(&mut rng, rank);
        let k = 1 + rng.below(4);
        let mut inputs = Vec::new();
        let mut dtype: Option<DType> = None;
        for _ in 0..k {
            shape[ax] = if rng.chance(0.2) { 0 } else { rng.below(4) };
            let dt = ALL_DTYPES[rng.below(8)];
            dtype = Some(dtype.map_or(dt, |d| quill_core::promote_types(d, dt)));
            let (a, v) = random_input(&mut rng, &shape, dt, &mut data_gen(dt));
            inputs.push((a, v, shape.clone()));
        }
        let refs: Vec<&NDArray> = inputs.iter().map(|(a, _, _)| a).collect();
        let got = NDArray::concat(&refs, axis).unwrap();
        let mut out_shape = shape.clone();
        out_shape[ax] = inputs.iter().map(|(_, _, s)| s[ax]).sum();
        let ctx = format!("case {case}: shapes {:?} axis {axis}", {
            inputs.iter().map(|(_, _, s)| s.clone()).collect::<Vec<_>>()
        });
        assert_eq!(got.shape(), out_shape.as_slice(), "{ctx}");
        assert_eq!(got.dtype(), dtype.unwrap(), "{ctx}");
        assert!(got.is_contiguous(), "{ctx}");
        let want: Vec<f64> = (0..numel(&out_shape))
            .map(|e| {
                let mut m = unravel(&out_shape, e);
                for (_, v, s) in &inputs {
                    if m[ax] < s[ax] {
                        return v[ravel(s, &m)];
                    }
                    m[ax] -= s[ax];
                }
                unreachable!()
            })
            .collect();
        assert_eq!(values(&got), want, "{ctx}");
    }
}

#[test]
fn concat_promotes_like_numpy() {
    let cases = [
        (DType::U8, DType::I32, DType::I32),
        (DType::Bool, DType::U8, DType::U8),
        (DType::F16, DType::BF16, DType::F32),
        (DType::I32, DType::F32, DType::F64),
        (DType::U8, DType::F16, DType::F16),
        (DType::I64, DType::F64, DType::F64),
    ];
    for (a, b, want) in cases {
        let x = NDArray::ones(&[2], a).unwrap();
        let y = NDArray::zeros(&[1], b).unwrap();
        let c = NDArray::concat(&[&x, &y], 0).unwrap();
        assert_eq!(c.dtype(), want, "{a} + {b}");
        assert_eq!(values(&c), [1.0, 1.0, 0.0]);
    }
}

#[test]
fn concat_of_views_of_one_buffer_and_single_input() {
    let a = NDArray::arange(0.0, 12.0, 1.0, DType::I64)
        .unwrap()
        .reshape(&[3, 4])
        .unwrap();
    let t = a.transpose(0, 1).unwrap();
    let r = a.slice(&s![..;-1, 1..3]).unwrap();
    let c = NDArray::concat(&[&a, &r], 1).unwrap();
    assert_eq!(c.shape(), &[3, 6]);
    assert_eq!(
        c.to_vec::<i64>().unwrap(),
        [0, 1, 2, 3, 9, 10, 4, 5, 6, 7, 5, 6, 8, 9, 10, 11, 1, 2]
    );
    let one = NDArray::concat(&[&t], -2).unwrap();
    assert!(!one.shares_storage_with(&a), "concat returns a new array");
    assert_eq!(values(&one), values(&t));
    // All inputs empty: an empty result of the promoted dtype.
    let e = NDArray::zeros(&[0, 3], DType::U8).unwrap();
    let f = NDArray::zeros(&[0, 3], DType::I32).unwrap();
    let g = NDArray::concat(&[&e, &f], 0).unwrap();
    assert_eq!((g.shape(), g.dtype()), (&[0, 3][..], DType::I32));
}

#[test]
fn stack_matches_reference() {
    let mut rng = Prng::new(2);
    for case in 0..200 {
        let rank = rng.below(5);
        let shape = random_shape(&mut rng, rank, 4);
        let (axis, ax) = random_axis(&mut rng, rank + 1);
        let k = 1 + rng.below(4);
        let dt = ALL_DTYPES[rng.below(8)];
        let inputs: Vec<(NDArray, Vec<f64>)> = (0..k)
            .map(|_| random_input(&mut rng, &shape, dt, &mut data_gen(dt)))
            .collect();
        let refs: Vec<&NDArray> = inputs.iter().map(|(a, _)| a).collect();
        let got = NDArray::stack(&refs, axis).unwrap();
        let mut out_shape = shape.clone();
        out_shape.insert(ax, k);
        let ctx = format!("case {case}: shape {shape:?} axis {axis} k {k}");
        assert_eq!(got.shape(), out_shape.as_slice(), "{ctx}");
        assert_eq!(got.dtype(), dt, "{ctx}");
        let want: Vec<f64> = (0..numel(&out_shape))
            .map(|e| {
                let mut m = unravel(&out_shape, e);
                let which = m.remove(ax);
                inputs[which].1[ravel(&shape, &m)]
            })
            .collect();
        assert_eq!(values(&got), want, "{ctx}");
    }
}

#[test]
fn stack_of_scalars() {
    let a = NDArray::scalar(1.5f32);
    let b = NDArray::scalar(2.5f32);
    let s = NDArray::stack(&[&a, &b, &a], -1).unwrap();
    assert_eq!(s.shape(), &[3]);
    assert_eq!(s.to_vec::<f32>().unwrap(), [1.5, 2.5, 1.5]);
}

// ---------------------------------------------------------------------------------------------
// split / chunk

#[test]
fn split_returns_views_matching_reference() {
    let mut rng = Prng::new(3);
    for case in 0..200 {
        let rank = 1 + rng.below(5);
        let shape = random_shape(&mut rng, rank, 5);
        let (axis, ax) = random_axis(&mut rng, rank);
        let dt = ALL_DTYPES[rng.below(8)];
        let (a, vals) = random_input(&mut rng, &shape, dt, &mut data_gen(dt));
        // Random sizes adding up to the axis length, zeros included.
        let mut sizes = Vec::new();
        let mut left = shape[ax];
        while left > 0 || rng.chance(0.2) {
            let n = rng.below(left + 1);
            sizes.push(n);
            left -= n;
        }
        let parts = a.split(&sizes, axis).unwrap();
        check_parts(
            &a,
            &vals,
            &shape,
            ax,
            &sizes,
            &parts,
            &format!("case {case}"),
        );
    }
}

#[track_caller]
fn check_parts(
    a: &NDArray,
    vals: &[f64],
    shape: &[usize],
    ax: usize,
    sizes: &[usize],
    parts: &[NDArray],
    ctx: &str,
) {
    assert_eq!(parts.len(), sizes.len(), "{ctx}");
    let mut start = 0;
    for (p, &n) in parts.iter().zip(sizes) {
        let mut ps = shape.to_vec();
        ps[ax] = n;
        assert_eq!(p.shape(), ps.as_slice(), "{ctx}");
        assert!(p.shares_storage_with(a), "{ctx}: split returns views");
        let want: Vec<f64> = (0..numel(&ps))
            .map(|e| {
                let mut m = unravel(&ps, e);
                m[ax] += start;
                vals[ravel(shape, &m)]
            })
            .collect();
        assert_eq!(values(p), want, "{ctx}");
        start += n;
    }
}

#[test]
fn chunk_sizes_follow_torch() {
    let cases: [(usize, usize, &[usize]); 7] = [
        (10, 4, &[3, 3, 3, 1]),
        (5, 4, &[2, 2, 1]),
        (6, 3, &[2, 2, 2]),
        (3, 5, &[1, 1, 1]),
        (1, 1, &[1]),
        (7, 1, &[7]),
        (0, 3, &[0, 0, 0]),
    ];
    let mut rng = Prng::new(4);
    for (len, n, want) in cases {
        let shape = [2, len, 3];
        let vals: Vec<f64> = (0..numel(&shape)).map(|i| (i % 200) as f64).collect();
        for mode in 0..4 {
            let a = build(&mut rng, &vals, &shape, DType::I32, mode);
            let parts = a.chunk(n, -2).unwrap();
            let ctx = format!("len {len} n {n} mode {mode}");
            check_parts(&a, &vals, &shape, 1, want, &parts, &ctx);
        }
    }
}

#[test]
fn split_views_write_through() {
    let a = NDArray::zeros(&[4, 3], DType::F32).unwrap();
    let parts = a.split(&[1, 3], 0).unwrap();
    parts[1].assign_scalar(2.0).unwrap();
    let cols = a.chunk(3, 1).unwrap();
    cols[2].assign_scalar(5.0).unwrap();
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        [0., 0., 5., 2., 2., 5., 2., 2., 5., 2., 2., 5.]
    );
}

// ---------------------------------------------------------------------------------------------
// gather / take_along_axis / index_select

fn gather_ref(src: &[f64], sshape: &[usize], idx: &[f64], ishape: &[usize], ax: usize) -> Vec<f64> {
    (0..numel(ishape))
        .map(|k| {
            let mut m = unravel(ishape, k);
            m[ax] = wrap(idx[k], sshape[ax]);
            src[ravel(sshape, &m)]
        })
        .collect()
}

#[test]
fn gather_matches_reference() {
    let mut rng = Prng::new(5);
    for case in 0..400 {
        let rank = 1 + rng.below(5);
        let sshape = random_shape(&mut rng, rank, 4);
        let (axis, ax) = random_axis(&mut rng, rank);
        let mut ishape: Vec<usize> = (0..rank)
            .map(|d| {
                if d == ax {
                    rng.below(5)
                } else {
                    rng.below(sshape[d] + 1)
                }
            })
            .collect();
        if sshape[ax] == 0 {
            ishape[ax] = 0;
        }
        let dt = ALL_DTYPES[rng.below(8)];
        let it = INDEX_DTYPES[rng.below(3)];
        let (src, svals) = random_input(&mut rng, &sshape, dt, &mut data_gen(dt));
        let mut g = index_gen(it, sshape[ax]);
        let (index, ivals) = random_input(&mut rng, &ishape, it, &mut g);
        let ctx = format!(
            "case {case}: src {sshape:?} {dt} strides {:?}, index {ishape:?} {it} strides {:?}, axis {axis}",
            src.strides(),
            index.strides()
        );
        let got = src.gather(axis, &index).unwrap();
        assert_eq!(got.shape(), ishape.as_slice(), "{ctx}");
        assert_eq!(got.dtype(), dt, "{ctx}");
        assert!(
            got.is_contiguous() && !got.shares_storage_with(&src),
            "{ctx}"
        );
        assert_eq!(
            values(&got),
            gather_ref(&svals, &sshape, &ivals, &ishape, ax),
            "{ctx}"
        );
    }
}

#[test]
fn gather_every_dtype_exact() {
    // Values that do not survive a round trip through another dtype (NaN, -0.0, big ints).
    let idx = NDArray::from_vec(vec![2i64, 0, -1, 1], &[1, 4]).unwrap();
    let check = |a: NDArray| {
        let got = a.gather(1, &idx).unwrap();
        with_dtype!(a.dtype(), T => {
            let v = a.to_vec::<T>().unwrap();
            quill_test_support::assert_same(&got.to_vec::<T>().unwrap(), &[v[2], v[0], v[2], v[1]], "exact");
        });
    };
    check(NDArray::from_vec(vec![f32::NAN, -0.0, 1e30], &[1, 3]).unwrap());
    check(NDArray::from_vec(vec![f64::NAN, -0.0, 1e300], &[1, 3]).unwrap());
    check(NDArray::from_vec(vec![i64::MIN, i64::MAX, 7], &[1, 3]).unwrap());
    check(NDArray::from_vec(vec![i32::MIN, i32::MAX, 7], &[1, 3]).unwrap());
    check(NDArray::from_vec(vec![255u8, 0, 7], &[1, 3]).unwrap());
    check(NDArray::from_vec(vec![true, false, true], &[1, 3]).unwrap());
    check(
        NDArray::from_vec(
            vec![quill::f16::NAN, quill::f16::MAX, quill::f16::NEG_ZERO],
            &[1, 3],
        )
        .unwrap(),
    );
    check(
        NDArray::from_vec(
            vec![quill::bf16::NAN, quill::bf16::MAX, quill::bf16::NEG_ZERO],
            &[1, 3],
        )
        .unwrap(),
    );
}

#[test]
fn gather_rank0_and_shared_buffer() {
    let x = NDArray::scalar(3.5f64);
    for i in [0i64, -1] {
        let g = x.gather(0, &NDArray::scalar(i)).unwrap();
        assert_eq!(g.shape(), &[] as &[usize]);
        assert_eq!(g.to_vec::<f64>().unwrap(), [3.5]);
    }
    assert_err(
        x.gather(-1, &NDArray::scalar(1i64)),
        "gather",
        &["index 1", "size 1"],
    );
    // The index is a view of the array it indexes: one buffer, read twice.
    let a = NDArray::from_vec(vec![2i64, 0, 1, 1, 2, 0], &[2, 3]).unwrap();
    let g = a.gather(1, &a).unwrap();
    assert_eq!(g.to_vec::<i64>().unwrap(), [1, 2, 0, 2, 0, 1]);
    let g = a.gather(1, &a.slice(&s![.., ..;-1]).unwrap()).unwrap();
    assert_eq!(g.to_vec::<i64>().unwrap(), [0, 2, 1, 1, 0, 2]);
}

#[test]
fn gather_large_coalesced() {
    // Big enough that the inner loop runs over long coalesced rows.
    let (r, c, k) = (300, 200, 50);
    let src: Vec<f32> = (0..r * c).map(|i| i as f32).collect();
    let a = NDArray::from_vec(src, &[r, c]).unwrap();
    let idx: Vec<i64> = (0..r * k).map(|i| ((i * 7919) % c) as i64).collect();
    let index = NDArray::from_vec(idx.clone(), &[r, k]).unwrap();
    let got = a.gather(1, &index).unwrap().to_vec::<f32>().unwrap();
    for i in 0..r {
        for j in 0..k {
            assert_eq!(got[i * k + j], (i * c + idx[i * k + j] as usize) as f32);
        }
    }
    let t = a.transpose(0, 1).unwrap(); // [c, r], strides [1, c]
    let index = NDArray::from_vec(idx.clone(), &[k, r]).unwrap();
    let got = t.gather(0, &index).unwrap().to_vec::<f32>().unwrap();
    for j in 0..k {
        for i in 0..r {
            let row = idx[j * r + i] as usize;
            assert_eq!(got[j * r + i], (i * c + row) as f32);
        }
    }
}

#[test]
fn take_along_axis_matches_reference() {
    let mut rng = Prng::new(6);
    for case in 0..300 {
        let rank = 1 + rng.below(5);
        let (axis, ax) = random_axis(&mut rng, rank);
        // A common shape, then each side may have 1 where the other keeps the size.
        let common_shape = random_shape(&mut rng, rank, 4);
        let mut sshape = common_shape.clone();
        let mut ishape = common_shape.clone();
        for d in 0..rank {
            if d == ax {
                sshape[d] = rng.below(4);
                ishape[d] = if sshape[d] == 0 { 0 } else { rng.below(5) };
            } else if rng.chance(0.3) {
                sshape[d] = 1;
            } else if rng.chance(0.3) {
                ishape[d] = 1;
            }
        }
        let dt = ALL_DTYPES[rng.below(8)];
        let it = INDEX_DTYPES[rng.below(3)];
        let (src, svals) = random_input(&mut rng, &sshape, dt, &mut data_gen(dt));
        let mut g = index_gen(it, sshape[ax]);
        let (index, ivals) = random_input(&mut rng, &ishape, it, &mut g);
        let ctx = format!("case {case}: src {sshape:?} index {ishape:?} axis {axis}");
        let got = src.take_along_axis(&index, axis).unwrap();
        let out_shape: Vec<usize> = (0..rank)
            .map(|d| {
                // The index's length on the axis; elsewhere the broadcast of both.
                if d == ax || sshape[d] == 1 {
                    ishape[d]
                } else {
                    sshape[d]
                }
            })
            .collect();
        assert_eq!(got.shape(), out_shape.as_slice(), "{ctx}");
        let want: Vec<f64> = (0..numel(&out_shape))
            .map(|k| {
                let m = unravel(&out_shape, k);
                let mi: Vec<usize> = (0..rank)
                    .map(|d| if ishape[d] == 1 { 0 } else { m[d] })
                    .collect();
                let mut ms: Vec<usize> = (0..rank)
                    .map(|d| if sshape[d] == 1 { 0 } else { m[d] })
                    .collect();
                ms[ax] = wrap(ivals[ravel(&ishape, &mi)], sshape[ax]);
                svals[ravel(&sshape, &ms)]
            })
            .collect();
        assert_eq!(values(&got), want, "{ctx}");
    }
}

#[test]
fn index_select_matches_reference() {
    let mut rng = Prng::new(7);
    for case in 0..300 {
        let rank = 1 + rng.below(5);
        let shape = random_shape(&mut rng, rank, 4);
        let (axis, ax) = random_axis(&mut rng, rank);
        let n = if shape[ax] == 0 { 0 } else { rng.below(6) };
        let dt = ALL_DTYPES[rng.below(8)];
        let it = INDEX_DTYPES[rng.below(3)];
        let (src, svals) = random_input(&mut rng, &shape, dt, &mut data_gen(dt));
        let mut g = index_gen(it, shape[ax]);
        let (index, ivals) = random_input(&mut rng, &[n], it, &mut g);
        let ctx = format!(
            "case {case}: src {shape:?} index {n} strides {:?} axis {axis}",
            index.strides()
        );
        let got = src.index_select(axis, &index).unwrap();
        let mut out_shape = shape.clone();
        out_shape[ax] = n;
        assert_eq!(got.shape(), out_shape.as_slice(), "{ctx}");
        let want: Vec<f64> = (0..numel(&out_shape))
            .map(|k| {
                let mut m = unravel(&out_shape, k);
                m[ax] = wrap(ivals[m[ax]], shape[ax]);
                svals[ravel(&shape, &m)]
            })
            .collect();
        assert_eq!(values(&got), want, "{ctx}");
    }
    // A rank-0 index picks one position and keeps the axis.
    let a = NDArray::arange(0.0, 6.0, 1.0, DType::F32)
        .unwrap()
        .reshape(&[2, 3])
        .unwrap();
    let g = a.index_select(1, &NDArray::scalar(-1i32)).unwrap();
    assert_eq!(g.shape(), &[2, 1]);
    assert_eq!(g.to_vec::<f32>().unwrap(), [2.0, 5.0]);
}

// ---------------------------------------------------------------------------------------------
// scatter_add

/// Dtypes `from` may be added into `to` with (NumPy's same_kind).
fn same_kind(from: DType, to: DType) -> bool {
    let kind = |d: DType| {
        if d.is_float() {
            2
        } else if d.is_int() {
            1
        } else {
            0
        }
    };
    kind(from) <= kind(to)
}

#[test]
fn scatter_add_matches_reference() {
    let mut rng = Prng::new(8);
    for case in 0..400 {
        let rank = rng.below(6);
        let sshape = random_shape(&mut rng, rank, 4);
        let (axis, ax) = if rank == 0 {
            (if rng.chance(0.5) { 0 } else { -1 }, 0)
        } else {
            random_axis(&mut rng, rank)
        };
        let axis_len = if rank == 0 { 1 } else { sshape[ax] };
        let mut ishape: Vec<usize> = (0..rank)
            .map(|d| {
                if d == ax {
                    rng.below(5)
                } else {
                    rng.below(sshape[d] + 1)
                }
            })
            .collect();
        if axis_len == 0 {
            ishape[ax] = 0;
        }
        let dt = ALL_DTYPES[rng.below(8)];
        let srcdt = loop {
            let d = ALL_DTYPES[rng.below(8)];
            if same_kind(d, dt) {
                break d;
            }
        };
        let it = INDEX_DTYPES[rng.below(3)];
        let (a, avals) = random_input(&mut rng, &sshape, dt, &mut data_gen(dt));
        let (src, srcvals) = random_input(&mut rng, &ishape, srcdt, &mut data_gen(srcdt));
        let mut g = index_gen(it, axis_len);
        let (index, ivals) = random_input(&mut rng, &ishape, it, &mut g);
        let ctx = format!(
            "case {case}: self {sshape:?} {dt}, index {ishape:?} {it}, src {srcdt}, axis {axis}"
        );
        let before = values(&a);
        let got = a.scatter_add(axis, &index, &src).unwrap();
        assert_eq!(got.shape(), sshape.as_slice(), "{ctx}");
        assert_eq!(got.dtype(), dt, "{ctx}");
        assert!(!got.shares_storage_with(&a), "{ctx}");
        let mut want = avals.clone();
        for k in 0..numel(&ishape) {
            let mut m = unravel(&ishape, k);
            if rank > 0 {
                m[ax] = wrap(ivals[k], axis_len);
            }
            want[ravel(&sshape, &m)] += srcvals[k];
        }
        if dt == DType::Bool {
            want.iter_mut().for_each(|v| *v = (*v != 0.0) as u8 as f64);
        }
        assert_eq!(values(&got), want, "{ctx}");
        assert_eq!(values(&a), before, "{ctx}: self is unchanged");
    }
}

#[test]
fn scatter_add_accumulates_duplicates_and_wraps_integers() {
    let a = NDArray::zeros(&[2, 3], DType::F32).unwrap();
    let index = NDArray::from_vec(vec![0i64, 0, 2, -1, 1, 1, 1, 0], &[2, 4]).unwrap();
    let src = NDArray::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[2, 4]).unwrap();
    let got = a.scatter_add(1, &index, &src).unwrap();
    assert_eq!(
        got.to_vec::<f32>().unwrap(),
        [3.0, 0.0, 7.0, 8.0, 18.0, 0.0]
    );
    let u = NDArray::full(&[1], 250, DType::U8).unwrap();
    let idx = NDArray::from_vec(vec![0u8, 0], &[2]).unwrap();
    let s = NDArray::full(&[2], 5, DType::U8).unwrap();
    assert_eq!(
        u.scatter_add(0, &idx, &s).unwrap().to_vec::<u8>().unwrap(),
        [4]
    );
    // index and src are views of one buffer.
    let buf = NDArray::from_vec(vec![1i64, 0, 1], &[3]).unwrap();
    let z = NDArray::zeros(&[2], DType::I64).unwrap();
    assert_eq!(
        z.scatter_add(0, &buf, &buf)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [0, 2]
    );
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn join_errors_name_the_op() {
    let a = NDArray::zeros(&[2, 3], DType::F32).unwrap();
    let b = NDArray::zeros(&[2, 4], DType::F32).unwrap();
    let c = NDArray::zeros(&[2, 3, 1], DType::F32).unwrap();
    assert_err(NDArray::concat(&[], 0), "concat", &["at least one"]);
    assert_err(
        NDArray::concat(&[&a, &b], 0),
        "concat",
        &["[2, 3]", "[2, 4]"],
    );
    assert_err(
        NDArray::concat(&[&a, &c], 0),
        "concat",
        &["[2, 3, 1]", "rank 2"],
    );
    let e = assert_err(
        NDArray::concat(&[&a, &b], 2),
        "concat",
        &["axis 2", "rank 2"],
    );
    assert!(matches!(e, Error::AxisOutOfRange { .. }));
    assert_err(NDArray::concat(&[&a, &b], -3), "concat", &["axis -3"]);
    let s = NDArray::scalar(1.0f32);
    assert_err(NDArray::concat(&[&s, &s], 0), "concat", &["rank-0"]);
    assert_err(NDArray::stack(&[], 0), "stack", &["at least one"]);
    assert_err(NDArray::stack(&[&a, &b], 0), "stack", &["[2, 3]", "[2, 4]"]);
    assert_err(NDArray::stack(&[&a, &a], 3), "stack", &["axis 3"]);
    assert_err(NDArray::stack(&[&a, &a], -4), "stack", &["axis -4"]);
    assert!(NDArray::stack(&[&a, &a], 2).is_ok() && NDArray::stack(&[&a, &a], -3).is_ok());
    assert_err(a.split(&[1, 1, 2], 1), "split", &["[1, 1, 2]", "length 3"]);
    assert_err(a.split(&[usize::MAX, 4], 1), "split", &["length 3"]);
    assert_err(a.split(&[2], 2), "split", &["axis 2"]);
    assert_err(a.chunk(0, 0), "chunk", &["at least 1"]);
    assert_err(a.chunk(2, -3), "chunk", &["axis -3"]);
    assert_err(s.chunk(1, 0), "chunk", &["axis 0"]);
}

#[test]
fn index_errors_name_the_op() {
    let a = NDArray::arange(0.0, 6.0, 1.0, DType::F32)
        .unwrap()
        .reshape(&[2, 3])
        .unwrap();
    let i = |v: Vec<i64>, shape: &[usize]| NDArray::from_vec(v, shape).unwrap();
    let good = i(vec![0, 1], &[1, 2]);

    // gather
    assert_err(a.gather(2, &good), "gather", &["axis 2"]);
    assert_err(
        a.gather(0, &i(vec![0, 1], &[2])),
        "gather",
        &["[2, 3]", "[2]"],
    );
    assert_err(
        a.gather(0, &i(vec![0; 4], &[1, 4])),
        "gather",
        &["[1, 4]", "axis but 0"],
    );
    let e = assert_err(
        a.gather(1, &i(vec![0, 3], &[1, 2])),
        "gather",
        &["index 3", "axis 1", "size 3"],
    );
    assert!(matches!(
        e,
        Error::IndexOutOfRange {
            index: 3,
            axis: 1,
            size: 3,
            ..
        }
    ));
    assert_err(
        a.gather(1, &i(vec![0, -4], &[1, 2])),
        "gather",
        &["index -4", "size 3"],
    );
    let fi = NDArray::zeros(&[1, 2], DType::F32).unwrap();
    assert_err(a.gather(1, &fi), "gather", &["integer dtype", "f32"]);
    assert_err(
        a.gather(1, &NDArray::zeros(&[1, 2], DType::Bool).unwrap()),
        "gather",
        &["bool"],
    );
    let empty = NDArray::zeros(&[2, 0], DType::F32).unwrap();
    assert_err(
        empty.gather(1, &i(vec![5], &[1, 1])),
        "gather",
        &["index 5", "size 0"],
    );
    assert_eq!(
        empty.gather(1, &i(vec![], &[2, 0])).unwrap().shape(),
        &[2, 0]
    );

    // scatter_add
    let src = NDArray::ones(&[1, 2], DType::F32).unwrap();
    assert_err(a.scatter_add(-3, &good, &src), "scatter_add", &["axis -3"]);
    assert_err(
        a.scatter_add(1, &good, &NDArray::ones(&[2, 1], DType::F32).unwrap()),
        "scatter_add",
        &["[1, 2]", "[2, 1]"],
    );
    assert_err(
        a.scatter_add(1, &i(vec![7, 0], &[1, 2]), &src),
        "scatter_add",
        &["index 7", "size 3"],
    );
    assert_err(
        a.scatter_add(1, &fi, &src),
        "scatter_add",
        &["integer dtype"],
    );
    let ai = NDArray::zeros(&[2, 3], DType::I32).unwrap();
    assert_err(
        ai.scatter_add(1, &good, &src),
        "scatter_add",
        &["f32", "i32", "same_kind"],
    );
    let ab = NDArray::zeros(&[2, 3], DType::Bool).unwrap();
    assert_err(
        ab.scatter_add(1, &good, &good),
        "scatter_add",
        &["same_kind"],
    );
    assert_err(
        a.scatter_add(
            0,
            &i(vec![0; 4], &[1, 4]),
            &NDArray::ones(&[1, 4], DType::F32).unwrap(),
        ),
        "scatter_add",
        &["[1, 4]"],
    );
    // An error after the first additions leaves self untouched (the result is out of place).
    assert_err(
        a.scatter_add(1, &i(vec![0, 9], &[1, 2]), &src),
        "scatter_add",
        &["index 9"],
    );
    assert_eq!(a.to_vec::<f32>().unwrap(), [0., 1., 2., 3., 4., 5.]);

    // index_select
    assert_err(a.index_select(1, &good), "index_select", &["1-D", "[1, 2]"]);
    assert_err(
        a.index_select(2, &i(vec![0], &[1])),
        "index_select",
        &["axis 2"],
    );
    assert_err(
        a.index_select(0, &i(vec![0, 2], &[2])),
        "index_select",
        &["index 2", "axis 0", "size 2"],
    );
    assert_err(
        a.index_select(0, &NDArray::zeros(&[1], DType::F64).unwrap()),
        "index_select",
        &["f64"],
    );
    assert_err(
        NDArray::scalar(1.0f32).index_select(0, &i(vec![0], &[1])),
        "index_select",
        &["axis 0"],
    );

    // take_along_axis
    assert_err(
        a.take_along_axis(&i(vec![0], &[1]), 0),
        "take_along_axis",
        &["[2, 3]", "[1]"],
    );
    assert_err(
        a.take_along_axis(&i(vec![0; 4], &[1, 4]), 0),
        "take_along_axis",
        &["broadcast"],
    );
    assert!(a.take_along_axis(&good, -1).is_ok());
    assert_err(
        a.take_along_axis(&i(vec![0, 3], &[1, 2]), 1),
        "take_along_axis",
        &["index 3"],
    );
    assert_err(a.take_along_axis(&good, 2), "take_along_axis", &["axis 2"]);
    assert_err(
        a.take_along_axis(&fi, 1),
        "take_along_axis",
        &["integer dtype"],
    );
}
