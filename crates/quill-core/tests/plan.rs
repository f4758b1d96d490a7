//! `LoopPlan`: coalescing must preserve every operand's offset sequence (checked both through
//! `offset_of` and by walking the plan's own shape and strides with an independent odometer),
//! must merge whatever can be merged (and nothing else), and `normalize_for(k)` must visit the
//! same (offset_0, offset_1, ...) tuples with operand k's strides positive and sorted descending.
//! Also the fixed cases: contiguous rank 5 -> one dim, permuted -> not, size 0 -> `[0]`, rank 0
//! -> `[]`, and the 32-bit index check at its exact boundary (layouts over huge buffers, no data).

use proptest::prelude::*;
use quill_core::{Layout, LoopPlan};
use quill_test_support::{all_indices, numel, random_view, Prng};

/// The offsets of operand `k` walking `plan.shape` in C order with the plan's strides, computed
/// from multi-indices (not with `offset_of`).
fn walk(plan: &LoopPlan, k: usize) -> Vec<usize> {
    if plan.shape.contains(&0) {
        return vec![];
    }
    all_indices(&plan.shape)
        .iter()
        .map(|idx| {
            let v = plan.offsets[k] as i128
                + idx
                    .iter()
                    .zip(&plan.strides[k])
                    .map(|(&i, &s)| i as i128 * s as i128)
                    .sum::<i128>();
            v as usize
        })
        .collect()
}

/// Every check that holds for any plan of `layouts` (which share a shape).
fn check_plan(layouts: &[&Layout]) -> LoopPlan {
    let plan = LoopPlan::new(layouts);
    let n = numel(layouts[0].shape());
    assert_eq!(plan.strides.len(), layouts.len());
    assert_eq!(plan.offsets.len(), layouts.len());
    assert_eq!(plan.numel(), n, "{plan:?}");
    assert_eq!(plan.ndim(), plan.shape.len());
    if n == 0 {
        assert_eq!(plan.shape, vec![0]);
    } else {
        assert!(
            plan.shape.iter().all(|&d| d > 1),
            "size-1 dims survive in {plan:?}"
        );
        let non1 = layouts[0].shape().iter().filter(|&&d| d != 1).count();
        assert!(plan.ndim() <= non1);
    }
    for (k, l) in layouts.iter().enumerate() {
        assert_eq!(plan.strides[k].len(), plan.ndim());
        let want: Vec<usize> = l.offsets().collect();
        let via_offset_of: Vec<usize> = (0..n).map(|i| plan.offset_of(k, i)).collect();
        assert_eq!(
            via_offset_of, want,
            "operand {k} {l:?} through offset_of of {plan:?}"
        );
        assert_eq!(walk(&plan, k), want, "operand {k} {l:?} walking {plan:?}");
    }
    // Maximal: no adjacent pair left that every operand could merge.
    for d in 1..plan.ndim() {
        let mergeable = plan
            .strides
            .iter()
            .all(|s| s[d - 1] == s[d] * plan.shape[d] as isize);
        assert!(
            !mergeable,
            "dims {} and {d} of {plan:?} could still merge",
            d - 1
        );
    }
    // index32: independent of the plan, from the layouts' own offsets.
    let fits = n <= i32::MAX as usize
        && layouts
            .iter()
            .all(|l| l.offsets().all(|o| o <= i32::MAX as usize));
    assert_eq!(plan.index32, fits, "{plan:?}");
    plan
}

/// The multiset of offset tuples a plan visits.
fn tuples(plan: &LoopPlan) -> Vec<Vec<usize>> {
    let mut t: Vec<Vec<usize>> = (0..plan.numel())
        .map(|i| {
            (0..plan.offsets.len())
                .map(|k| plan.offset_of(k, i))
                .collect()
        })
        .collect();
    t.sort();
    t
}

fn check_normalize(plan: &LoopPlan, layouts: &[&Layout]) {
    for k in 0..layouts.len() {
        let norm = plan.normalize_for(k);
        assert_eq!(norm.numel(), plan.numel());
        assert_eq!(
            tuples(&norm),
            tuples(plan),
            "normalize_for({k}) changed the pairing of {plan:?}"
        );
        for (j, _) in layouts.iter().enumerate() {
            assert_eq!(
                walk(&norm, j),
                (0..norm.numel())
                    .map(|i| norm.offset_of(j, i))
                    .collect::<Vec<_>>()
            );
        }
        if plan.numel() <= 1 {
            continue;
        }
        let s = &norm.strides[k];
        assert!(s.iter().all(|&x| x >= 0), "normalize_for({k}): {norm:?}");
        assert!(
            s.windows(2).all(|w| w[0] >= w[1]),
            "normalize_for({k}) not sorted: {norm:?}"
        );
        if layouts[k].broadcast_dim().is_none() {
            assert!(s.iter().all(|&x| x > 0), "normalize_for({k}): {norm:?}");
        }
        if layouts[k].is_non_overlapping() {
            // a destination that never overlaps is then walked strictly forwards
            let offs: Vec<usize> = (0..norm.numel()).map(|i| norm.offset_of(k, i)).collect();
            assert!(
                offs.windows(2).all(|w| w[0] < w[1]),
                "normalize_for({k}) of {plan:?}: {offs:?}"
            );
            assert!(s.windows(2).all(|w| w[0] > w[1]), "{norm:?}");
        }
    }
}

/// A random target shape and 1 to 3 realistic views broadcast to it (each operand's own shape
/// keeps, drops or squashes to 1 the target's dims).
fn random_operands(rng: &mut Prng) -> Vec<Layout> {
    let rank = rng.below(7);
    let target = rng.shape(rank, 2048);
    let n_ops = 1 + rng.below(3);
    (0..n_ops)
        .map(|_| {
            let drop = if rng.odds(1, 3) {
                rng.below(rank + 1)
            } else {
                0
            };
            let own: Vec<usize> = target[drop..]
                .iter()
                .map(|&d| if rng.odds(1, 5) { 1 } else { d })
                .collect();
            let (l, _) = random_view(rng, &own);
            l.broadcast_to(&target).unwrap()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn plans_preserve_offsets_and_normalize_keeps_pairs(seed in any::<u64>()) {
        let mut rng = Prng::from_state(seed);
        let ops = random_operands(&mut rng);
        let refs: Vec<&Layout> = ops.iter().collect();
        let plan = check_plan(&refs);
        check_normalize(&plan, &refs);
    }

    /// Raw strided operands, overlapping and negative strides included.
    #[test]
    fn plans_of_raw_strided_layouts(seed in any::<u64>()) {
        let mut rng = Prng::from_state(seed);
        let rank = rng.below(6);
        let shape = rng.shape(rank, 1024);
        let ops: Vec<Layout> = (0..1 + rng.below(3)).map(|_| {
            let strides: Vec<isize> = (0..rank).map(|_| rng.int(-6, 6) as isize).collect();
            Layout::as_strided(&shape, &strides, 64 * 6, 64 * 13).unwrap()
        }).collect();
        let refs: Vec<&Layout> = ops.iter().collect();
        let plan = check_plan(&refs);
        check_normalize(&plan, &refs);
    }
}

#[test]
fn a_contiguous_array_coalesces_to_one_dim() {
    let l = Layout::contiguous(&[2, 3, 4, 5, 6]).unwrap();
    let plan = check_plan(&[&l]);
    assert_eq!(plan.shape, vec![720]);
    assert_eq!(plan.strides, vec![vec![1]]);
    // with size-1 dims in between, and a same-shape second operand at an offset
    let a = Layout::contiguous(&[2, 1, 3, 1, 4]).unwrap();
    let b = Layout::as_strided(&[2, 1, 3, 1, 4], &[12, 7, 4, -3, 1], 100, 124).unwrap();
    let plan = check_plan(&[&a, &b]);
    assert_eq!(plan.shape, vec![24]);
    assert_eq!(plan.offsets, vec![0, 100]);
}

#[test]
fn a_permuted_array_does_not_fully_coalesce() {
    let l = Layout::contiguous(&[2, 3, 4, 5, 6])
        .unwrap()
        .permute(&[0, 1, 2, 4, 3])
        .unwrap();
    let plan = check_plan(&[&l]);
    // dims 0..3 stay contiguous among themselves (stride 120, 40, 30 -> one dim of 24 with
    // stride 30); the swapped pair cannot merge with anything.
    assert_eq!(plan.shape, vec![24, 6, 5]);
    assert_eq!(plan.strides, vec![vec![30, 1, 6]]);
    // contiguous and transposed operands together: only what both allow merges
    let a = Layout::contiguous(&[4, 5]).unwrap();
    let b = Layout::contiguous(&[5, 4])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let plan = check_plan(&[&a, &b]);
    assert_eq!(plan.shape, vec![4, 5]);
    assert_eq!(plan.strides, vec![vec![5, 1], vec![1, 4]]);
}

#[test]
fn broadcast_and_flipped_operands_merge_when_all_allow() {
    // A scalar broadcast against a contiguous array: stride 0 continues stride 0.
    let a = Layout::contiguous(&[4, 5]).unwrap();
    let s = Layout::contiguous(&[])
        .unwrap()
        .broadcast_to(&[4, 5])
        .unwrap();
    let plan = check_plan(&[&a, &s]);
    assert_eq!(plan.shape, vec![20]);
    assert_eq!(plan.strides, vec![vec![1], vec![0]]);
    // A row broadcast down the columns cannot merge (stride 0 vs 1).
    let r = Layout::contiguous(&[5])
        .unwrap()
        .broadcast_to(&[4, 5])
        .unwrap();
    let plan = check_plan(&[&a, &r]);
    assert_eq!(plan.shape, vec![4, 5]);
    // A fully reversed contiguous array is one dim with stride -1.
    let f = Layout::contiguous(&[3, 4]).unwrap().flip(&[0, 1]).unwrap();
    let plan = check_plan(&[&f]);
    assert_eq!(plan.shape, vec![12]);
    assert_eq!(plan.strides, vec![vec![-1]]);
    assert_eq!(plan.offsets, vec![11]);
    let norm = plan.normalize_for(0);
    assert_eq!(norm.strides, vec![vec![1]]);
    assert_eq!(norm.offsets, vec![0]);
}

#[test]
fn empty_and_rank0_shapes() {
    let e = Layout::contiguous(&[3, 0, 2]).unwrap();
    let e2 = Layout::as_strided(&[3, 0, 2], &[-1, 5, 0], 7, 7).unwrap();
    let plan = check_plan(&[&e, &e2]);
    assert_eq!(plan.shape, vec![0]);
    assert_eq!(plan.numel(), 0);
    assert!(tuples(&plan.normalize_for(1)).is_empty());

    let s = Layout::contiguous(&[]).unwrap();
    let s2 = Layout::as_strided(&[], &[], 9, 10).unwrap();
    let plan = check_plan(&[&s, &s2]);
    assert!(plan.shape.is_empty());
    assert_eq!(plan.numel(), 1);
    assert_eq!((plan.offset_of(0, 0), plan.offset_of(1, 0)), (0, 9));

    // all size-1 dims behave like rank 0
    let ones = Layout::as_strided(&[1, 1, 1], &[5, -2, 0], 3, 4).unwrap();
    let plan = check_plan(&[&ones]);
    assert!(plan.shape.is_empty());
    assert_eq!(plan.offset_of(0, 0), 3);
}

#[test]
fn index32_is_false_exactly_past_i32_max() {
    let max = i32::MAX as usize;
    let huge = 1usize << 40;
    // the last element at exactly i32::MAX still fits
    let l = Layout::as_strided(&[2], &[max as isize], 0, huge).unwrap();
    assert!(check_plan(&[&l]).index32);
    // one further does not
    let l = Layout::as_strided(&[2], &[max as isize], 1, huge).unwrap();
    assert!(!check_plan(&[&l]).index32);
    // a large offset alone
    let l = Layout::as_strided(&[3], &[1], max - 2, huge).unwrap();
    assert!(check_plan(&[&l]).index32);
    let l = Layout::as_strided(&[3], &[1], max - 1, huge).unwrap();
    assert!(!check_plan(&[&l]).index32);
    // negative strides: the offset is the highest reach
    let l = Layout::as_strided(&[2, 2], &[-(1 << 30), -1], max, huge).unwrap();
    assert!(check_plan(&[&l]).index32);
    // one operand out of range is enough
    let small = Layout::contiguous(&[4]).unwrap();
    let big = Layout::as_strided(&[4], &[1 << 30], 0, huge).unwrap();
    assert!(!LoopPlan::new(&[&small, &big]).index32);
    // the element count matters too, even when every offset is 0 (a broadcast scalar)
    let l = Layout::as_strided(&[max], &[0], 0, 1).unwrap();
    assert!(LoopPlan::new(&[&l]).index32);
    let l = Layout::as_strided(&[max + 1], &[0], 0, 1).unwrap();
    assert!(!LoopPlan::new(&[&l]).index32);
    let l = Layout::as_strided(&[1 << 16, 1 << 16], &[0, 0], 0, 1).unwrap();
    assert!(!LoopPlan::new(&[&l]).index32);
}
