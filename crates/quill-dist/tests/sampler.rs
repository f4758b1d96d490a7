//! `DistributedSampler` and `Shard` against direct definitions: shards are disjoint and cover
//! the epoch's order (padded or cut), are reshuffled per epoch from the shared seed, and one rank
//! visits exactly the `DataLoader` order; interleaved shards make rank batches add up to the
//! single-process batch.

use quill::data::{DataLoader, Dataset, TensorDataset};
use quill::NDArray;
use quill_dist::{DistributedSampler, Shard};
use std::sync::Arc;

fn dataset(n: usize) -> TensorDataset {
    let x = NDArray::from_vec((0..n).map(|i| i as f32).collect(), &[n, 1]).unwrap();
    let y = NDArray::from_vec((0..n as i64).collect(), &[n]).unwrap();
    TensorDataset::new(x, y).unwrap()
}

#[test]
fn shards_are_disjoint_and_cover_the_epoch_with_padding() {
    for (n, world) in [(10, 3), (12, 4), (7, 1), (5, 8), (100, 2)] {
        let single = DataLoader::new(dataset(n), 1)
            .unwrap()
            .shuffle(true)
            .seed(5)
            .indices(2);
        let shards: Vec<Vec<usize>> = (0..world)
            .map(|r| {
                DistributedSampler::new(n, world, r)
                    .unwrap()
                    .seed(5)
                    .indices(2)
            })
            .collect();
        let per = n.div_ceil(world);
        // The padded order: the epoch's permutation, then its first samples again.
        let padded: Vec<usize> = single.iter().copied().cycle().take(per * world).collect();
        for (r, s) in shards.iter().enumerate() {
            assert_eq!(s.len(), per);
            let want: Vec<usize> = (0..per).map(|j| padded[j * world + r]).collect();
            assert_eq!(s, &want, "n {n} world {world} rank {r}");
        }
        if n % world == 0 {
            let mut all: Vec<usize> = shards.concat();
            all.sort();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "not a partition");
        }
    }
}

#[test]
fn drop_last_cuts_the_tail_and_world_one_is_the_loader_order() {
    let s: Vec<Vec<usize>> = (0..3)
        .map(|r| {
            DistributedSampler::new(10, 3, r)
                .unwrap()
                .drop_last(true)
                .shuffle(false)
                .indices(0)
        })
        .collect();
    assert_eq!(s, vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5, 8]]);
    for epoch in 0..3 {
        let one = DistributedSampler::new(50, 1, 0)
            .unwrap()
            .seed(9)
            .indices(epoch);
        let loader = DataLoader::new(dataset(50), 4)
            .unwrap()
            .shuffle(true)
            .seed(9);
        assert_eq!(one, loader.indices(epoch));
    }
}

#[test]
fn epochs_reshuffle_and_ranks_agree_on_the_order() {
    let a0 = DistributedSampler::new(64, 2, 0).unwrap().seed(3);
    let a1 = DistributedSampler::new(64, 2, 1).unwrap().seed(3);
    assert_ne!(a0.indices(0), a0.indices(1), "no reshuffle between epochs");
    for epoch in 0..4 {
        let mut both = a0.indices(epoch);
        both.extend(a1.indices(epoch));
        both.sort();
        assert_eq!(both, (0..64).collect::<Vec<_>>());
    }
    let other_seed = DistributedSampler::new(64, 2, 0).unwrap().seed(4);
    assert_ne!(a0.indices(0), other_seed.indices(0));
}

#[test]
fn rank_batches_make_up_the_single_process_batch() {
    let (n, world, b) = (37, 2, 4);
    let single = DistributedSampler::new(n, 1, 0).unwrap().seed(1);
    let ranks: Vec<Vec<usize>> = (0..world)
        .map(|r| {
            DistributedSampler::new(n, world, r)
                .unwrap()
                .seed(1)
                .indices(0)
        })
        .collect();
    let padded: Vec<usize> = single
        .indices(0)
        .into_iter()
        .cycle()
        .take(n.div_ceil(world) * world)
        .collect();
    for (i, global) in padded.chunks(b * world).enumerate() {
        let mut union: Vec<usize> = ranks
            .iter()
            .flat_map(|s| s.chunks(b).nth(i).unwrap().to_vec())
            .collect();
        let mut want = global.to_vec();
        union.sort();
        want.sort();
        assert_eq!(union, want, "batch {i}");
    }
}

#[test]
fn shard_maps_indices_and_rejects_bad_ones() {
    let base: Arc<dyn Dataset> = Arc::new(dataset(10));
    let sh = Shard::new(base.clone(), vec![7, 2, 9]).unwrap();
    assert_eq!(sh.len(), 3);
    let (x, y) = sh.get_batch(&[2, 0]).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![9.0, 7.0]);
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![9, 7]);
    assert!(sh.get_batch(&[3]).is_err());
    assert!(Shard::new(base, vec![10]).is_err());
    assert!(DistributedSampler::new(10, 2, 2).is_err());
    assert!(DistributedSampler::new(10, 0, 0).is_err());
}
