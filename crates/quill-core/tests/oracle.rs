//! Every view op of `Layout`, exhaustively over small fixed cases, against the view oracle (an
//! explicit table of flat offsets transformed naively, see quill-test-support): permute, transpose,
//! broadcast_to, squeeze/unsqueeze, flip, reshape (including the no-copy rule: a refusal must mean
//! no strided layout exists) and NumPy slicing. The starting layouts include a non-zero offset
//! (`as_strided`), negative and zero strides, rank 0 and size-0 arrays. Python's slice semantics
//! and a few NumPy results are checked against outputs recorded from real Python/NumPy.

use quill_core::slice::resolve_range;
use quill_core::{s, Ellipsis, Layout, NewAxis, SliceArg};
use quill_test_support::{check_invariants, py_slice_positions, step, table_of, Op, Table};

/// (name, shape, strides, offset, buffer length)
type Raw = (&'static str, Vec<usize>, Vec<isize>, usize, usize);
/// (n, start, stop, step, selected positions)
type PyCase = (usize, Option<isize>, Option<isize>, isize, Vec<usize>);

/// Starting layouts: (name, layout, buffer length). The oracle table of each is built from the raw
/// parts independently.
fn starts() -> Vec<(&'static str, Layout, Table, usize)> {
    let raw: Vec<Raw> = vec![
        ("contiguous [2,3,4]", vec![2, 3, 4], vec![12, 4, 1], 0, 24),
        ("offset 7 [2,3,4]", vec![2, 3, 4], vec![12, 4, 1], 7, 40),
        ("negative strides", vec![3, 2, 2], vec![-4, 1, -2], 10, 13),
        ("transposed with offset", vec![4, 3], vec![1, 4], 5, 17),
        ("broadcast (stride 0)", vec![2, 3, 2], vec![0, 2, 1], 1, 7),
        ("size-1 dims", vec![1, 3, 1, 2], vec![99, 2, -5, 1], 3, 9),
        ("stepped", vec![2, 3], vec![9, 3], 2, 21),
        ("rank 0", vec![], vec![], 4, 5),
        ("size 0", vec![2, 0, 3], vec![0, 3, 1], 0, 0),
        ("size 0 with offset", vec![0, 2], vec![2, 1], 5, 6),
        ("1-d", vec![5], vec![1], 0, 5),
        ("1-d reversed", vec![5], vec![-2], 9, 10),
        ("ones", vec![1, 1, 1], vec![1, 1, 1], 0, 1),
        ("rank 5", vec![2, 1, 2, 2, 2], vec![16, 16, 1, 8, 2], 0, 32),
    ];
    raw.into_iter()
        .map(|(name, shape, strides, offset, len)| {
            let l = Layout::as_strided(&shape, &strides, offset, len).unwrap();
            (name, l, Table::strided(&shape, &strides, offset), len)
        })
        .collect()
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for k in 0..=p.len() {
            let mut q = p.clone();
            q.insert(k, n - 1);
            out.push(q);
        }
    }
    out
}

fn subsets(n: usize) -> Vec<Vec<usize>> {
    (0..1usize << n)
        .map(|m| (0..n).filter(|&i| m >> i & 1 == 1).collect())
        .collect()
}

/// Every shape of rank <= `max_rank` with `numel` elements (dims up to `numel`, and up to 3 when
/// `numel` is 0).
fn factorisations(numel: usize, max_rank: usize) -> Vec<Vec<usize>> {
    let mut out = vec![];
    let top = numel.max(3);
    fn rec(
        rem_rank: usize,
        top: usize,
        cur: &mut Vec<usize>,
        numel: usize,
        out: &mut Vec<Vec<usize>>,
    ) {
        if cur.iter().product::<usize>() == numel {
            out.push(cur.clone());
        }
        if rem_rank == 0 {
            return;
        }
        for d in 0..=top {
            let p: usize = cur.iter().product::<usize>() * d;
            if numel != 0 && (p == 0 || !numel.is_multiple_of(p)) {
                continue;
            }
            cur.push(d);
            rec(rem_rank - 1, top, cur, numel, out);
            cur.pop();
        }
    }
    rec(max_rank, top, &mut vec![], numel, &mut out);
    out
}

/// Runs one op from every start and returns how many produced a view.
fn run_all(start: &(&str, Layout, Table, usize), ops: &[Op]) -> usize {
    let (name, l, t, len) = start;
    let mut ok = 0;
    for op in ops {
        if let Some((l2, _)) = step(l, t, op) {
            check_invariants(&l2, *len);
            ok += 1;
        } else {
            assert!(matches!(op, Op::Reshape(_)), "{name}: valid {op:?} refused");
        }
    }
    ok
}

#[test]
fn start_layouts_match_their_tables() {
    for (name, l, t, len) in starts() {
        assert_eq!(table_of(&l), t, "{name}");
        check_invariants(&l, len);
    }
}

#[test]
fn permute_and_transpose_every_axis_order() {
    for st in starts() {
        let n = st.1.ndim();
        let mut ops = vec![];
        for p in permutations(n) {
            // once with plain axes, once with every axis negative
            ops.push(Op::Permute(p.iter().map(|&a| a as isize).collect()));
            ops.push(Op::Permute(
                p.iter().map(|&a| a as isize - n as isize).collect(),
            ));
        }
        for a in 0..n as isize {
            for b in 0..n as isize {
                ops.push(Op::Transpose(a, b));
                ops.push(Op::Transpose(a - n as isize, b));
            }
        }
        assert_eq!(run_all(&st, &ops), ops.len());
    }
}

#[test]
fn broadcast_to_prepends_and_stretches() {
    for st in starts() {
        let shape = st.1.shape().to_vec();
        let mut targets: Vec<Vec<usize>> = vec![shape.clone()];
        // stretch every subset of the size-1 dims to 3 (and to 0), then prepend 0, 1 or 2 dims
        let ones: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] == 1).collect();
        for sub in subsets(ones.len()) {
            for size in [0, 3] {
                let mut t = shape.clone();
                for &k in &sub {
                    t[ones[k]] = size;
                }
                targets.push(t.clone());
                for lead in [vec![2], vec![1, 3], vec![0]] {
                    targets.push([lead, t.clone()].concat());
                }
            }
        }
        let ops: Vec<Op> = targets.into_iter().map(Op::BroadcastTo).collect();
        assert_eq!(run_all(&st, &ops), ops.len());
    }
}

#[test]
fn squeeze_unsqueeze_and_flip_every_axis() {
    for st in starts() {
        let shape = st.1.shape().to_vec();
        let n = shape.len();
        let mut ops = vec![Op::SqueezeAll];
        let ones: Vec<usize> = (0..n).filter(|&a| shape[a] == 1).collect();
        for sub in subsets(ones.len()) {
            let mut axes: Vec<isize> = sub.iter().map(|&k| ones[k] as isize).collect();
            ops.push(Op::Squeeze(axes.clone()));
            axes.reverse();
            ops.push(Op::Squeeze(axes.iter().map(|&a| a - n as isize).collect()));
        }
        for a in -(n as isize) - 1..=n as isize {
            ops.push(Op::Unsqueeze(a));
        }
        for sub in subsets(n) {
            let mut axes: Vec<isize> = sub.iter().map(|&a| a as isize).collect();
            ops.push(Op::Flip(axes.clone()));
            axes.reverse();
            ops.push(Op::Flip(axes.iter().map(|&a| a - n as isize).collect()));
        }
        assert_eq!(run_all(&st, &ops), ops.len());
    }
}

#[test]
fn reshape_is_a_view_exactly_when_a_strided_layout_exists() {
    let mut views = 0;
    let mut refusals = 0;
    for st in starts() {
        let (_, l, t, len) = &st;
        // the start itself and some of its permutations, flips and steps
        let mut sources = vec![(l.clone(), t.clone())];
        for p in permutations(l.ndim()).into_iter().take(6) {
            let op = Op::Permute(p.iter().map(|&a| a as isize).collect());
            sources.push(step(l, t, &op).unwrap());
        }
        if l.ndim() > 0 {
            for op in [
                Op::Flip(vec![0]),
                Op::Slice(s![..;2].to_vec()),
                Op::Slice(s![1..].to_vec()),
                Op::Slice(s![Ellipsis, ..;-1].to_vec()),
            ] {
                sources.push(step(l, t, &op).unwrap());
            }
        }
        for (src, ts) in &sources {
            for shape in factorisations(src.numel(), 4) {
                let spec: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
                let mut specs = vec![spec.clone()];
                for k in 0..spec.len() {
                    let mut s2 = spec.clone();
                    s2[k] = -1;
                    specs.push(s2);
                }
                for spec in specs {
                    let op = Op::Reshape(spec.clone());
                    match step(src, ts, &op) {
                        Some((l2, _)) => {
                            check_invariants(&l2, *len);
                            views += 1;
                        }
                        // a valid shape that needs a copy (`step` checked no view exists)
                        None if op.on_table(ts).is_some() => refusals += 1,
                        None => {}
                    }
                    if src.is_contiguous() {
                        assert!(
                            src.reshape(&spec).is_ok()
                                || quill_test_support::infer_shape(src.numel(), &spec).is_none()
                        );
                    }
                }
            }
        }
    }
    // Both outcomes must actually occur for the test to mean anything.
    assert!(
        views > 1000 && refusals > 100,
        "views {views}, refusals {refusals}"
    );
}

#[test]
fn python_slice_semantics_recorded_from_cpython() {
    // (n, start, stop, step, list(range(n))[start:stop:step]) as printed by CPython 3.
    let m = isize::MAX;
    let cases: Vec<PyCase> = vec![
        (10, None, None, -3, vec![9, 6, 3, 0]),
        (10, Some(8), Some(2), -2, vec![8, 6, 4]),
        (10, Some(-100), Some(100), 1, (0..10).collect()),
        (6, Some(5), Some(-100), -1, vec![5, 4, 3, 2, 1, 0]),
        (5, Some(-2), None, 1, vec![3, 4]),
        (5, None, Some(-6), -1, vec![4, 3, 2, 1, 0]),
        (5, Some(3), Some(3), 1, vec![]),
        (7, Some(1), None, 3, vec![1, 4]),
        (7, Some(-1), Some(-8), -2, vec![6, 4, 2, 0]),
        (4, Some(10), None, -1, vec![3, 2, 1, 0]),
        (4, Some(-10), None, -1, vec![]),
        (0, None, None, -1, vec![]),
        (3, None, None, m, vec![0]),
        (3, None, None, isize::MIN, vec![2]),
        (5, Some(1), Some(-1), 1, vec![1, 2, 3]),
        (5, Some(-1), Some(1), -1, vec![4, 3, 2]),
    ];
    for (n, start, stop, st, want) in cases {
        assert_eq!(
            py_slice_positions(start, stop, st, n),
            want,
            "oracle: {n} [{start:?}:{stop:?}:{st}]"
        );
        let l = Layout::contiguous(&[n]).unwrap();
        let v = l.slice(&[SliceArg::range(start, stop, st)]).unwrap();
        assert_eq!(
            v.offsets().collect::<Vec<_>>(),
            want,
            "layout: {n} [{start:?}:{stop:?}:{st}]"
        );
        let (first, len) = resolve_range(start, stop, st, n);
        assert_eq!(len, want.len());
        if let Some(&f) = want.first() {
            assert_eq!(first, f as isize);
        }
    }
}

#[test]
fn slice_one_axis_exhaustively() {
    let bounds: Vec<Option<isize>> = std::iter::once(None)
        .chain((-9..=9).map(Some))
        .chain([Some(isize::MIN), Some(isize::MAX)])
        .collect();
    let steps = [
        1,
        2,
        3,
        7,
        -1,
        -2,
        -3,
        -7,
        isize::MAX,
        isize::MIN,
        isize::MIN + 1,
    ];
    for n in 0..=6usize {
        // a plain axis and a reversed, offset one (as the trailing axis of a 2-d array)
        let starts = [
            (
                Layout::contiguous(&[n]).unwrap(),
                Table::contiguous(&[n]),
                n.max(1),
            ),
            (
                Layout::as_strided(&[2, n], &[1, -3], 3 * n, 3 * n + 2).unwrap(),
                Table::strided(&[2, n], &[1, -3], 3 * n),
                3 * n + 2,
            ),
        ];
        for (l, t, len) in &starts {
            for &a in &bounds {
                for &b in &bounds {
                    for &st in &steps {
                        let r = SliceArg::range(a, b, st);
                        let args = if l.ndim() == 1 {
                            vec![r]
                        } else {
                            vec![SliceArg::Ellipsis, r]
                        };
                        let (l2, _) = step(l, t, &Op::Slice(args)).expect("valid slice refused");
                        check_invariants(&l2, *len);
                    }
                }
            }
        }
    }
}

#[test]
fn slice_with_indices_new_axes_and_ellipsis() {
    let mut tried = 0;
    for st in starts() {
        let (_, l, t, len) = &st;
        let n = l.ndim();
        let mut exprs: Vec<Vec<SliceArg>> = vec![
            vec![],
            s![Ellipsis].to_vec(),
            s![NewAxis].to_vec(),
            s![Ellipsis, NewAxis].to_vec(),
            s![NewAxis, Ellipsis, NewAxis].to_vec(),
        ];
        for a in 0..n {
            let size = l.shape()[a] as isize;
            for i in -size..size {
                let mut e = vec![SliceArg::FULL; a];
                e.push(SliceArg::Index(i));
                exprs.push(e.clone());
                e.push(SliceArg::NewAxis);
                if a + 1 < n {
                    e.push(SliceArg::range(None, None, -2));
                }
                exprs.push(e);
                let mut e = vec![SliceArg::Ellipsis, SliceArg::Index(i)];
                e.extend(vec![SliceArg::range(Some(-2), None, 1); n - a - 1]);
                exprs.push(e);
            }
        }
        exprs.push(vec![SliceArg::range(None, None, -1); n]);
        exprs.push(
            [
                vec![SliceArg::NewAxis; 2],
                vec![SliceArg::range(Some(1), Some(-1), 1); n],
            ]
            .concat(),
        );
        tried += exprs.len();
        for e in exprs {
            let (l2, _) = step(l, t, &Op::Slice(e.clone()))
                .unwrap_or_else(|| panic!("{e:?} refused on {l:?}"));
            check_invariants(&l2, *len);
        }
    }
    assert!(tried > 100);
}

#[test]
fn numpy_results_recorded_from_numpy() {
    // x = np.arange(24).reshape(2, 3, 4)
    let x = Layout::contiguous(&[2, 3, 4]).unwrap();
    // x[1:, ::-1, 3].tolist() == [[23, 19, 15]]
    let v = x.slice(&s![1.., ..;-1, 3]).unwrap();
    assert_eq!(v.shape(), &[1, 3]);
    assert_eq!(v.offsets().collect::<Vec<_>>(), vec![23, 19, 15]);
    // x[..., None, ::-2]: shape (2, 3, 1, 2), values 3 1 7 5 11 9 15 13 19 17 23 21
    let v = x.slice(&s![Ellipsis, NewAxis, ..;-2]).unwrap();
    assert_eq!(v.shape(), &[2, 3, 1, 2]);
    assert_eq!(
        v.offsets().collect::<Vec<_>>(),
        vec![3, 1, 7, 5, 11, 9, 15, 13, 19, 17, 23, 21]
    );
    // x.transpose(2, 0, 1)[::-1, 1].tolist()
    let v = x.permute(&[2, 0, 1]).unwrap().slice(&s![..;-1, 1]).unwrap();
    assert_eq!(v.shape(), &[4, 3]);
    assert_eq!(
        v.offsets().collect::<Vec<_>>(),
        vec![15, 19, 23, 14, 18, 22, 13, 17, 21, 12, 16, 20]
    );
}

#[test]
fn chains_from_an_offset_start() {
    // A fixed chain applied from a contiguous start and from the same shape at offset 11, with
    // whether each op must give a view (a refused reshape is checked by `step` to be right).
    let chain = vec![
        (Op::Permute(vec![2, 0, 1]), true),
        (Op::Slice(s![..;-2, NewAxis, 1.., Ellipsis].to_vec()), true),
        (Op::Unsqueeze(-1), true),
        (Op::BroadcastTo(vec![2, 2, 1, 1, 3, 5]), true),
        (Op::Flip(vec![0, -1]), true),
        (Op::Squeeze(vec![2, -3]), true),
        (Op::Transpose(0, -1), true),
        // [5, 2, 3, 2] with strides [0, -2, 4, 0]: merging the broadcast 5 with the 2 needs a copy
        (Op::Reshape(vec![-1, 2, 3]), false),
        (Op::Reshape(vec![5, 1, 2, 3, 2]), true),
        (Op::Slice(s![3, ..;-1].to_vec()), true),
        (Op::Reshape(vec![2, 3, 2]), true),
        (Op::Reshape(vec![-1]), false),
        (Op::Slice(s![Ellipsis, 1].to_vec()), true),
        (Op::Reshape(vec![3, 2]), false),
        (Op::Reshape(vec![2, 3, 1]), true),
        (Op::Reshape(vec![2, -1]), true),
    ];
    for (l, t, len) in [
        (
            Layout::contiguous(&[2, 3, 4]).unwrap(),
            Table::contiguous(&[2, 3, 4]),
            24,
        ),
        (
            Layout::as_strided(&[2, 3, 4], &[12, 4, 1], 11, 40).unwrap(),
            Table::strided(&[2, 3, 4], &[12, 4, 1], 11),
            40,
        ),
    ] {
        let (mut l, mut t) = (l, t);
        for (op, view) in &chain {
            match step(&l, &t, op) {
                Some((l2, t2)) => {
                    assert!(view, "{op:?} on {l:?} gave a view {l2:?}");
                    check_invariants(&l2, len);
                    (l, t) = (l2, t2);
                }
                None => assert!(!view, "{op:?} refused on {l:?}"),
            }
        }
        assert_eq!(l.shape(), &[2, 3]);
    }
}
