//! Invalid arguments to every view op give an `Err` (never a panic, never a layout): permute,
//! transpose, broadcast_to, squeeze, unsqueeze, flip, reshape, slice (including a step on an index
//! via `s![3;2]`) and as_strided, with random arrays and random bad arguments, huge and extreme
//! values included. The oracle agrees that each argument is invalid. A few error messages are
//! checked in full or for the op name and the shapes they must mention.

use proptest::prelude::*;
use quill_core::{s, Ellipsis, Error, Layout, NewAxis, SliceArg};
use quill_test_support::{numel, random_view, Op, Prng, Table};

/// An axis that is out of range for rank `r` (on either side, extremes included).
fn bad_axis(rng: &mut Prng, r: usize, extra: usize) -> isize {
    let n = (r + extra) as isize;
    match rng.below(4) {
        0 => n + rng.below(3) as isize,
        1 => -n - 1 - rng.below(3) as isize,
        2 => isize::MAX - rng.below(2) as isize,
        _ => isize::MIN + rng.below(2) as isize,
    }
}

/// A random invalid op for a layout of `shape`, or `None` when this kind has no invalid
/// arguments for it (e.g. a duplicate axis needs rank >= 1).
fn invalid_op(rng: &mut Prng, kind: usize, shape: &[usize]) -> Option<Op> {
    let r = shape.len();
    let perm = |rng: &mut Prng| -> Vec<isize> {
        rng.permutation(r)
            .into_iter()
            .map(|a| rng.alias(a, r))
            .collect()
    };
    Some(match kind {
        // permute: wrong length, a repeated axis (maybe spelled negatively), an out-of-range axis
        0 => {
            let mut p = perm(rng);
            match rng.below(3) {
                0 => {
                    if r > 0 && rng.odds(1, 2) {
                        p.pop();
                    } else {
                        let a = rng.below(r.max(1));
                        p.push(rng.alias(a, r));
                    }
                }
                1 if r >= 2 => {
                    let (i, j) = (rng.below(r), rng.below(r - 1));
                    let j = if j >= i { j + 1 } else { j };
                    let a = p[i].rem_euclid(r as isize) as usize;
                    p[j] = rng.alias(a, r);
                }
                _ if r >= 1 => {
                    let i = rng.below(r);
                    p[i] = bad_axis(rng, r, 0);
                }
                _ => p.push(0),
            }
            Op::Permute(p)
        }
        1 => {
            let a = rng.below(r.max(1));
            let good = if r > 0 { rng.alias(a, r) } else { 0 };
            let bad = bad_axis(rng, r, 0);
            if rng.odds(1, 2) {
                Op::Transpose(bad, good)
            } else {
                Op::Transpose(good, bad)
            }
        }
        // broadcast_to: a mismatched dim, a lower rank
        2 => {
            let non1: Vec<usize> = (0..r).filter(|&a| shape[a] != 1).collect();
            if !non1.is_empty() && rng.odds(2, 3) {
                let a = non1[rng.below(non1.len())];
                let mut t: Vec<usize> = shape.to_vec();
                t[a] = loop {
                    let v = rng.below(6);
                    if v != shape[a] {
                        break v;
                    }
                };
                let lead: Vec<usize> = (0..rng.below(2)).map(|_| rng.dim()).collect();
                Op::BroadcastTo([lead, t].concat())
            } else if r > 0 {
                let k = 1 + rng.below(r);
                Op::BroadcastTo(shape[k..].to_vec())
            } else {
                return None;
            }
        }
        // squeeze: a dim that is not 1, an out-of-range axis, a repeated size-1 axis
        3 => {
            let non1: Vec<usize> = (0..r).filter(|&a| shape[a] != 1).collect();
            let ones: Vec<usize> = (0..r).filter(|&a| shape[a] == 1).collect();
            match rng.below(3) {
                0 if !non1.is_empty() => {
                    let a = non1[rng.below(non1.len())];
                    Op::Squeeze(vec![rng.alias(a, r)])
                }
                1 if !ones.is_empty() => {
                    let a = ones[rng.below(ones.len())];
                    Op::Squeeze(vec![rng.alias(a, r), rng.alias(a, r)])
                }
                _ => Op::Squeeze(vec![bad_axis(rng, r, 0)]),
            }
        }
        4 => Op::Unsqueeze(bad_axis(rng, r, 1)),
        5 => {
            if r > 0 && rng.odds(1, 2) {
                let a = rng.below(r);
                Op::Flip(vec![rng.alias(a, r), rng.alias(a, r)])
            } else {
                Op::Flip(vec![bad_axis(rng, r, 0)])
            }
        }
        // reshape: wrong count, two -1, a negative dim other than -1
        6 => {
            let n = numel(shape) as isize;
            match rng.below(4) {
                0 => Op::Reshape(vec![n + 1 + rng.below(4) as isize]),
                1 => Op::Reshape(vec![-1, n.max(1), -1]),
                2 => Op::Reshape(vec![n, -2 - rng.below(5) as isize]),
                _ => {
                    // -1 that cannot be filled: the known dims do not divide the count
                    if n == 0 {
                        Op::Reshape(vec![0, -1])
                    } else {
                        Op::Reshape(vec![-1, n + 1])
                    }
                }
            }
        }
        // slice: too many indices, an index out of range, a zero step, two ellipses
        _ => {
            let mut args: Vec<SliceArg> = vec![SliceArg::FULL; rng.below(r + 1)];
            match rng.below(4) {
                0 => args = vec![SliceArg::Index(0); r + 1 + rng.below(2)],
                1 if r > 0 => {
                    let a = rng.below(r);
                    let n = shape[a] as isize;
                    let i = match rng.below(4) {
                        0 => n + rng.below(3) as isize,
                        1 => -n - 1 - rng.below(3) as isize,
                        2 => isize::MAX,
                        _ => isize::MIN,
                    };
                    args = vec![SliceArg::FULL; a];
                    args.push(SliceArg::Index(i));
                }
                2 if r > 0 => {
                    let at = rng.below(args.len().min(r - 1) + 1);
                    args.insert(at, SliceArg::range(None, Some(rng.int(-3, 3) as isize), 0));
                    args.truncate(r);
                }
                _ => {
                    args.insert(rng.below(args.len() + 1), SliceArg::Ellipsis);
                    args.insert(rng.below(args.len() + 1), SliceArg::Ellipsis);
                }
            }
            Op::Slice(args)
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn invalid_view_arguments_are_errors(seed in any::<u64>(), kinds in proptest::collection::vec(0usize..8, 1..8)) {
        let mut rng = Prng::from_state(seed);
        let rank = rng.below(6);
        let shape = rng.shape(rank, 1024);
        let (l, _) = random_view(&mut rng, &shape);
        let t = Table { shape: shape.clone(), vals: l.offsets().collect() };
        for kind in kinds {
            let Some(op) = invalid_op(&mut rng, kind, &shape) else { continue };
            prop_assert!(op.on_table(&t).is_none(), "the oracle accepts {:?} on {:?}", op, shape);
            match op.on_layout(&l) {
                Ok(v) => prop_assert!(false, "{:?} on {:?} gave {:?}", op, l, v),
                Err(e) => {
                    let msg = e.to_string();
                    let name = match &op {
                        Op::Permute(_) => "permute",
                        Op::Transpose(..) => "transpose",
                        Op::BroadcastTo(_) => "broadcast_to",
                        Op::Squeeze(_) => "squeeze",
                        Op::Unsqueeze(_) => "unsqueeze",
                        Op::Flip(_) => "flip",
                        Op::Reshape(_) => "view",
                        Op::Slice(_) => "slice",
                        Op::SqueezeAll => unreachable!(),
                    };
                    prop_assert!(msg.starts_with(&format!("{name}: ")), "{:?}: message {:?}", op, msg);
                }
            }
        }
    }

    /// Shapes whose element count overflows are refused by every op that takes a shape, and the
    /// refusal is an error, not a wrapped count.
    #[test]
    fn overflowing_shapes_are_errors(seed in any::<u64>()) {
        let mut rng = Prng::from_state(seed);
        let big = match rng.below(4) {
            0 => usize::MAX,
            1 => isize::MAX as usize,
            2 => 1 << 32,
            _ => (1 << 62) + rng.below(5),
        };
        let mut shape = vec![big, 1 << (32 + rng.below(30))];
        if rng.odds(1, 2) {
            shape.push(0);
        }
        rng.shuffle(&mut shape);
        assert!(matches!(Layout::contiguous(&shape), Err(Error::Overflow { .. })));
        let strides = vec![1isize; shape.len()];
        prop_assert!(Layout::as_strided(&shape, &strides, 0, usize::MAX).is_err());
        let s = Layout::contiguous(&[]).unwrap();
        prop_assert!(s.broadcast_to(&shape).is_err());
        let spec: Vec<isize> = shape.iter().map(|&d| d.min(isize::MAX as usize) as isize).collect();
        let z = Layout::contiguous(&[0]).unwrap();
        prop_assert!(z.reshape(&spec).is_err(), "reshape of [0] into {:?} accepted", spec);
        prop_assert!(s.reshape(&spec).is_err());
    }

    /// `as_strided` rejects every layout that reaches outside the buffer or below offset 0.
    #[test]
    fn as_strided_checks_the_reach(seed in any::<u64>()) {
        let mut rng = Prng::from_state(seed);
        let rank = 1 + rng.below(4);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
        let strides: Vec<isize> = (0..rank).map(|_| rng.int(-5, 5) as isize).collect();
        let offset = rng.below(40);
        // the true reach, by enumeration
        let t = quill_test_support::all_indices(&shape);
        let reach: Vec<i64> = t.iter().map(|i| offset as i64 + i.iter().zip(&strides).map(|(&a, &s)| a as i64 * s as i64).sum::<i64>()).collect();
        let (lo, hi) = (*reach.iter().min().unwrap(), *reach.iter().max().unwrap());
        for len in 0..(hi.max(0) as usize + 3) {
            let ok = lo >= 0 && (hi as usize) < len;
            let got = Layout::as_strided(&shape, &strides, offset, len);
            prop_assert_eq!(got.is_ok(), ok, "shape {:?} strides {:?} offset {} len {}", shape, strides, offset, len);
            if let Err(e) = got {
                assert!(matches!(e, Error::OutOfBounds { .. }), "{e}");
            }
        }
    }
}

fn err(r: quill_core::Result<Layout>) -> Error {
    r.expect_err("expected an error")
}

#[test]
fn broadcast_message_names_the_op_and_shapes() {
    let l = Layout::contiguous(&[3, 4]).unwrap();
    assert_eq!(
        err(l.broadcast_to(&[3, 5])).to_string(),
        "broadcast_to: cannot broadcast [3, 4] to [3, 5] (dim 1: 4 vs 5)"
    );
    let m = err(l.broadcast_to(&[4])).to_string();
    assert!(
        m.starts_with("broadcast_to: cannot broadcast [3, 4] to [4]"),
        "{m}"
    );
    assert!(matches!(
        err(l.broadcast_to(&[2, 3, 1])),
        Error::Broadcast { .. }
    ));
}

#[test]
fn axis_messages_name_the_op_axis_and_rank() {
    let l = Layout::contiguous(&[2, 3]).unwrap();
    assert_eq!(
        err(l.transpose(0, 5)).to_string(),
        "transpose: axis 5 is out of range for an array of rank 2 (valid: -2..=1)"
    );
    assert_eq!(
        err(l.unsqueeze(-4)).to_string(),
        "unsqueeze: axis -4 is out of range for an array of rank 2 (valid: -3..=2)"
    );
    assert!(matches!(
        err(l.flip(&[1, -1])),
        Error::DuplicateAxis {
            op: "flip",
            axis: -1,
            ..
        }
    ));
    assert!(matches!(
        err(l.permute(&[0, 0])),
        Error::DuplicateAxis { op: "permute", .. }
    ));
    let m = err(l.permute(&[0])).to_string();
    assert!(m.starts_with("permute: ") && m.contains("[2, 3]"), "{m}");
    let m = err(l.squeeze(&[1])).to_string();
    assert!(
        m.starts_with("squeeze: ") && m.contains("[2, 3]") && m.contains("axis 1"),
        "{m}"
    );
    // rank 0 has no axis at all
    let s = Layout::contiguous(&[]).unwrap();
    assert!(matches!(
        err(s.transpose(0, 0)),
        Error::AxisOutOfRange { ndim: 0, .. }
    ));
    assert!(s.unsqueeze(0).is_ok() && s.unsqueeze(-1).is_ok());
    assert!(s.unsqueeze(1).is_err() && s.unsqueeze(-2).is_err());
}

#[test]
fn reshape_errors() {
    let l = Layout::contiguous(&[2, 3]).unwrap();
    assert_eq!(
        err(l.reshape(&[4, 2])).to_string(),
        "view: cannot reshape an array of shape [2, 3] (6 elements) into [4, 2] (8 elements)"
    );
    assert!(matches!(
        err(l.reshape(&[-1, -1])),
        Error::InvalidArgument { op: "view", .. }
    ));
    assert!(matches!(
        err(l.reshape(&[-2, -3])),
        Error::InvalidArgument { .. }
    ));
    assert!(matches!(
        err(l.reshape(&[4, -1])),
        Error::ReshapeSize { .. }
    ));
    assert!(matches!(
        err(l.reshape(&[isize::MAX, isize::MAX])),
        Error::Overflow { .. }
    ));
    // usize::MAX / 2 + 1 does not fit in isize: as a dim it reads as a negative number
    assert!(l.reshape(&[(usize::MAX / 2 + 1) as isize, 2]).is_err());
    let t = l.transpose(0, 1).unwrap();
    let e = err(t.reshape(&[6]));
    assert!(matches!(e, Error::ReshapeNeedsCopy { .. }));
    assert_eq!(
        e.to_string(),
        "view: no view of shape [6] exists for the layout shape [3, 2] strides [1, 3]; call reshape (which copies) or compact() first"
    );
    // an empty array: -1 next to a zero dim cannot be inferred, and counts must still match
    let z = Layout::contiguous(&[0, 3]).unwrap();
    assert!(z.reshape(&[0, -1]).is_err());
    assert!(z.reshape(&[-1, 3]).is_ok());
    assert!(z.reshape(&[1, 2]).is_err());
}

#[test]
fn reshape_of_an_empty_array_to_an_overflowing_shape_is_an_error() {
    // [0] has 0 elements and so does [0, 2^62, 4]; but no layout of that shape may exist, as
    // Layout::contiguous refuses it (a later op would overflow counting its elements).
    let z = Layout::contiguous(&[0]).unwrap();
    assert!(Layout::contiguous(&[0, 1 << 62, 4]).is_err());
    assert!(matches!(
        z.reshape(&[0, 1 << 62, 4]),
        Err(Error::Overflow { .. })
    ));
    assert!(z.reshape(&[1 << 62, 4, 0]).is_err());
}

#[test]
fn slice_errors() {
    let l = Layout::contiguous(&[2, 3]).unwrap();
    let e = err(l.slice(&s![3;2]));
    assert!(
        matches!(e, Error::InvalidArgument { op: "slice", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("entry 0 is not a range"), "{e}");
    let e = err(l.slice(&s![.., NewAxis;2]));
    assert!(e.to_string().contains("entry 1 is not a range"), "{e}");
    assert!(l.slice(&s![Ellipsis;-1]).is_err());
    let e = err(l.slice(&s![..;0]));
    assert!(e.to_string().contains("step cannot be zero"), "{e}");
    assert!(err(l.slice(&s![0, 0, 0]))
        .to_string()
        .contains("too many indices"));
    assert!(l.slice(&s![NewAxis, 0, NewAxis, 0, NewAxis]).is_ok());
    assert!(err(l.slice(&s![Ellipsis, 0, Ellipsis]))
        .to_string()
        .contains("ellipsis"));
    assert_eq!(
        err(l.slice(&s![.., 3])).to_string(),
        "slice: index 3 is out of range for axis 1 with size 3"
    );
    assert!(matches!(
        err(l.slice(&s![-3])),
        Error::IndexOutOfRange {
            index: -3,
            axis: 0,
            size: 2,
            ..
        }
    ));
    assert!(l.slice(&[SliceArg::Index(isize::MIN)]).is_err());
    assert!(l.slice(&[SliceArg::Index(isize::MAX)]).is_err());
    // an empty axis has no index at all, but any range works
    let z = Layout::contiguous(&[0, 2]).unwrap();
    assert!(z.slice(&s![0]).is_err() && z.slice(&s![-1]).is_err());
    assert!(z.slice(&s![5..;-3, 1]).is_ok());
}

#[test]
fn as_strided_errors() {
    let e = err(Layout::as_strided(&[2, 3], &[3], 0, 6));
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "as_strided",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        err(Layout::as_strided(&[2, 3], &[3, 1], 1, 6)).to_string(),
        "as_strided: layout shape [2, 3] strides [3, 1] offset 1 reaches offsets 1..=6, outside the buffer of 6 elements"
    );
    assert!(matches!(
        err(Layout::as_strided(&[2, 3], &[-3, 1], 2, 6)),
        Error::OutOfBounds { .. }
    ));
    assert!(Layout::as_strided(&[2, 3], &[-3, 1], 3, 6).is_ok());
    assert!(matches!(
        err(Layout::as_strided(&[usize::MAX, 2], &[0, 0], 0, 1)),
        Error::Overflow { .. }
    ));
    // an empty layout reaches nothing, but its offset must still lie within (or at the end of)
    // the buffer
    assert!(Layout::as_strided(&[0, 3], &[-100, 100], 4, 4).is_ok());
    assert!(Layout::as_strided(&[0, 3], &[1, 1], 5, 4).is_err());
    // rank 0: the offset itself must be inside
    assert!(Layout::as_strided(&[], &[], 3, 4).is_ok());
    assert!(Layout::as_strided(&[], &[], 4, 4).is_err());
    // extreme strides do not wrap around into the buffer
    assert!(Layout::as_strided(&[3], &[isize::MAX], 0, 1 << 40).is_err());
    assert!(Layout::as_strided(&[2, 2], &[isize::MIN, isize::MIN], 1 << 40, 1 << 41).is_err());
    assert!(Layout::as_strided(&[2, 2], &[isize::MIN, 1], 1 << 40, 1 << 41).is_err());
}

#[test]
fn views_near_the_top_of_the_address_space_do_not_overflow() {
    // No buffer holds more than isize::MAX elements. A layout that claims one is either refused or
    // must keep working: its views are errors or layouts, never an arithmetic overflow.
    let top = isize::MAX as usize;
    let mut accepted = 0;
    for (shape, strides, offset, len) in [
        (vec![2usize], vec![1isize], top - 2, usize::MAX),
        (vec![2, 3], vec![-3, -1], top - 1, usize::MAX),
        (vec![2usize], vec![1isize], top - 1, usize::MAX),
        (vec![2], vec![1], top, usize::MAX),
        (vec![3], vec![isize::MAX], 0, usize::MAX),
        (vec![2, 2], vec![-1, 1], top, usize::MAX),
    ] {
        if let Ok(l) = Layout::as_strided(&shape, &strides, offset, len) {
            let f = l.flip(&[0]);
            let s = l.slice(&[SliceArg::range(None, None, -1)]);
            let t = Table::strided(&shape, &strides, offset);
            assert_eq!(
                f.map(|f| f.offsets().collect::<Vec<_>>()).ok(),
                Some(t.flip(&[0]).vals.clone())
            );
            assert_eq!(
                s.map(|s| s.offsets().collect::<Vec<_>>()).ok(),
                Some(t.flip(&[0]).vals)
            );
            accepted += 1;
        }
    }
    assert!(accepted >= 2);
}
