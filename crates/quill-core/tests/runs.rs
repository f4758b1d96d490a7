//! `Runs` / `Offsets` (the one loop walker) against a naive oracle: every multi-index of the
//! shape enumerated, each operand's offset computed by the dot product with its strides (in
//! i128). Random raw parts of rank 0..8 with negative, zero (broadcast) and huge strides, size-0
//! and size-1 dims, 1..4 operands, arbitrary element ranges; random splits of the whole range
//! into chunks must concatenate to the whole sequence. Runs must be the maximal stretches of the
//! innermost dim inside the range. Also: plans of real layouts (`LoopPlan::runs`, `runs_of`) and
//! `Layout::offsets`.

use proptest::prelude::*;
use quill_core::runs::unravel;
use quill_core::{Layout, LoopPlan, Run, Runs};
use quill_test_support::{all_indices, numel, random_view, Prng};

/// Random raw parts: shape, per-operand strides and start offsets that keep every reachable
/// offset non-negative.
struct Parts<const N: usize> {
    shape: Vec<usize>,
    strides: [Vec<isize>; N],
    offsets: [usize; N],
}

fn random_parts<const N: usize>(rng: &mut Prng) -> Parts<N> {
    let rank = rng.below(9);
    let shape = rng.shape(rank, 4096);
    let strides: [Vec<isize>; N] = std::array::from_fn(|_| {
        (0..rank)
            .map(|_| match rng.below(8) {
                0 => 0,
                1 => rng.int::<i64>(-(1 << 40), 1 << 40) as isize,
                2 => 1,
                3 => -1,
                _ => rng.int::<i64>(-50, 50) as isize,
            })
            .collect()
    });
    let offsets: [usize; N] = std::array::from_fn(|k| {
        // enough to keep the lowest reachable offset >= 0, plus some slack
        let low: i128 = shape
            .iter()
            .zip(&strides[k])
            .map(|(&d, &s)| (d.saturating_sub(1) as i128 * s as i128).min(0))
            .sum();
        (-low) as usize + rng.below(100)
    });
    Parts {
        shape,
        strides,
        offsets,
    }
}

fn oracle<const N: usize>(p: &Parts<N>) -> Vec<[usize; N]> {
    all_indices(&p.shape)
        .iter()
        .map(|idx| {
            std::array::from_fn(|k| {
                let v = p.offsets[k] as i128
                    + idx
                        .iter()
                        .zip(&p.strides[k])
                        .map(|(&i, &s)| i as i128 * s as i128)
                        .sum::<i128>();
                usize::try_from(v).expect("reachable offsets are non-negative")
            })
        })
        .collect()
}

fn runs_of<'a, const N: usize>(p: &'a Parts<N>, a: usize, b: usize) -> Runs<'a, N> {
    Runs::from_parts(
        &p.shape,
        std::array::from_fn(|k| p.strides[k].as_slice()),
        p.offsets,
        a..b,
    )
}

/// Expands the runs of `a..b`, checking their positions, lengths and maximality on the way.
fn expand<const N: usize>(p: &Parts<N>, a: usize, b: usize) -> Vec<[usize; N]> {
    let runs = runs_of(p, a, b);
    let st = runs.inner_strides();
    let inner = p.shape.last().copied().unwrap_or(1);
    if !p.shape.is_empty() {
        let want: [isize; N] = std::array::from_fn(|k| *p.strides[k].last().unwrap());
        assert_eq!(st, want);
    } else {
        assert_eq!(st, [0; N]);
    }
    let mut out = Vec::new();
    let mut pos = a;
    for Run {
        pos: rp,
        offsets,
        len,
    } in runs
    {
        assert_eq!(rp, pos, "runs must be consecutive");
        assert!(len >= 1);
        // maximal: a run ends at the end of its row or of the range, and starts at the start
        // of its row or of the range
        let row_end = (rp / inner + 1) * inner;
        assert_eq!(len, row_end.min(b) - rp, "run at {rp} of {:?}", p.shape);
        assert!(rp == a || rp % inner == 0);
        for i in 0..len {
            out.push(std::array::from_fn(|k| {
                (offsets[k] as i128 + i as i128 * st[k] as i128) as usize
            }));
        }
        pos += len;
    }
    assert_eq!(pos, b.max(a));
    out
}

fn check<const N: usize>(rng: &mut Prng) {
    let p = random_parts::<N>(rng);
    let want = oracle(&p);
    let n = numel(&p.shape);
    assert_eq!(want.len(), n);
    // the whole range, as runs and element by element
    assert_eq!(expand(&p, 0, n), want, "{:?} {:?}", p.shape, p.strides);
    let elems: Vec<[usize; N]> = runs_of(&p, 0, n).elements().collect();
    assert_eq!(elems, want);
    assert_eq!(runs_of(&p, 0, n).elements().len(), n);
    // arbitrary sub-ranges
    for _ in 0..4 {
        let a = rng.below(n + 1);
        let b = a + rng.below(n - a + 1);
        assert_eq!(expand(&p, a, b), want[a..b], "{a}..{b} of {:?}", p.shape);
        let mut it = runs_of(&p, a, b).elements();
        assert_eq!(it.len(), b - a);
        if b > a {
            it.next();
            assert_eq!(it.len(), b - a - 1);
        }
        assert_eq!(it.collect::<Vec<_>>(), want[(a + 1).min(b)..b]);
    }
    // random chunk splits concatenate to the whole sequence
    let mut cuts: Vec<usize> = (0..rng.below(6)).map(|_| rng.below(n + 1)).collect();
    cuts.push(0);
    cuts.push(n);
    cuts.sort();
    let mut joined = Vec::new();
    for w in cuts.windows(2) {
        joined.extend(expand(&p, w[0], w[1]));
    }
    assert_eq!(joined, want);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn runs_match_the_oracle_for_raw_parts(seed in any::<u64>()) {
        let mut rng = Prng::from_state(seed);
        check::<1>(&mut rng);
        check::<2>(&mut rng);
        check::<3>(&mut rng);
        check::<4>(&mut rng);
    }

    /// Plans of realistic views broadcast together: each operand's runs reproduce its layout's
    /// offsets, also for a subset of operands and any chunking.
    #[test]
    fn plan_runs_follow_every_operand(seed in any::<u64>()) {
        let mut rng = Prng::from_state(seed);
        let rank = rng.below(9);
        let target = rng.shape(rank, 4096);
        let ls: Vec<Layout> = (0..3)
            .map(|_| {
                let own: Vec<usize> = target
                    .iter()
                    .map(|&d| if rng.odds(1, 4) { 1 } else { d })
                    .collect();
                random_view(&mut rng, &own).0.broadcast_to(&target).unwrap()
            })
            .collect();
        let refs: Vec<&Layout> = ls.iter().collect();
        let plan = LoopPlan::new(&refs);
        let n = plan.numel();
        let want: Vec<Vec<usize>> = ls.iter().map(naive_offsets).collect();
        let all: Vec<[usize; 3]> = plan.runs::<3>(0..n).elements().collect();
        for k in 0..3 {
            assert_eq!(all.iter().map(|t| t[k]).collect::<Vec<_>>(), want[k]);
        }
        let a = rng.below(n + 1);
        let b = a + rng.below(n - a + 1);
        let sub: Vec<[usize; 2]> = plan.runs_of([2, 0], a..b).elements().collect();
        let exp: Vec<[usize; 2]> = (a..b).map(|i| [want[2][i], want[0][i]]).collect();
        assert_eq!(sub, exp);
        for (k, l) in ls.iter().enumerate() {
            assert_eq!(l.offsets().collect::<Vec<_>>(), want[k]);
            assert_eq!(l.offsets().len(), n);
        }
    }
}

/// A layout's offsets by the dot product (independent of `Layout::offsets`).
fn naive_offsets(l: &Layout) -> Vec<usize> {
    all_indices(l.shape())
        .iter()
        .map(|idx| {
            (l.offset() as isize
                + idx
                    .iter()
                    .zip(l.strides())
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>()) as usize
        })
        .collect()
}

#[test]
fn fixed_cases() {
    // rank 0: one run of one element, inner strides 0
    let r: Vec<Run<2>> = Runs::from_parts(&[], [&[], &[]], [7, 9], 0..1).collect();
    assert_eq!(
        r,
        vec![Run {
            pos: 0,
            offsets: [7, 9],
            len: 1
        }]
    );
    assert_eq!(Runs::<1>::from_parts(&[], [&[]], [3], 0..0).count(), 0);
    // size 0: nothing, whatever the strides
    assert_eq!(
        Runs::<1>::from_parts(&[3, 0, 2], [&[5, 7, -1]], [0], 0..0).count(),
        0
    );
    // a transposed 3x2 matrix: three rows of two, then a chunk starting mid-row
    let shape = [2usize, 3];
    let st: &[isize] = &[1, 2];
    let runs: Vec<Run<1>> = Runs::from_parts(&shape, [st], [0], 1..6).collect();
    assert_eq!(
        runs,
        vec![
            Run {
                pos: 1,
                offsets: [2],
                len: 2
            },
            Run {
                pos: 3,
                offsets: [1],
                len: 3
            },
        ]
    );
    // a flipped, broadcast operand beside a contiguous one
    let a: &[isize] = &[0, -1];
    let b: &[isize] = &[3, 1];
    let offs: Vec<[usize; 2]> = Runs::from_parts(&shape, [a, b], [2, 0], 0..6)
        .elements()
        .collect();
    assert_eq!(offs, vec![[2, 0], [1, 1], [0, 2], [2, 3], [1, 4], [0, 5]]);
    assert_eq!(unravel(&[2, 3, 4], 23), vec![1, 2, 3]);
    assert_eq!(unravel(&[], 0), Vec::<usize>::new());
}

#[test]
#[should_panic(expected = "outside")]
fn a_range_past_the_end_panics() {
    let _ = Runs::<1>::from_parts(&[2, 2], [&[2, 1]], [0], 1..5);
}

/// Deep shapes (rank 12, several carried dims) walk like shallow ones.
#[test]
fn deep_shapes_walk_like_shallow_ones() {
    let shape = vec![2usize; 12];
    let l = Layout::contiguous(&shape)
        .unwrap()
        .flip(&[0, 3, 11])
        .unwrap();
    let want = naive_offsets(&l);
    assert_eq!(l.offsets().collect::<Vec<_>>(), want);
    let n = want.len();
    let mut joined = Vec::new();
    for c in 0..7 {
        let (a, b) = (c * n / 7, (c + 1) * n / 7);
        joined.extend(
            Runs::from_parts(l.shape(), [l.strides()], [l.offset()], a..b)
                .elements()
                .map(|[o]| o),
        );
    }
    assert_eq!(joined, want);
}
