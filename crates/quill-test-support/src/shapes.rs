//! Random shapes (with size-0 and size-1 dims common), random factorisations of an element
//! count, and random non-overlapping strided layouts (permuted dim order, gaps, negative
//! strides, an offset) together with the buffer length they need.

use crate::index::numel;
use crate::prng::Prng;

impl Prng {
    /// A dim size: mostly 1..=4, sometimes 0.
    pub fn dim(&mut self) -> usize {
        match self.below(24) {
            0 => 0,
            1..=6 => 1,
            k => 2 + k % 3,
        }
    }

    /// A random shape of rank `rank` whose dims (0 counted as 1) multiply to at most `max_numel`.
    pub fn shape(&mut self, rank: usize, max_numel: usize) -> Vec<usize> {
        loop {
            let s: Vec<usize> = (0..rank).map(|_| self.dim()).collect();
            if s.iter().map(|&d| d.max(1)).product::<usize>() <= max_numel {
                return s;
            }
        }
    }

    /// Writes axis `a` of a rank-`n` array either as itself or as its negative alias.
    pub fn alias(&mut self, a: usize, n: usize) -> isize {
        if self.odds(1, 2) {
            a as isize
        } else {
            a as isize - n as isize
        }
    }
}

/// A random shape of rank `0..=max_rank`, dims in `0..=max_dim` (0 and 1 are common).
pub fn random_shape(
    rng: &mut Prng,
    max_rank: usize,
    max_dim: usize,
    max_numel: usize,
) -> Vec<usize> {
    loop {
        let rank = rng.below(max_rank + 1);
        let shape: Vec<usize> = (0..rank)
            .map(|_| {
                if rng.chance(0.04) {
                    0
                } else if rng.chance(0.2) {
                    1
                } else {
                    rng.int(1, max_dim)
                }
            })
            .collect();
        if numel(&shape) <= max_numel {
            return shape;
        }
    }
}

/// Random strides that keep the elements of `shape` at distinct offsets (a random dim order,
/// random gaps and random signs), and the offset and buffer length that make them fit.
pub fn random_layout(rng: &mut Prng, shape: &[usize]) -> (Vec<isize>, usize, usize) {
    let rank = shape.len();
    let order = rng.permutation(rank); // order[0] is the innermost dim
    let mut strides = vec![0isize; rank];
    let mut acc: isize = 1;
    for &d in &order {
        let s = acc * rng.int(1, 2);
        strides[d] = s;
        acc = s * shape[d].max(1) as isize + rng.int(0, 1);
    }
    for s in strides.iter_mut() {
        if rng.chance(0.4) {
            *s = -*s;
        }
    }
    let pad = rng.below(3);
    let (mut neg, mut pos) = (0usize, 0usize);
    if numel(shape) > 0 {
        for (&d, &s) in shape.iter().zip(&strides) {
            let ext = (d - 1) * s.unsigned_abs();
            if s < 0 {
                neg += ext;
            } else {
                pos += ext;
            }
        }
    }
    let offset = pad + neg;
    let len = offset + pos + 1 + rng.below(3);
    (strides, offset, len)
}

/// Prime factors of `n > 0`, in increasing order.
fn factors(mut n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n.is_multiple_of(p) {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// A random shape with `n` elements and rank at most `max_rank`.
pub fn random_shape_with_numel(rng: &mut Prng, n: usize, max_rank: usize) -> Vec<usize> {
    if n == 0 {
        let rank = rng.int(1, max_rank.min(4));
        let mut s: Vec<usize> = (0..rank).map(|_| rng.below(4)).collect();
        let z = rng.below(rank);
        s[z] = 0;
        return s;
    }
    let mut f = factors(n);
    rng.shuffle(&mut f);
    let groups = if f.is_empty() {
        0
    } else {
        rng.int(1, f.len().min(max_rank))
    };
    let mut shape = vec![1usize; groups];
    for (i, p) in f.into_iter().enumerate() {
        let g = if i < groups { i } else { rng.below(groups) };
        shape[g] *= p;
    }
    while shape.len() < max_rank && rng.chance(0.3) {
        let at = rng.below(shape.len() + 1);
        shape.insert(at, 1);
    }
    shape
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{all_distinct, naive_offsets};

    #[test]
    fn random_layouts_fit_their_buffer_without_overlap() {
        let mut rng = Prng::new(3);
        for _ in 0..500 {
            let shape = random_shape(&mut rng, 5, 4, 400);
            let (strides, offset, len) = random_layout(&mut rng, &shape);
            let offs = naive_offsets(&shape, &strides, offset);
            assert!(
                offs.iter().all(|&o| o < len),
                "{shape:?} {strides:?} {offset} {len}"
            );
            assert!(all_distinct(&offs), "{shape:?} {strides:?}");
        }
    }

    #[test]
    fn factorisations_keep_the_count() {
        let mut rng = Prng::new(4);
        for n in 0..200 {
            let s = random_shape_with_numel(&mut rng, n, 6);
            assert_eq!(numel(&s), n, "{s:?}");
            assert!(s.len() <= 6);
        }
    }
}
