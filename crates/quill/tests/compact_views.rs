//! `compact()`, `deep_copy()`, `to_vec()` and `astype()` on random view chains of rank 0 to 8:
//! size-0 and size-1 dims, permute / transpose, stepped and negative-step slices, integer
//! indices, NewAxis, Ellipsis, broadcast (stride 0), flip, reshape (view or copy), squeeze /
//! unsqueeze and `as_strided` with an offset (overlapping strides included). The reference is
//! the table oracle of quill-test-support (every view op done naively on the list of element ids),
//! which also checks each result layout through naive offsets. Also checked: `compact()` shares
//! storage exactly when the view is contiguous (contiguity itself checked against the offsets)
//! and always returns a contiguous array.

use proptest::prelude::*;
use quill::{s, DType, Element, NDArray, SliceArg};
use quill_test_support::*;

/// Checks every read path of the chain's array against the oracle.
fn check_reads<T: Element>(ch: &Chain) {
    let ctx = ch.describe();
    let arr = &ch.arr;
    assert_eq!(arr.shape(), ch.table.shape.as_slice(), "{ctx}");
    assert_eq!(arr.numel(), ch.table.vals.len(), "{ctx}");
    assert_eq!(arr.ndim(), ch.table.shape.len(), "{ctx}");
    assert!(arr.ndim() <= MAX_RANK, "{ctx}");
    // The layout itself: its naive offsets into the current buffer give the oracle's ids.
    assert_eq!(ch.ids_through_layout(), ch.table.vals, "layout: {ctx}");
    let offs = offsets_of(arr);
    assert_eq!(
        arr.is_contiguous(),
        naive_is_contiguous(&offs),
        "is_contiguous: {ctx}"
    );

    let want: Vec<T> = ch.table.vals.iter().map(|&i| from_id::<T>(i)).collect();
    let c = arr.compact().unwrap();
    assert!(c.is_contiguous(), "compact result not contiguous: {ctx}");
    assert_eq!(c.shape(), arr.shape(), "{ctx}");
    assert_eq!(c.dtype(), arr.dtype(), "{ctx}");
    // A read-only view (of a broadcast) is copied even when contiguous: compact() is writable.
    assert_eq!(
        c.shares_storage_with(arr),
        arr.is_contiguous() && !arr.is_readonly(),
        "compact shares storage iff contiguous and writable: {ctx}"
    );
    assert!(!c.is_readonly(), "{ctx}");
    assert_same(&c.to_vec::<T>().unwrap(), &want, &format!("compact: {ctx}"));
    assert_same(
        &arr.to_vec::<T>().unwrap(),
        &want,
        &format!("to_vec: {ctx}"),
    );

    let d = arr.deep_copy().unwrap();
    assert!(!d.shares_storage_with(arr), "{ctx}");
    assert!(d.is_contiguous() && d.offset() == 0, "{ctx}");
    assert_eq!(d.buffer_len(), arr.numel(), "{ctx}");
    assert_same(
        &d.to_vec::<T>().unwrap(),
        &want,
        &format!("deep_copy: {ctx}"),
    );

    // astype through the strided map, per element against `Element::cast`.
    let f = arr.astype(DType::F64).unwrap();
    assert!(f.is_contiguous() && !f.shares_storage_with(arr), "{ctx}");
    let want_f: Vec<f64> = want.iter().map(|v| v.cast::<f64>()).collect();
    assert_same(
        &f.to_vec::<f64>().unwrap(),
        &want_f,
        &format!("astype: {ctx}"),
    );
}

fn run_chain<T: Element>(seed: u64, ops: usize) {
    let mut rng = Prng::new(seed);
    let shape = random_shape(&mut rng, 5, 7, 2000);
    let vals: Vec<T> = (0..numel(&shape)).map(from_id::<T>).collect();
    let base = NDArray::from_vec(vals, &shape).unwrap();
    let mut ch = Chain::new(base, false);
    check_reads::<T>(&ch);
    for _ in 0..ops {
        ch.step(&mut rng);
        check_reads::<T>(&ch);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn compact_matches_oracle_on_random_view_chains(
        seed in any::<u64>(),
        ops in 0usize..7,
        dt in 0usize..4,
    ) {
        match dt {
            0 => run_chain::<i64>(seed, ops),
            1 => run_chain::<f32>(seed, ops),
            2 => run_chain::<f64>(seed, ops),
            _ => run_chain::<i32>(seed, ops),
        }
    }

    #[test]
    fn compact_matches_oracle_on_strided_layouts_with_offsets(
        seed in any::<u64>(),
    ) {
        // A random non-overlapping layout (permuted, gapped, reversed, offset) made with
        // as_strided, holding known values.
        let mut rng = Prng::new(seed);
        let shape = random_shape(&mut rng, MAX_RANK, 4, 3000);
        let vals: Vec<i32> = (0..numel(&shape) as i32).map(|i| i * 7 - 3).collect();
        let a = strided_from(&mut rng, &vals, &shape, -1);
        let offs = offsets_of(&a);
        prop_assert_eq!(a.is_contiguous(), naive_is_contiguous(&offs));
        let c = a.compact().unwrap();
        prop_assert!(c.is_contiguous());
        prop_assert_eq!(c.shares_storage_with(&a), a.is_contiguous());
        prop_assert_eq!(c.to_vec::<i32>().unwrap(), vals.clone());
        prop_assert_eq!(a.to_vec::<i32>().unwrap(), vals);
    }
}

#[test]
fn compact_of_contiguous_views_is_free_and_of_others_is_a_copy() {
    let a = iota_i64(&[4, 5, 6]);
    // Contiguous views: the whole array, a leading slice, an index, a reshape, NewAxis.
    let contiguous = [
        a.clone(),
        a.slice(&s![1..3]).unwrap(),
        a.slice(&s![2]).unwrap(),
        a.slice(&s![2, 3]).unwrap(),
        a.slice(&s![2, 3, 4]).unwrap(),
        a.reshape(&[20, -1]).unwrap(),
        a.slice(&s![quill::NewAxis, 1..2, .., quill::NewAxis])
            .unwrap(),
        a.slice(&s![0..0]).unwrap(),
        a.slice(&s![1..2, 1..2, ..]).unwrap(),
    ];
    for v in &contiguous {
        let offs = offsets_of(v);
        assert!(naive_is_contiguous(&offs), "{:?}", v.strides());
        assert!(v.is_contiguous(), "{:?} {:?}", v.shape(), v.strides());
        let c = v.compact().unwrap();
        assert!(c.shares_storage_with(&a));
        assert_eq!(c.offset(), v.offset());
        let want: Vec<i64> = offs.iter().map(|&o| o as i64).collect();
        assert_eq!(c.to_vec::<i64>().unwrap(), want);
    }
    let others = [
        a.permute(&[2, 0, 1]).unwrap(),
        a.slice(&s![.., ..;2]).unwrap(),
        a.slice(&s![..;-1]).unwrap(),
        a.slice(&s![.., 1..3]).unwrap(),
        a.slice(&s![0, .., 0]).unwrap(),
        a.flip(&[-1]).unwrap(),
        a.slice(&s![0, 0, ..1])
            .unwrap()
            .broadcast_to(&[3, 2])
            .unwrap(),
    ];
    for v in &others {
        let offs = offsets_of(v);
        assert!(!naive_is_contiguous(&offs));
        assert!(!v.is_contiguous(), "{:?} {:?}", v.shape(), v.strides());
        let c = v.compact().unwrap();
        assert!(!c.shares_storage_with(&a));
        assert!(c.is_contiguous());
        let want: Vec<i64> = offs.iter().map(|&o| o as i64).collect();
        assert_eq!(c.to_vec::<i64>().unwrap(), want);
    }
}

#[test]
fn rank_zero_and_single_element_views() {
    let a = iota_i64(&[3, 4]);
    let e = a.slice(&s![-1, -2]).unwrap();
    assert_eq!(e.shape(), &[] as &[usize]);
    assert_eq!(e.to_vec::<i64>().unwrap(), vec![10]);
    assert_eq!(e.item::<i64>().unwrap(), 10);
    assert!(e.compact().unwrap().shares_storage_with(&a));
    // A size-1 view at an offset with a nonsense stride on its size-1 dim.
    let v = a.as_strided(&[1, 1], &[-5, 99], 7).unwrap();
    assert_eq!(v.to_vec::<i64>().unwrap(), vec![7]);
    assert!(v.is_contiguous());
    let s = NDArray::scalar(2.5f32);
    assert_eq!(s.ndim(), 0);
    assert_eq!(s.compact().unwrap().to_vec::<f32>().unwrap(), vec![2.5]);
}

#[test]
fn size_zero_views_compact_to_empty() {
    let a = iota_i64(&[3, 4]);
    for v in [
        a.slice(&[SliceArg::range(Some(2), Some(1), 1)]).unwrap(),
        a.slice(&s![.., 4..]).unwrap(),
        a.slice(&s![..;-1, 0..0;-2]).unwrap(),
        a.as_strided(&[0, 5], &[100, -100], 12).unwrap(),
        iota_i64(&[0, 3]).permute(&[1, 0]).unwrap(),
    ] {
        assert_eq!(v.numel(), 0);
        let c = v.compact().unwrap();
        assert!(c.is_contiguous());
        assert_eq!(c.shape(), v.shape());
        assert!(c.to_vec::<i64>().unwrap().is_empty());
        assert!(v
            .astype(DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .is_empty());
    }
}

#[test]
fn overlapping_as_strided_reads_repeat_elements() {
    // Sliding windows: shape [5, 3] with strides [1, 1] over 0..7.
    let a = iota_i64(&[7]);
    let w = a.as_strided(&[5, 3], &[1, 1], 0).unwrap();
    let want: Vec<i64> = (0..5).flat_map(|i| i..i + 3).collect();
    assert_eq!(w.to_vec::<i64>().unwrap(), want);
    // Reversed windows with an offset.
    let r = a.as_strided(&[3, 3], &[-2, 1], 4).unwrap();
    let want: Vec<i64> = naive_offsets(&[3, 3], &[-2, 1], 4)
        .iter()
        .map(|&o| o as i64)
        .collect();
    assert_eq!(r.to_vec::<i64>().unwrap(), want);
    // Out-of-range layouts are rejected, not read.
    assert!(a.as_strided(&[3, 3], &[-2, 1], 3).is_err());
    assert!(a.as_strided(&[2, 4], &[4, 1], 0).is_err());
}

#[test]
fn to_vec_with_the_wrong_type_errs() {
    let a = iota_i64(&[2, 3]);
    let e = a.to_vec::<f32>().unwrap_err();
    assert!(matches!(e, quill::Error::DTypeMismatch { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("to_vec") && msg.contains("i64") && msg.contains("f32"),
        "{msg}"
    );
}

/// A medium array (up to ~20k elements, so the kernels' tiled transpose and reversed-row paths
/// run) viewed through a random permutation, random flips and random steps.
fn run_medium<T: Element>(seed: u64) {
    let mut rng = Prng::new(seed);
    let rank = rng.int(2, 4) as usize;
    let shape: Vec<usize> = loop {
        let s: Vec<usize> = (0..rank).map(|_| rng.int(1, 40) as usize).collect();
        if numel(&s) <= 20_000 {
            break s;
        }
    };
    let n = numel(&shape);
    let base = NDArray::from_vec((0..n).map(from_id::<T>).collect::<Vec<T>>(), &shape).unwrap();
    let perm = rng.permutation(rank);
    let mut v = base
        .permute(&perm.iter().map(|&a| a as isize).collect::<Vec<_>>())
        .unwrap();
    let mut t = Table::contiguous(&shape).permute(&perm);
    let args: Vec<SliceArg> = v
        .shape()
        .iter()
        .map(|_| {
            let step = [1, 1, 1, -1, -1, 2, -2, 3][rng.below(8)];
            SliceArg::Range {
                start: None,
                stop: None,
                step,
            }
        })
        .collect();
    v = v.slice(&args).unwrap();
    t = t.slice(&args).expect("valid slice args");
    let want: Vec<T> = t.vals.iter().map(|&i| from_id::<T>(i)).collect();
    let ctx = format!("medium {shape:?} perm {perm:?} args {args:?}");
    assert_eq!(
        gather(&(0..n).collect::<Vec<_>>(), &offsets_of(&v)),
        t.vals,
        "{ctx}"
    );
    assert_same(&v.compact().unwrap().to_vec::<T>().unwrap(), &want, &ctx);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn compact_of_medium_permuted_flipped_stepped_arrays(seed in any::<u64>(), dt in 0usize..5) {
        match dt {
            0 => run_medium::<f32>(seed),
            1 => run_medium::<i64>(seed),
            2 => run_medium::<i32>(seed),
            3 => run_medium::<quill::f16>(seed),
            _ => run_medium::<u8>(seed),
        }
    }
}
