//! Large arrays (more than 65536 elements), which take the multi-threaded row split, the tiled
//! (and, for 4-byte words on AVX-512 machines, SIMD) transpose and the reversed-row paths of the
//! copy kernels: permuted (64, 128, 96) compacts for every dtype, all 6 permutations of a 3-D
//! array, odd-sized 2-D transposes, reversed-and-transposed views, stepped slices, setitem into
//! large permuted destinations (from contiguous, transposed, reversed and broadcast sources, and
//! from an overlapping source in the same buffer), fills and astype of large permuted views.
//! Reference: naive gathers / mirror writes at naive offsets. A self-overlapping destination
//! (`as_strided` [300, 300] strides [1, 1]) is only required not to panic and to leave at every
//! written location one of the values written there.

use quill::{s, DType, Element, NDArray};
use quill_test_support::*;
use std::collections::HashMap;

/// `n` values of `T`: the element ids where the dtype holds them exactly, pseudo-random otherwise.
fn data<T: Element>(seed: u64, n: usize) -> Vec<T> {
    match T::DTYPE {
        DType::F32 | DType::F64 | DType::I32 | DType::I64 => (0..n).map(from_id::<T>).collect(),
        _ => random_values(&mut Prng::new(seed), n),
    }
}

fn check_compact<T: Element>(base_vals: &[T], view: &NDArray, ctx: &str) {
    let want = gather(base_vals, &offsets_of(view));
    let c = view.compact().unwrap();
    assert!(c.is_contiguous(), "{ctx}");
    assert_eq!(c.shape(), view.shape(), "{ctx}");
    assert_same(&c.to_vec::<T>().unwrap(), &want, ctx);
}

fn permuted_compact<T: Element>() {
    let shape = [64usize, 128, 96];
    let vals = data::<T>(7, numel(&shape));
    let a = NDArray::from_vec(vals.clone(), &shape).unwrap();
    for perm in [[2isize, 0, 1], [1, 2, 0], [2, 1, 0]] {
        let v = a.permute(&perm).unwrap();
        check_compact(&vals, &v, &format!("{} permute {perm:?}", T::DTYPE));
    }
}

#[test]
fn permuted_compact_f32() {
    permuted_compact::<f32>();
}
#[test]
fn permuted_compact_i32() {
    permuted_compact::<i32>();
}
#[test]
fn permuted_compact_f64() {
    permuted_compact::<f64>();
}
#[test]
fn permuted_compact_u8() {
    permuted_compact::<u8>();
}
#[test]
fn permuted_compact_bool() {
    permuted_compact::<bool>();
}
#[test]
fn permuted_compact_f16_bf16_i64() {
    permuted_compact::<quill::f16>();
    permuted_compact::<quill::bf16>();
    permuted_compact::<i64>();
}

#[test]
fn all_six_permutations_of_a_3d_array() {
    let shape = [48usize, 72, 40];
    let vals = data::<f32>(1, numel(&shape));
    let a = NDArray::from_vec(vals.clone(), &shape).unwrap();
    let vals_u16 = data::<quill::f16>(2, numel(&shape));
    let h = NDArray::from_vec(vals_u16.clone(), &shape).unwrap();
    for perm in [
        [0isize, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ] {
        let v = a.permute(&perm).unwrap();
        check_compact(&vals, &v, &format!("f32 permute {perm:?}"));
        assert_eq!(
            v.compact().unwrap().shares_storage_with(&a),
            perm == [0, 1, 2]
        );
        let v = h.permute(&perm).unwrap();
        check_compact(&vals_u16, &v, &format!("f16 permute {perm:?}"));
    }
}

#[test]
fn odd_sized_2d_transposes() {
    for (r, c) in [(1000usize, 77usize), (33, 4099), (257, 515), (4099, 17)] {
        let vals = data::<f32>(3, r * c);
        let a = NDArray::from_vec(vals.clone(), &[r, c]).unwrap();
        let t = a.transpose(0, 1).unwrap();
        check_compact(&vals, &t, &format!("f32 {r}x{c}.T"));
        let vals64 = data::<f64>(3, r * c);
        let b = NDArray::from_vec(vals64.clone(), &[r, c]).unwrap();
        check_compact(
            &vals64,
            &b.transpose(0, 1).unwrap(),
            &format!("f64 {r}x{c}.T"),
        );
        let vals8 = data::<u8>(4, r * c);
        let u = NDArray::from_vec(vals8.clone(), &[r, c]).unwrap();
        check_compact(
            &vals8,
            &u.transpose(0, 1).unwrap(),
            &format!("u8 {r}x{c}.T"),
        );
    }
}

#[test]
fn reversed_and_transposed_views() {
    let (r, c) = (517usize, 301usize);
    let vals = data::<i32>(5, r * c);
    let a = NDArray::from_vec(vals.clone(), &[r, c]).unwrap();
    let views = [
        a.flip(&[0]).unwrap().transpose(0, 1).unwrap(),
        a.flip(&[1]).unwrap().transpose(0, 1).unwrap(),
        a.flip(&[0, 1]).unwrap().transpose(0, 1).unwrap(),
        a.flip(&[0, 1]).unwrap(),
        a.flip(&[1]).unwrap(),
        a.slice(&s![..;-1, ..;-3]).unwrap().transpose(0, 1).unwrap(),
    ];
    for (k, v) in views.iter().enumerate() {
        check_compact(&vals, v, &format!("view {k} strides {:?}", v.strides()));
    }
}

#[test]
fn stepped_slices_of_a_large_array() {
    let shape = [200usize, 300, 5];
    let vals = data::<f32>(6, numel(&shape));
    let a = NDArray::from_vec(vals.clone(), &shape).unwrap();
    let cases: [&[quill::SliceArg]; 5] = [
        &s![..;2, 1..;3],
        &s![3..197;-2, ..;-1, 1..4],
        &s![.., 10..290, 2],
        &s![..;-1, .., ..;2],
        &s![5..;7, ..;-5, ..],
    ];
    for args in cases {
        let v = a.slice(args).unwrap();
        check_compact(&vals, &v, &format!("slice {args:?}"));
    }
    // A 1-D stepped slice and a big 1-D reverse.
    let b = NDArray::from_vec(vals.clone(), &[numel(&shape)]).unwrap();
    check_compact(&vals, &b.slice(&s![1..;3]).unwrap(), "1-D step 3");
    check_compact(&vals, &b.slice(&s![..;-1]).unwrap(), "1-D reverse");
}

fn large_setitem<T: Element>() {
    let shape = [64usize, 128, 96];
    let n = numel(&shape);
    let init = data::<T>(11, n);
    let base = NDArray::from_vec(init.clone(), &shape).unwrap();
    let dst = base.permute(&[2, 0, 1]).unwrap(); // [96, 64, 128]
    let dshape = dst.shape().to_vec();
    let dst_offs = offsets_of(&dst);
    let mut mirror = init.clone();
    // A contiguous source.
    let src_vals: Vec<T> = data::<T>(12, n).iter().rev().copied().collect();
    let src = NDArray::from_vec(src_vals.clone(), &dshape).unwrap();
    dst.assign(&src).unwrap();
    for (&o, &v) in dst_offs.iter().zip(&src_vals) {
        mirror[o] = v;
    }
    assert_same(&base.to_vec::<T>().unwrap(), &mirror, "contiguous source");
    // A transposed and reversed source.
    let s2 = NDArray::from_vec(src_vals.clone(), &[128, 64, 96])
        .unwrap()
        .permute(&[2, 1, 0])
        .unwrap()
        .flip(&[0])
        .unwrap();
    let s2_vals = gather(&src_vals, &offsets_of(&s2));
    dst.assign(&s2).unwrap();
    for (&o, &v) in dst_offs.iter().zip(&s2_vals) {
        mirror[o] = v;
    }
    assert_same(&base.to_vec::<T>().unwrap(), &mirror, "permuted source");
    // A broadcast row, into a stepped, reversed destination.
    let row_vals = data::<T>(13, 128);
    let row = NDArray::from_vec(row_vals.clone(), &[128]).unwrap();
    let d3 = dst.slice(&s![..;-1, 1..;2]).unwrap();
    d3.assign(&row).unwrap();
    for (k, o) in offsets_of(&d3).into_iter().enumerate() {
        mirror[o] = row_vals[k % 128];
    }
    assert_same(&base.to_vec::<T>().unwrap(), &mirror, "broadcast source");
}

#[test]
fn setitem_into_large_permuted_destinations() {
    large_setitem::<f32>();
    large_setitem::<f64>();
    large_setitem::<u8>();
    large_setitem::<quill::bf16>();
}

#[test]
fn large_overlapping_assignments_read_the_source_first() {
    let n = 300usize;
    let vals = data::<f32>(0, n * n);
    // a.T = a
    let a = NDArray::from_vec(vals.clone(), &[n, n]).unwrap();
    a.transpose(0, 1).unwrap().assign(&a).unwrap();
    let want: Vec<f32> = (0..n * n).map(|k| vals[(k % n) * n + k / n]).collect();
    assert_same(&a.to_vec::<f32>().unwrap(), &want, "a.T = a");
    // a[1:] = a[:-1] (rows), and a[:, ::-1] = a
    let a = NDArray::from_vec(vals.clone(), &[n, n]).unwrap();
    a.slice(&s![1..])
        .unwrap()
        .assign(&a.slice(&s![..-1]).unwrap())
        .unwrap();
    let want: Vec<f32> = (0..n * n)
        .map(|k| if k < n { vals[k] } else { vals[k - n] })
        .collect();
    assert_same(&a.to_vec::<f32>().unwrap(), &want, "a[1:] = a[:-1]");
    let a = NDArray::from_vec(vals.clone(), &[n, n]).unwrap();
    a.slice(&s![.., ..;-1]).unwrap().assign(&a).unwrap();
    let want: Vec<f32> = (0..n * n)
        .map(|k| vals[(k / n) * n + (n - 1 - k % n)])
        .collect();
    assert_same(&a.to_vec::<f32>().unwrap(), &want, "a[:, ::-1] = a");
}

/// Writes `src` into a self-overlapping destination and checks that every written location
/// holds one of the values written to it and that nothing else changed.
fn check_overlapping_destination<T: Element>(
    buf_len: usize,
    shape: &[usize],
    strides: &[isize],
    offset: usize,
    src: Option<&NDArray>,
    ctx: &str,
) {
    let init: Vec<T> = data::<T>(21, buf_len);
    let base = NDArray::from_vec(init.clone(), &[buf_len]).unwrap();
    let dst = base.as_strided(shape, strides, offset).unwrap();
    let dst_offs = offsets_of(&dst);
    assert!(!all_distinct(&dst_offs), "{ctx}: destination must overlap");
    let written: Vec<T> = match src {
        Some(src) => {
            let src_vals = src.to_vec::<T>().unwrap();
            dst.assign(src).unwrap();
            src_vals
        }
        None => {
            let v = T::from_scalar(quill::Scalar::I(3));
            dst.assign_scalar(v.to_scalar()).unwrap();
            vec![v; dst_offs.len()]
        }
    };
    let mut allowed: HashMap<usize, Vec<T>> = HashMap::new();
    for (&o, &v) in dst_offs.iter().zip(&written) {
        allowed.entry(o).or_default().push(v);
    }
    let got = base.to_vec::<T>().unwrap();
    for (o, &g) in got.iter().enumerate() {
        match allowed.get(&o) {
            Some(vs) => assert!(
                vs.iter().any(|&v| same(v, g)),
                "{ctx}: offset {o} holds {g:?}, not one of the values written there"
            ),
            None => assert!(
                same(g, init[o]),
                "{ctx}: offset {o} was not written but changed"
            ),
        }
    }
}

fn overlapping_destinations<T: Element>() {
    let n = 300usize;
    let vals = data::<T>(22, n * n);
    let contiguous = NDArray::from_vec(vals.clone(), &[n, n]).unwrap();
    let transposed = contiguous.transpose(0, 1).unwrap();
    let reversed = contiguous.flip(&[1]).unwrap();
    let row = contiguous.slice(&s![7]).unwrap();
    let d = T::DTYPE;
    for (name, src) in [
        ("contiguous", &contiguous),
        ("transposed", &transposed),
        ("reversed", &reversed),
        ("broadcast row", &row),
    ] {
        let src = src.broadcast_to(&[n, n]).unwrap();
        let ctx = format!("{d} [300,300] strides [1,1] <- {name}");
        check_overlapping_destination::<T>(2 * n - 1, &[n, n], &[1, 1], 0, Some(&src), &ctx);
        let ctx = format!("{d} [300,300] strides [2,-1] <- {name}");
        check_overlapping_destination::<T>(3 * n, &[n, n], &[2, -1], n, Some(&src), &ctx);
    }
    check_overlapping_destination::<T>(2 * n - 1, &[n, n], &[1, 1], 0, None, "fill");
    check_overlapping_destination::<T>(
        18 * n,
        &[n, n],
        &[17, 1],
        0,
        Some(&transposed),
        "rows overlapping by 283",
    );
}

#[test]
fn self_overlapping_destinations_do_not_panic() {
    overlapping_destinations::<f32>();
    overlapping_destinations::<i32>();
    overlapping_destinations::<f64>();
    overlapping_destinations::<u8>();
}

#[test]
fn fill_of_large_permuted_and_stepped_views() {
    let shape = [64usize, 128, 96];
    let n = numel(&shape);
    for d in [DType::F32, DType::U8, DType::F64, DType::Bool] {
        quill_test_support::with_dtype!(d, T => {
            let init = data::<T>(31, n);
            let base = NDArray::from_vec(init.clone(), &shape).unwrap();
            let mut mirror = init.clone();
            let views = [
                base.permute(&[2, 0, 1]).unwrap(),
                base.permute(&[1, 2, 0]).unwrap().slice(&s![..;-3, 1.., ..;2]).unwrap(),
                base.flip(&[0, 2]).unwrap(),
            ];
            for (k, v) in views.iter().enumerate() {
                let value = T::from_scalar(quill::Scalar::I(k as i128 + 1));
                v.assign_scalar(value.to_scalar()).unwrap();
                for o in offsets_of(v) {
                    mirror[o] = value;
                }
                assert_same(&base.to_vec::<T>().unwrap(), &mirror, &format!("{d} fill {k}"));
            }
            let f = NDArray::full(&shape, 2.0, d).unwrap();
            assert_same(
                &f.to_vec::<T>().unwrap(),
                &vec![T::from_scalar(quill::Scalar::F(2.0)); n],
                &format!("{d} full"),
            );
        });
    }
}

#[test]
fn astype_of_large_permuted_views() {
    let shape = [64usize, 128, 96];
    let vals = data::<i32>(41, numel(&shape));
    let a = NDArray::from_vec(vals.clone(), &shape).unwrap();
    let v = a.permute(&[2, 0, 1]).unwrap().flip(&[1]).unwrap();
    let src = gather(&vals, &offsets_of(&v));
    let f = v.astype(DType::F32).unwrap();
    let want: Vec<f32> = src.iter().map(|x| x.cast::<f32>()).collect();
    assert_same(&f.to_vec::<f32>().unwrap(), &want, "i32 -> f32");
    let b = v.astype(DType::U8).unwrap();
    let want: Vec<u8> = src.iter().map(|x| x.cast::<u8>()).collect();
    assert_same(&b.to_vec::<u8>().unwrap(), &want, "i32 -> u8");
    let h = v.astype(DType::BF16).unwrap();
    let want: Vec<quill::bf16> = src.iter().map(|x| x.cast::<quill::bf16>()).collect();
    assert_same(&h.to_vec::<quill::bf16>().unwrap(), &want, "i32 -> bf16");
}

#[test]
fn interleaved_non_overlapping_destination() {
    // Offsets 401 i + 300 j (i < 300, j < 400) are distinct (401 and 300 are coprime) although
    // the row strides do not nest: no row split is safe, and the result must still be exact.
    let (n, m) = (300usize, 400usize);
    let (sa, sb) = (401isize, 300isize);
    let len = 401 * (n - 1) + 300 * (m - 1) + 1;
    let dst_offs = naive_offsets(&[n, m], &[sa, sb], 0);
    assert!(all_distinct(&dst_offs));
    let init = data::<f32>(51, len);
    let base = NDArray::from_vec(init.clone(), &[len]).unwrap();
    let dst = base.as_strided(&[n, m], &[sa, sb], 0).unwrap();
    let src_vals = data::<f32>(52, n * m);
    let src = NDArray::from_vec(src_vals.clone(), &[m, n])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let expanded = gather(&src_vals, &offsets_of(&src));
    let mut mirror = init.clone();
    for (&o, &v) in dst_offs.iter().zip(&expanded) {
        mirror[o] = v;
    }
    dst.assign(&src).unwrap();
    assert_same(
        &base.to_vec::<f32>().unwrap(),
        &mirror,
        "interleaved assign",
    );
    assert_same(&dst.to_vec::<f32>().unwrap(), &expanded, "interleaved read");
    dst.flip(&[0]).unwrap().assign_scalar(-1.0).unwrap();
    for &o in &dst_offs {
        mirror[o] = -1.0;
    }
    assert_same(&base.to_vec::<f32>().unwrap(), &mirror, "interleaved fill");
}
