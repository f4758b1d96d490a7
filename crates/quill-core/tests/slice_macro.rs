//! The `s![..]` macro: each form it accepts builds the `SliceArg` values written out by hand
//! (ranges of every kind with negative bounds, `;step` on ranges, `Ellipsis`, `NewAxis`, indices
//! of every integer type, variables and expressions), and the built expressions select what
//! Python selects (checked against the slice oracle).

use quill_core::{s, Ellipsis, Layout, NewAxis, SliceArg};
use quill_test_support::{py_slice_positions, Table};

fn r(start: Option<isize>, stop: Option<isize>, step: isize) -> SliceArg {
    SliceArg::Range { start, stop, step }
}

/// A macro expression with the range it stands for.
type Case = ([SliceArg; 1], Option<isize>, Option<isize>, isize);

// `1..=-2` and `5..1` are empty as Rust ranges, and clippy denies them, but as slice syntax they
// mean Python's `1:-1` and `5:1:-1`.
#[allow(clippy::reversed_empty_ranges)]
#[test]
fn builds_the_written_out_arguments() {
    use SliceArg::{Index, NewAxis as N};
    assert_eq!(
        s![1.., ..;-1, 3, NewAxis],
        [r(Some(1), None, 1), r(None, None, -1), Index(3), N]
    );
    assert_eq!(s![..], [r(None, None, 1)]);
    assert_eq!(s![..;2], [r(None, None, 2)]);
    assert_eq!(s![1..5;-1], [r(Some(1), Some(5), -1)]);
    assert_eq!(s![-3..-1], [r(Some(-3), Some(-1), 1)]);
    assert_eq!(s![..-1], [r(None, Some(-1), 1)]);
    assert_eq!(s![-2..], [r(Some(-2), None, 1)]);
    assert_eq!(s![-2..;-2], [r(Some(-2), None, -2)]);
    assert_eq!(s![Ellipsis, 0], [SliceArg::Ellipsis, Index(0)]);
    assert_eq!(s![NewAxis, Ellipsis, NewAxis], [N, SliceArg::Ellipsis, N]);
    assert_eq!(s![-1], [Index(-1)]);
    assert_eq!(s![0,], [Index(0)]);
    // inclusive ranges: `..=k` stops after k; `..=-1` runs to the end
    assert_eq!(s![1..=3], [r(Some(1), Some(4), 1)]);
    assert_eq!(s![..=2], [r(None, Some(3), 1)]);
    assert_eq!(s![..=-1], [r(None, None, 1)]);
    assert_eq!(s![1..=-2], [r(Some(1), Some(-1), 1)]);
    assert_eq!(s![-1..=-1], [r(Some(-1), None, 1)]);
}

#[test]
fn integer_types_variables_and_expressions() {
    use SliceArg::Index;
    assert_eq!(
        s![2usize, 1usize..3usize, 4usize..],
        [Index(2), r(Some(1), Some(3), 1), r(Some(4), None, 1)]
    );
    assert_eq!(
        s![-1i64, -3i64.., ..7i64],
        [Index(-1), r(Some(-3), None, 1), r(None, Some(7), 1)]
    );
    assert_eq!(
        s![5u32, 2isize..=4isize],
        [Index(5), r(Some(2), Some(5), 1)]
    );
    assert_eq!(
        s![i64::MIN, usize::MAX],
        [Index(isize::MIN), Index(isize::MAX)]
    );
    assert_eq!(s![..usize::MAX], [r(None, Some(isize::MAX), 1)]);
    let (a, b, k) = (1usize, 6usize, 2usize);
    assert_eq!(
        s![a..b;k, ..;-(k as isize)],
        [r(Some(1), Some(6), 2), r(None, None, -2)]
    );
    let i: i32 = -2;
    assert_eq!(s![i, i + 1..;k * 2], [Index(-2), r(Some(-1), None, 4)]);
    // a step on something that is not a range is kept for `slice` to reject (step 0 marker)
    for bad in [s![3;2][0], s![NewAxis;1][0], s![Ellipsis;-1][0]] {
        assert!(matches!(bad, SliceArg::Range { step: 0, .. }), "{bad:?}");
    }
    // an empty expression is allowed and selects everything
    let l = Layout::contiguous(&[2, 3]).unwrap();
    assert_eq!(l.slice(&s![]).unwrap(), l);
}

#[allow(clippy::reversed_empty_ranges)]
#[test]
fn macro_ranges_select_what_python_selects() {
    // inclusive and exclusive, negative bounds and steps, on axes of 0 to 7 elements
    for n in 0..=7usize {
        let l = Layout::contiguous(&[n]).unwrap();
        let t = Table::contiguous(&[n]);
        let cases: Vec<Case> = vec![
            (s![1..], Some(1), None, 1),
            (s![..;-1], None, None, -1),
            (s![..;2], None, None, 2),
            (s![1..5;-1], Some(1), Some(5), -1),
            (s![5..1;-1], Some(5), Some(1), -1),
            (s![-3..-1], Some(-3), Some(-1), 1),
            (s![-1..;-2], Some(-1), None, -2),
            (s![..-2;3], None, Some(-2), 3),
        ];
        for (args, start, stop, step) in cases {
            let want = py_slice_positions(start, stop, step, n);
            assert_eq!(
                l.slice(&args).unwrap().offsets().collect::<Vec<_>>(),
                want,
                "{args:?} on {n}"
            );
            assert_eq!(t.slice(&args).unwrap().vals, want);
        }
        // inclusive ranges, against the positions they name
        let incl: Vec<([SliceArg; 1], Vec<usize>)> = vec![
            (s![..=-1], (0..n).collect()),
            (s![..=-2], (0..n.saturating_sub(1)).collect()),
            (s![-1..=-1], (n.saturating_sub(1)..n).collect()),
            (s![1..=2], (1..n.min(3)).collect()),
        ];
        for (args, want) in incl {
            assert_eq!(
                l.slice(&args).unwrap().offsets().collect::<Vec<_>>(),
                want,
                "{args:?} on {n}"
            );
        }
    }
}
