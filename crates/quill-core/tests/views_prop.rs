//! Property tests over random chains of view ops (rank 0 up to 8, size-0 and size-1 dims, at most
//! 4096 elements): permute, transpose, broadcast_to, squeeze/unsqueeze, flip, slicing with random
//! bounds and steps (negative, clamped, huge), integer indices, new axes, ellipsis, and reshape to
//! random factorisations with `-1`. Every step is compared with the view oracle
//! (`quill_test_support::step`, which also checks that a refused reshape really has no strided
//! view), and every layout is checked for the invariants: offsets inside the buffer,
//! `is_contiguous` iff the offsets are consecutive, `offset_bounds` = (min, max),
//! `is_non_overlapping` implies distinct offsets.

use proptest::prelude::*;
use quill_core::{Error, Layout, SliceArg};
use quill_test_support::{check_invariants, numel, step, table_of, Op, Prng, Table};

const MAX_RANK: usize = 8;
const MAX_NUMEL: usize = 4096;

/// A random starting layout and its oracle table: contiguous, contiguous at an offset, or raw
/// `as_strided` parts (any signs, zero strides, gaps) placed inside a buffer with slack.
fn random_start(rng: &mut Prng) -> (Layout, Table, usize) {
    let rank = rng.below(6);
    let shape = rng.shape(rank, 1024);
    match rng.below(3) {
        0 => (
            Layout::contiguous(&shape).unwrap(),
            Table::contiguous(&shape),
            numel(&shape),
        ),
        1 => {
            let off = rng.below(10);
            let len = numel(&shape) + off + rng.below(3);
            let strides = Layout::contiguous(&shape).unwrap().strides().to_vec();
            (
                Layout::as_strided(&shape, &strides, off, len).unwrap(),
                Table::strided(&shape, &strides, off),
                len,
            )
        }
        _ => {
            let strides: Vec<isize> = (0..rank).map(|_| rng.int(-7, 7) as isize).collect();
            // Place the lowest reachable offset at `slack`.
            let mut lo: i64 = 0;
            let mut hi: i64 = 0;
            if numel(&shape) > 0 {
                for (&d, &s) in shape.iter().zip(&strides) {
                    let e = (d as i64 - 1) * s as i64;
                    if e < 0 {
                        lo += e
                    } else {
                        hi += e
                    }
                }
            }
            let off = (rng.below(4) as i64 - lo) as usize;
            let len = (off as i64 + hi) as usize + 1 + rng.below(3);
            (
                Layout::as_strided(&shape, &strides, off, len).unwrap(),
                Table::strided(&shape, &strides, off),
                len,
            )
        }
    }
}

/// A random valid op for a layout of `shape` (occasionally one the oracle rejects, e.g. a reshape
/// with a bad size, which must then be rejected by the code too). `None` when the kind does not
/// apply (it would exceed the rank or size limits).
fn random_op(rng: &mut Prng, kind: u8, shape: &[usize]) -> Option<Op> {
    let r = shape.len();
    let n = numel(shape);
    let axes = |rng: &mut Prng, list: Vec<usize>| -> Vec<isize> {
        let mut list = list;
        rng.shuffle(&mut list);
        list.into_iter().map(|a| rng.alias(a, r)).collect()
    };
    Some(match kind {
        0 => {
            let p = rng.permutation(r);
            let mut a = axes(rng, p);
            // now and then drop or repeat an axis, so the wrong-argument path runs too
            if rng.odds(1, 16) {
                if r > 1 && rng.odds(1, 2) {
                    a[0] = a[1];
                } else if r > 0 {
                    a.pop();
                } else {
                    a.push(0);
                }
            }
            Op::Permute(a)
        }
        1 => {
            if r == 0 {
                return None;
            }
            let (a, b) = (rng.below(r), rng.below(r));
            Op::Transpose(rng.alias(a, r), rng.alias(b, r))
        }
        2 => {
            let lead = rng.below((MAX_RANK - r).min(2) + 1);
            let mut t: Vec<usize> = (0..lead).map(|_| rng.dim()).collect();
            t.extend(shape.iter().map(|&d| {
                if d == 1 && rng.odds(1, 2) {
                    rng.dim()
                } else {
                    d
                }
            }));
            if t.iter().product::<usize>() > MAX_NUMEL {
                return None;
            }
            Op::BroadcastTo(t)
        }
        3 => {
            let ones: Vec<usize> = (0..r)
                .filter(|&a| shape[a] == 1 && rng.odds(1, 2))
                .collect();
            Op::Squeeze(axes(rng, ones))
        }
        4 => Op::SqueezeAll,
        5 => {
            if r >= MAX_RANK {
                return None;
            }
            let a = rng.below(r + 1);
            Op::Unsqueeze(rng.alias(a, r + 1))
        }
        6 => {
            let sub: Vec<usize> = (0..r).filter(|_| rng.odds(1, 2)).collect();
            Op::Flip(axes(rng, sub))
        }
        7 | 8 => Op::Slice(random_slice(rng, shape)?),
        9 => {
            // an integer index into a non-empty axis, written plainly or after an ellipsis
            let cands: Vec<usize> = (0..r).filter(|&a| shape[a] > 0).collect();
            if cands.is_empty() {
                return None;
            }
            let a = cands[rng.below(cands.len())];
            let i = rng.below(shape[a]) as isize;
            let i = if rng.odds(1, 2) {
                i
            } else {
                i - shape[a] as isize
            };
            let mut args = vec![SliceArg::FULL; a];
            args.push(SliceArg::Index(i));
            if rng.odds(1, 2) {
                args = vec![SliceArg::Ellipsis, SliceArg::Index(i)];
                args.extend(vec![SliceArg::FULL; r - a - 1]);
            }
            Op::Slice(args)
        }
        10 | 11 => Op::Reshape(random_reshape(rng, n)?),
        _ => {
            // a flatten, or a reshape with a deliberately wrong element count
            if rng.odds(3, 4) {
                Op::Reshape(vec![-1])
            } else {
                Op::Reshape(vec![n as isize + 1 + rng.below(3) as isize])
            }
        }
    })
}

fn random_bound(rng: &mut Prng, n: usize) -> Option<isize> {
    let n = n as i64;
    match rng.below(12) {
        0..=5 => None,
        6 => Some(if rng.odds(1, 2) {
            isize::MAX
        } else {
            isize::MIN
        }),
        _ => Some(rng.int(-n - 3, n + 3) as isize),
    }
}

/// A random NumPy index expression for `shape` that stays within the rank limit.
fn random_slice(rng: &mut Prng, shape: &[usize]) -> Option<Vec<SliceArg>> {
    let r = shape.len();
    let consumed = rng.below(r + 1);
    let mut args = Vec::new();
    let mut out_rank = 0;
    let mut new_axes = 0;
    for &n in &shape[..consumed] {
        while out_rank + new_axes < MAX_RANK && rng.odds(1, 6) {
            args.push(SliceArg::NewAxis);
            new_axes += 1;
        }
        if n > 0 && rng.odds(1, 5) {
            let i = rng.below(n) as isize;
            args.push(SliceArg::Index(if rng.odds(1, 2) {
                i
            } else {
                i - n as isize
            }));
        } else {
            let step = match rng.below(12) {
                0 => isize::MAX,
                1 => isize::MIN,
                k => [1, 1, 1, 2, 3, 5, -1, -1, -2, -3][k - 2],
            };
            if rng.odds(1, 2) {
                args.push(SliceArg::range(None, None, step));
            } else {
                args.push(SliceArg::range(
                    random_bound(rng, n),
                    random_bound(rng, n),
                    step,
                ));
            }
            out_rank += 1;
        }
    }
    // the axes not consumed stay (they come from the ellipsis or the implicit tail)
    out_rank += r - consumed;
    if out_rank + new_axes > MAX_RANK {
        return None;
    }
    if rng.odds(1, 3) {
        let at = rng.below(args.len() + 1);
        args.insert(at, SliceArg::Ellipsis);
    }
    Some(args)
}

/// A random shape spec with `numel` elements: a random factorisation (with size-1 dims, and a
/// zero dim for an empty array), sometimes with one dim replaced by -1.
fn random_reshape(rng: &mut Prng, numel: usize) -> Option<Vec<isize>> {
    let rank = rng.below(7);
    let mut dims = vec![1usize; rank];
    if numel == 0 {
        if rank == 0 {
            return None;
        }
        for d in dims.iter_mut() {
            *d = rng.below(4);
        }
        dims[rng.below(rank)] = 0;
    } else {
        if rank == 0 {
            return (numel == 1).then(Vec::new);
        }
        // deal the prime factors of numel out to random dims
        let mut m = numel;
        let mut p = 2;
        while m > 1 {
            while m.is_multiple_of(p) {
                dims[rng.below(rank)] *= p;
                m /= p;
            }
            p += 1;
        }
    }
    let mut spec: Vec<isize> = dims.iter().map(|&d| d as isize).collect();
    if rng.odds(1, 3) {
        spec[rng.below(rank)] = -1;
    }
    Some(spec)
}

fn run_chain(seed: u64, kinds: &[(u8, u64)]) -> (usize, usize) {
    let mut rng = Prng::from_state(seed);
    let (mut l, mut t, len) = random_start(&mut rng);
    check_invariants(&l, len);
    let (mut applied, mut refused_reshapes) = (0, 0);
    let mut log = vec![format!("start {l:?}")];
    // Views of a dense start made without broadcasting never overlap, and the sufficient test of
    // `is_non_overlapping` must see that.
    let mut dense = l.is_contiguous();
    for &(kind, s) in kinds {
        let mut rng = Prng::from_state(s);
        let Some(op) = random_op(&mut rng, kind, l.shape()) else {
            continue;
        };
        log.push(format!("{op:?}"));
        let outcome = std::panic::catch_unwind(|| step(&l, &t, &op));
        let res = match outcome {
            Ok(r) => r,
            Err(e) => {
                eprintln!("chain so far:\n  {}", log.join("\n  "));
                std::panic::resume_unwind(e)
            }
        };
        match res {
            Some((l2, t2)) => {
                assert!(l2.ndim() <= MAX_RANK && l2.numel() <= MAX_NUMEL);
                check_invariants(&l2, len);
                if let Op::BroadcastTo(_) = op {
                    dense = false;
                }
                assert!(
                    !dense || l2.is_non_overlapping(),
                    "{l2:?} from {}",
                    log.join(", ")
                );
                l = l2;
                t = t2;
                applied += 1;
            }
            None => {
                // `step` has checked the refusal; count the ones that were "needs a copy"
                if matches!(op.on_layout(&l), Err(Error::ReshapeNeedsCopy { .. })) {
                    refused_reshapes += 1;
                }
            }
        }
        assert_eq!(table_of(&l), t);
    }
    (applied, refused_reshapes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_view_chains_match_the_oracle(
        seed in any::<u64>(),
        kinds in proptest::collection::vec((0u8..13, any::<u64>()), 0..16),
    ) {
        run_chain(seed, &kinds);
    }

    /// Reshape from raw strided layouts (overlapping ones included) to every kind of target: a view
    /// exactly when the oracle finds strides that reproduce the offsets.
    #[test]
    fn reshape_of_raw_layouts_is_a_view_iff_strides_exist(seed in any::<u64>()) {
        let mut rng = Prng::from_state(seed);
        let (l, t, len) = random_start(&mut rng);
        for _ in 0..8 {
            if let Some(spec) = random_reshape(&mut rng, l.numel()) {
                if let Some((l2, _)) = step(&l, &t, &Op::Reshape(spec)) {
                    check_invariants(&l2, len);
                }
            }
        }
        if l.is_contiguous() {
            prop_assert!(l.reshape(&[-1]).is_ok());
        }
    }
}

/// The generators must reach the interesting cases; a chain test whose ops were mostly skipped
/// or whose reshapes always succeeded would prove little.
#[test]
fn generators_cover_the_interesting_cases() {
    let (mut applied, mut refused) = (0, 0);
    let mut max_rank = 0;
    let mut ranks = [0usize; MAX_RANK + 1];
    let mut empty = 0;
    for seed in 0..300u64 {
        let mut rng = Prng::from_state(seed.wrapping_mul(7919));
        let kinds: Vec<(u8, u64)> = (0..12)
            .map(|_| (rng.below(13) as u8, rng.next_u64()))
            .collect();
        let (a, r) = run_chain(seed, &kinds);
        applied += a;
        refused += r;
        // replay to record the final ranks reached
        let mut rng = Prng::from_state(seed);
        let (mut l, _, _) = random_start(&mut rng);
        for &(kind, s) in &kinds {
            let mut rng = Prng::from_state(s);
            if let Some(op) = random_op(&mut rng, kind, l.shape()) {
                if let Ok(l2) = op.on_layout(&l) {
                    l = l2;
                }
            }
            max_rank = max_rank.max(l.ndim());
            ranks[l.ndim()] += 1;
            if l.numel() == 0 {
                empty += 1;
            }
        }
    }
    eprintln!(
        "applied {applied} refused {refused} max_rank {max_rank} ranks {ranks:?} empty {empty}"
    );
    assert!(applied > 2000, "only {applied} ops applied");
    assert!(refused > 30, "only {refused} reshapes needed a copy");
    assert!(max_rank >= 7, "max rank {max_rank}");
    assert!(ranks[0] > 0 && empty > 50, "ranks {ranks:?}, empty {empty}");
}
