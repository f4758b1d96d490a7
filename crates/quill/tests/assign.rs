//! Assignment into views: `assign` (source broadcast to the destination and cast when the dtypes
//! differ), `assign_scalar`, `set(&s![..], &src)` and `set_scalar`. The reference applies the same
//! writes to a plain `Vec` mirror of the base buffer at the destination's naive offsets. Covered:
//! random writable destination views (permuted, stepped, negative strides, integer indices,
//! NewAxis, `view` reshapes, `as_strided` at an offset), random broadcastable sources with random
//! layouts, visibility of the writes through other views of the buffer, and sources that overlap
//! the destination in the same buffer (NumPy semantics: as if the source were read into a
//! temporary first). Errors: writing into a broadcast view (ReadOnlyView), shape mismatch naming
//! both shapes, bad indices; a failed write leaves the buffer untouched.

use proptest::prelude::*;
use quill::{s, DType, Element, Error, NDArray, NewAxis, Scalar, SliceArg};
use quill_test_support::*;

/// A shape that broadcasts to `dst`: a suffix of it with some dims set to 1, maybe with extra
/// leading 1s removed or (rarely) the full rank kept.
fn broadcastable_shape(rng: &mut Prng, dst: &[usize]) -> Vec<usize> {
    let keep = if rng.chance(0.5) {
        dst.len()
    } else {
        rng.below(dst.len() + 1)
    };
    dst[dst.len() - keep..]
        .iter()
        .map(|&d| if rng.chance(0.3) { 1 } else { d })
        .collect()
}

/// For each element of `dst_shape` in C order, the C-order index of the source element that
/// broadcasting maps onto it.
fn broadcast_index(src_shape: &[usize], dst_shape: &[usize]) -> Vec<usize> {
    let mut t = Table::contiguous(src_shape);
    t = t.broadcast_to(dst_shape).expect("broadcastable");
    t.vals
}

/// NumPy assignment on a mirror: read every source value first, then write.
fn mirror_assign<T: Copy>(mirror: &mut [T], dst_offs: &[usize], src_vals: &[T]) {
    assert_eq!(dst_offs.len(), src_vals.len());
    for (&o, &v) in dst_offs.iter().zip(src_vals) {
        mirror[o] = v;
    }
}

/// Views of the base buffer through which every write must be visible.
fn check_all_views<T: Element>(base: &NDArray, mirror: &[T], ctx: &str) {
    assert_same(
        &base.to_vec::<T>().unwrap(),
        mirror,
        &format!("base: {ctx}"),
    );
    let nd = base.ndim() as isize;
    let others = [
        base.flip(&(0..nd).collect::<Vec<_>>()).unwrap(),
        base.permute(&(0..nd).rev().collect::<Vec<_>>()).unwrap(),
        base.reshape(&[-1]).unwrap(),
    ];
    for v in &others {
        assert!(v.shares_storage_with(base));
        let want = gather(mirror, &offsets_of(v));
        assert_same(
            &v.to_vec::<T>().unwrap(),
            &want,
            &format!("other view: {ctx}"),
        );
    }
}

/// A random writable view chain over a base buffer holding `init`.
fn writable_view<T: Element>(
    rng: &mut Prng,
    init: &[T],
    shape: &[usize],
    ops: usize,
) -> (NDArray, Chain) {
    let base = NDArray::from_vec(init.to_vec(), shape).unwrap();
    let mut ch = Chain::new(base.clone(), true);
    for _ in 0..ops {
        ch.step(rng);
    }
    assert!(ch.arr.shares_storage_with(&base));
    assert!(all_distinct(&offsets_of(&ch.arr)), "{}", ch.describe());
    (base, ch)
}

fn run_assign_from_other_buffer<T: Element>(seed: u64, ops: usize) {
    let mut rng = Prng::new(seed);
    let shape = random_shape(&mut rng, 5, 8, 2000);
    let init: Vec<T> = random_values(&mut rng, numel(&shape));
    let (base, ch) = writable_view(&mut rng, &init, &shape, ops);
    let dst = &ch.arr;
    let dst_offs = offsets_of(dst);
    let src_shape = broadcastable_shape(&mut rng, dst.shape());
    let src_vals: Vec<T> = random_values(&mut rng, numel(&src_shape));
    let src = strided_from(&mut rng, &src_vals, &src_shape, T::zero());
    let ctx = format!(
        "{} <- src {:?} {:?}",
        ch.describe(),
        src_shape,
        src.strides()
    );

    let mut mirror = init.clone();
    let expanded: Vec<T> = broadcast_index(&src_shape, dst.shape())
        .iter()
        .map(|&i| src_vals[i])
        .collect();
    mirror_assign(&mut mirror, &dst_offs, &expanded);

    dst.assign(&src).unwrap();
    check_all_views(&base, &mirror, &ctx);
    assert_same(&dst.to_vec::<T>().unwrap(), &expanded, &ctx);
    // The source is untouched.
    assert_same(&src.to_vec::<T>().unwrap(), &src_vals, &ctx);
}

fn run_assign_with_cast<S: Element, D: Element>(seed: u64, ops: usize) {
    let mut rng = Prng::new(seed);
    let shape = random_shape(&mut rng, 3, 6, 500);
    let init: Vec<D> = random_values(&mut rng, numel(&shape));
    let (base, ch) = writable_view(&mut rng, &init, &shape, ops);
    let dst = &ch.arr;
    let src_shape = broadcastable_shape(&mut rng, dst.shape());
    let src_vals: Vec<S> = (0..numel(&src_shape))
        .map(|_| {
            S::from_scalar(Scalar::F(
                rng.int(-600, 600) as f64 * 0.75 + if rng.chance(0.1) { 1e10 } else { 0.0 },
            ))
        })
        .collect();
    let src = strided_from(&mut rng, &src_vals, &src_shape, S::zero());
    let expanded: Vec<D> = broadcast_index(&src_shape, dst.shape())
        .iter()
        .map(|&i| src_vals[i].cast::<D>())
        .collect();
    let mut mirror = init.clone();
    mirror_assign(&mut mirror, &offsets_of(dst), &expanded);
    dst.assign(&src).unwrap();
    assert_eq!(dst.dtype(), D::DTYPE);
    check_all_views(&base, &mirror, &ch.describe());
}

/// A source view in the destination's own buffer, broadcastable to the destination: a random
/// `as_strided` (any strides, overlapping or zero), the destination flipped, the destination
/// itself, or (when two dims match) the destination transposed.
fn overlapping_source(rng: &mut Prng, base: &NDArray, dst: &NDArray) -> NDArray {
    let nd = dst.ndim();
    let pairs: Vec<(usize, usize)> = (0..nd)
        .flat_map(|a| (a + 1..nd).map(move |b| (a, b)))
        .filter(|&(a, b)| dst.shape()[a] == dst.shape()[b])
        .collect();
    match rng.below(5) {
        0 => dst.clone(),
        1 => {
            let axes: Vec<isize> = (0..nd as isize).filter(|_| rng.chance(0.6)).collect();
            dst.flip(&axes).unwrap()
        }
        2 if !pairs.is_empty() => {
            let (a, b) = pairs[rng.below(pairs.len())];
            dst.transpose(a as isize, b as isize).unwrap()
        }
        _ => {
            let len = base.buffer_len();
            for _ in 0..20 {
                let shape = broadcastable_shape(rng, dst.shape());
                let st: Vec<isize> = shape.iter().map(|_| rng.int(-4, 4)).collect();
                let (mut lo, mut hi) = (0isize, 0isize);
                if numel(&shape) > 0 {
                    for (&d, &s) in shape.iter().zip(&st) {
                        let e = (d as isize - 1) * s;
                        if e < 0 {
                            lo += e
                        } else {
                            hi += e
                        }
                    }
                }
                if hi - lo < len as isize {
                    let off = -lo + rng.int(0, len as isize - 1 - (hi - lo));
                    return base.as_strided(&shape, &st, off as usize).unwrap();
                }
            }
            dst.clone()
        }
    }
}

fn run_overlapping_assign(seed: u64, ops: usize) {
    let mut rng = Prng::new(seed);
    let shape = random_shape(&mut rng, 5, 8, 2000);
    let init: Vec<f64> = (0..numel(&shape)).map(|i| i as f64 + 0.5).collect();
    let (base, ch) = writable_view(&mut rng, &init, &shape, ops);
    let dst = &ch.arr;
    let src = overlapping_source(&mut rng, &base, dst);
    assert!(src.shares_storage_with(&base));
    let ctx = format!(
        "{} <- src {:?} {:?} @{}",
        ch.describe(),
        src.shape(),
        src.strides(),
        src.offset()
    );
    let mut mirror = init.clone();
    // Read the whole source from the buffer before any write.
    let src_now = gather(&mirror, &offsets_of(&src));
    let expanded: Vec<f64> = broadcast_index(src.shape(), dst.shape())
        .iter()
        .map(|&i| src_now[i])
        .collect();
    mirror_assign(&mut mirror, &offsets_of(dst), &expanded);
    dst.assign(&src).unwrap();
    check_all_views(&base, &mirror, &ctx);
}

fn run_scalar_fill<T: Element>(seed: u64, ops: usize) {
    let mut rng = Prng::new(seed);
    let shape = random_shape(&mut rng, 5, 8, 2000);
    let init: Vec<T> = random_values(&mut rng, numel(&shape));
    let (base, ch) = writable_view(&mut rng, &init, &shape, ops);
    let x = rng.int(-300, 300) as f64 * 0.5;
    let value = Scalar::F(x);
    let v = T::from_scalar(value);
    let mut mirror = init.clone();
    // NumPy 2: a number outside an integer dtype's range (after truncation) is refused and
    // nothing is written; only u8 cannot hold some of -150..=150.
    if T::DTYPE == DType::U8 && x.trunc() < 0.0 {
        let e = ch.arr.assign_scalar(value).unwrap_err();
        assert!(e.to_string().contains("out of bounds for u8"), "{e}");
        check_all_views(&base, &mirror, &ch.describe());
        return;
    }
    for o in offsets_of(&ch.arr) {
        mirror[o] = v;
    }
    ch.arr.assign_scalar(value).unwrap();
    check_all_views(&base, &mirror, &ch.describe());
}

fn run_set<T: Element>(seed: u64, scalar: bool) {
    let mut rng = Prng::new(seed);
    let shape = random_shape(&mut rng, 5, 5, 800);
    let init: Vec<T> = random_values(&mut rng, numel(&shape));
    let base = NDArray::from_vec(init.clone(), &shape).unwrap();
    let args = Chain::new(base.clone(), true).random_slice_args(&mut rng);
    let dst_table = Table::contiguous(&shape)
        .slice(&args)
        .expect("valid slice args");
    let ctx = format!("set {args:?} on {shape:?}");
    let mut mirror = init.clone();
    if scalar {
        let v = T::from_scalar(Scalar::I(rng.int(-50, 50) as i128));
        for &o in &dst_table.vals {
            mirror[o] = v;
        }
        base.set_scalar(&args, v.to_scalar()).unwrap();
    } else {
        let src_shape = broadcastable_shape(&mut rng, &dst_table.shape);
        let src_vals: Vec<T> = random_values(&mut rng, numel(&src_shape));
        let src = strided_from(&mut rng, &src_vals, &src_shape, T::zero());
        let expanded: Vec<T> = broadcast_index(&src_shape, &dst_table.shape)
            .iter()
            .map(|&i| src_vals[i])
            .collect();
        mirror_assign(&mut mirror, &dst_table.vals, &expanded);
        base.set(&args, &src).unwrap();
    }
    check_all_views(&base, &mirror, &ctx);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn assign_from_another_buffer_matches_mirror(
        seed in any::<u64>(),
        ops in 0usize..6,
        dt in 0usize..3,
    ) {
        match dt {
            0 => run_assign_from_other_buffer::<f64>(seed, ops),
            1 => run_assign_from_other_buffer::<i32>(seed, ops),
            _ => run_assign_from_other_buffer::<quill::f16>(seed, ops),
        }
    }

    #[test]
    fn assign_with_cast_matches_elementwise_cast(
        seed in any::<u64>(),
        ops in 0usize..5,
        dt in 0usize..4,
    ) {
        match dt {
            0 => run_assign_with_cast::<f64, i32>(seed, ops),
            1 => run_assign_with_cast::<f32, u8>(seed, ops),
            2 => run_assign_with_cast::<i64, quill::bf16>(seed, ops),
            _ => run_assign_with_cast::<f64, bool>(seed, ops),
        }
    }

    #[test]
    fn overlapping_assign_reads_the_source_first(seed in any::<u64>(), ops in 0usize..6) {
        run_overlapping_assign(seed, ops);
    }

    #[test]
    fn assign_scalar_matches_mirror(seed in any::<u64>(), ops in 0usize..6, dt in 0usize..3) {
        match dt {
            0 => run_scalar_fill::<f32>(seed, ops),
            1 => run_scalar_fill::<i64>(seed, ops),
            _ => run_scalar_fill::<u8>(seed, ops),
        }
    }

    #[test]
    fn set_and_set_scalar_match_mirror(seed in any::<u64>(), scalar in any::<bool>()) {
        run_set::<f64>(seed, scalar);
    }
}

/// `dst = src` on one buffer, both given as views of `base`; checked against the mirror.
fn check_self_assign(base: &NDArray, dst: &NDArray, src: &NDArray, what: &str) {
    let mut mirror = base.to_vec::<i64>().unwrap();
    let src_now = gather(&mirror, &offsets_of(src));
    let expanded: Vec<i64> = broadcast_index(src.shape(), dst.shape())
        .iter()
        .map(|&i| src_now[i])
        .collect();
    mirror_assign(&mut mirror, &offsets_of(dst), &expanded);
    dst.assign(src).unwrap();
    assert_eq!(base.to_vec::<i64>().unwrap(), mirror, "{what}");
}

#[test]
fn classic_overlapping_assignments_follow_numpy() {
    // a[1:] = a[:-1]
    let a = iota_i64(&[10]);
    check_self_assign(
        &a,
        &a.slice(&s![1..]).unwrap(),
        &a.slice(&s![..-1]).unwrap(),
        "a[1:] = a[:-1]",
    );
    // The mirror must give the shifted sequence (guards the mirror itself).
    assert_eq!(
        a.to_vec::<i64>().unwrap(),
        vec![0, 0, 1, 2, 3, 4, 5, 6, 7, 8]
    );
    // a[:-1] = a[1:]
    let a = iota_i64(&[10]);
    check_self_assign(
        &a,
        &a.slice(&s![..-1]).unwrap(),
        &a.slice(&s![1..]).unwrap(),
        "a[:-1] = a[1:]",
    );
    // a[::-1] = a
    let a = iota_i64(&[9]);
    check_self_assign(&a, &a.slice(&s![..;-1]).unwrap(), &a, "a[::-1] = a");
    assert_eq!(a.to_vec::<i64>().unwrap(), (0..9).rev().collect::<Vec<_>>());
    // a.T = a on a square matrix: a becomes its transpose.
    let a = iota_i64(&[5, 5]);
    check_self_assign(&a, &a.transpose(0, 1).unwrap(), &a, "a.T = a");
    let at: Vec<i64> = (0..25).map(|k| (k % 5) * 5 + k / 5).collect();
    assert_eq!(a.to_vec::<i64>().unwrap(), at);
    // 2-D shifts and flips.
    let a = iota_i64(&[6, 7]);
    check_self_assign(
        &a,
        &a.slice(&s![1.., 1..]).unwrap(),
        &a.slice(&s![..-1, ..-1]).unwrap(),
        "a[1:, 1:] = a[:-1, :-1]",
    );
    check_self_assign(
        &a,
        &a.slice(&s![.., ..;-1]).unwrap(),
        &a.slice(&s![..;-1, ..]).unwrap(),
        "a[:, ::-1] = a[::-1, :]",
    );
    // A broadcast row of the same buffer into the whole array.
    check_self_assign(&a, &a, &a.slice(&s![2..3, ..]).unwrap(), "a[:] = a[2:3]");
    // Every other element from its neighbour, stepped and overlapping.
    let a = iota_i64(&[20]);
    check_self_assign(
        &a,
        &a.slice(&s![1..;2]).unwrap(),
        &a.slice(&s![..-1;2]).unwrap(),
        "a[1::2] = a[:-1:2]",
    );
    check_self_assign(
        &a,
        &a.slice(&s![2..]).unwrap(),
        &a.as_strided(&[18], &[1], 1).unwrap(),
        "as_strided shift",
    );
}

#[test]
fn writes_are_visible_through_every_view() {
    let a = iota_i64(&[4, 6]);
    let t = a.transpose(0, 1).unwrap();
    let r = a.reshape(&[2, 12]).unwrap();
    let f = a.flip(&[0, 1]).unwrap();
    assert!(t.shares_storage_with(&a) && r.shares_storage_with(&a) && f.shares_storage_with(&a));
    // Write through the transposed view.
    t.set_scalar(&s![2, 1..3], -7i64).unwrap();
    let mut mirror: Vec<i64> = (0..24).collect();
    for i in 1..3 {
        mirror[i * 6 + 2] = -7;
    }
    for v in [&a, &t, &r, &f] {
        assert_eq!(v.to_vec::<i64>().unwrap(), gather(&mirror, &offsets_of(v)));
    }
    // Write through the flipped view from a broadcast row.
    let row = NDArray::from_vec(vec![100i64, 101, 102, 103, 104, 105], &[6]).unwrap();
    f.set(&s![1..3], &row).unwrap();
    for (k, o) in offsets_of(&f.slice(&s![1..3]).unwrap()).iter().enumerate() {
        mirror[*o] = 100 + (k % 6) as i64;
    }
    for v in [&a, &t, &r, &f] {
        assert_eq!(v.to_vec::<i64>().unwrap(), gather(&mirror, &offsets_of(v)));
    }
}

#[test]
fn writing_into_a_broadcast_view_errs_and_writes_nothing() {
    let a = iota_i64(&[3, 4]);
    let row = a.slice(&s![0..1]).unwrap();
    let views = [
        row.broadcast_to(&[3, 4]).unwrap(),
        a.slice(&s![0, ..]).unwrap().broadcast_to(&[2, 4]).unwrap(),
        a.as_strided(&[3, 2], &[0, 1], 2).unwrap(),
        a.slice(&s![.., NewAxis, ..])
            .unwrap()
            .broadcast_to(&[3, 5, 4])
            .unwrap(),
    ];
    let src = NDArray::zeros(&[4], DType::I64).unwrap();
    for v in &views {
        let e = v.assign(&src).unwrap_err();
        assert!(matches!(e, Error::ReadOnlyView { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("assign"), "{msg}");
        assert!(msg.contains(&format!("{:?}", v.shape())), "{msg}");
        let e = v.assign_scalar(1).unwrap_err();
        assert!(matches!(e, Error::ReadOnlyView { .. }), "{e}");
        assert!(e.to_string().contains("assign_scalar"), "{e}");
        let e = v.set(&s![..2], &NDArray::scalar(0i64)).unwrap_err();
        assert!(matches!(e, Error::ReadOnlyView { .. }), "{e}");
        let e = v.set_scalar(&s![.., ..], 5i64).unwrap_err();
        assert!(matches!(e, Error::ReadOnlyView { .. }), "{e}");
        assert_eq!(a.to_vec::<i64>().unwrap(), (0..12).collect::<Vec<_>>());
    }
    // A stride-0 dim of size 1 (NewAxis) is not a broadcast: writable.
    let v = a.slice(&s![NewAxis, 1, ..]).unwrap();
    assert_eq!(v.strides()[0], 0);
    v.assign_scalar(-1).unwrap();
    assert_eq!(a.to_vec::<i64>().unwrap()[4..8], [-1, -1, -1, -1]);
    // Indexing a broadcast view down to one element keeps it read-only (NumPy: the view of a
    // read-only array is read-only), or b[2, 3] = 99 would write every row's element.
    let one = views[0].slice(&s![2, 3]).unwrap();
    let e = one.assign_scalar(99).unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");
    assert_eq!(a.to_vec::<i64>().unwrap()[3], 3);
}

#[test]
fn shape_mismatch_errs_naming_both_shapes_and_writes_nothing() {
    let a = iota_i64(&[2, 5]);
    let cases: [(&[usize], NDArray); 4] = [
        (&[3, 4], NDArray::zeros(&[3, 4], DType::I64).unwrap()),
        (&[5, 2], NDArray::zeros(&[5, 2], DType::F32).unwrap()),
        (&[3], NDArray::zeros(&[3], DType::I64).unwrap()),
        (&[2, 2, 5], NDArray::zeros(&[2, 2, 5], DType::I64).unwrap()),
    ];
    for (shape, src) in &cases {
        let e = a.assign(src).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("assign"), "{msg}");
        assert!(msg.contains("[2, 5]"), "{msg}");
        assert!(msg.contains(&format!("{shape:?}")), "{msg}");
        assert_eq!(a.to_vec::<i64>().unwrap(), (0..10).collect::<Vec<_>>());
    }
    // Leading size-1 axes are dropped only while they are 1: the error names the given shape.
    let e = a
        .assign(&NDArray::zeros(&[1, 3, 5], DType::I64).unwrap())
        .unwrap_err();
    assert!(e.to_string().contains("[1, 3, 5]"), "{e}");
    // Through set: the view's shape is what is named.
    let e = a
        .set(&s![.., 1..3], &NDArray::zeros(&[3], DType::I64).unwrap())
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("[2, 2]") && msg.contains("[3]"), "{msg}");
}

#[test]
fn leading_unit_axes_of_the_value_are_dropped_as_numpy_does() {
    // NumPy: `a[:] = ones((1, 1, 5))` into shape (5,), and a (1,) value into one element.
    let a = NDArray::zeros(&[2, 5], DType::F64).unwrap();
    let src =
        NDArray::from_vec((0..5).map(|i| i as f64).collect::<Vec<_>>(), &[1, 1, 1, 5]).unwrap();
    a.assign(&src).unwrap();
    let want: Vec<f64> = (0..10).map(|i| (i % 5) as f64).collect();
    assert_eq!(a.to_vec::<f64>().unwrap(), want);
    // Into a 0-d view (an element): a (1,) and a (1, 1) value.
    let elem = a.slice(&s![1, 2]).unwrap();
    assert_eq!(elem.ndim(), 0);
    elem.assign(&NDArray::from_vec(vec![42.0f64], &[1]).unwrap())
        .unwrap();
    elem.assign(&NDArray::from_vec(vec![43.0f64], &[1, 1]).unwrap())
        .unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap()[7], 43.0);
    // Through a stepped, reversed view.
    let v = a.slice(&s![.., ..;-2]).unwrap();
    v.assign(&NDArray::from_vec(vec![-1.0f64, -2.0, -3.0], &[1, 3]).unwrap())
        .unwrap();
    assert_eq!(
        a.to_vec::<f64>().unwrap(),
        vec![-3.0, 1.0, -2.0, 3.0, -1.0, -3.0, 1.0, -2.0, 3.0, -1.0]
    );
}

#[test]
fn bad_indices_in_set_err() {
    let a = iota_i64(&[3, 4]);
    let src = NDArray::scalar(1i64);
    let e = a.set(&s![3], &src).unwrap_err();
    assert!(matches!(e, Error::IndexOutOfRange { .. }), "{e}");
    let e = a.set_scalar(&s![.., -5], 0i64).unwrap_err();
    assert!(matches!(e, Error::IndexOutOfRange { .. }), "{e}");
    let e = a.set_scalar(&s![0, 0, 0], 0i64).unwrap_err();
    assert!(e.to_string().contains("too many indices"), "{e}");
    let e = a
        .set_scalar(
            &[SliceArg::Range {
                start: None,
                stop: None,
                step: 0,
            }],
            0i64,
        )
        .unwrap_err();
    assert!(e.to_string().contains("step"), "{e}");
    assert_eq!(a.to_vec::<i64>().unwrap(), (0..12).collect::<Vec<_>>());
}

#[test]
fn assign_scalar_casts_with_numpy_rules() {
    let a = NDArray::zeros(&[4], DType::U8).unwrap();
    // Casts wrap (x86 NumPy's C casts), but NumPy 2's setitem refuses a number out of the
    // dtype's range: assign_scalar errs there and writes nothing.
    for (v, want) in [(-1.0f64, 255u8), (300.0, 44), (2.9, 2)] {
        assert_eq!(u8::from_scalar(Scalar::F(v)), want);
    }
    for v in [-1.0f64, 300.0] {
        let e = a.assign_scalar(v).unwrap_err();
        assert!(e.to_string().contains("out of bounds for u8"), "{e}");
        assert_eq!(a.to_vec::<u8>().unwrap(), vec![0; 4]);
    }
    a.assign_scalar(2.9).unwrap();
    assert_eq!(a.to_vec::<u8>().unwrap(), vec![2; 4]);
    let b = NDArray::zeros(&[3], DType::Bool).unwrap();
    b.assign_scalar(f64::NAN).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true; 3]);
    b.assign_scalar(-0.0).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![false; 3]);
}

#[test]
fn crosswise_assignments_from_two_threads_do_not_deadlock() {
    // a <- b on one thread while b <- a on another: the locks are taken in one global order.
    let a = NDArray::from_vec(vec![1.0f32; 4096], &[64, 64]).unwrap();
    let b = NDArray::from_vec(vec![2.0f32; 4096], &[64, 64]).unwrap();
    let (a2, b2) = (a.clone(), b.clone());
    let t = std::thread::spawn(move || {
        for _ in 0..300 {
            b2.assign(&a2.transpose(0, 1).unwrap()).unwrap();
        }
    });
    for _ in 0..300 {
        a.assign(&b.flip(&[0]).unwrap()).unwrap();
    }
    t.join().unwrap();
    // Whatever the interleaving, every element is one of the two values, the same everywhere
    // in each array (each assignment copies a constant array).
    for x in [&a, &b] {
        let v = x.to_vec::<f32>().unwrap();
        assert!(v.iter().all(|&e| e == v[0]) && (v[0] == 1.0 || v[0] == 2.0));
    }
}
