//! `NDArray` builders for tests: arrays with given C-order values over a random non-contiguous
//! layout (permuted, gapped, reversed, offset), iota arrays whose elements are their own ids,
//! values that identify ids exactly in every dtype, and random values per dtype. The only
//! library calls made to build inputs are `NDArray::from_vec` and `as_strided`.

use crate::index::{naive_offsets, numel};
use crate::prng::Prng;
use crate::shapes::random_layout;
use quill::{DType, Element, NDArray, Scalar};

/// The naive offsets of an array's own layout (shape, strides, offset as it reports them).
pub fn offsets_of(a: &NDArray) -> Vec<usize> {
    naive_offsets(a.shape(), a.strides(), a.offset())
}

/// A value of `T` that identifies `id` (exact for ids below 128 in every dtype but bool, below
/// 256 in all but i8, and below 2^24 in f32 / i32 / u32 / f64 / i64 / u64).
pub fn from_id<T: Element>(id: usize) -> T {
    T::from_scalar(Scalar::I(id as i128))
}

/// `n` pseudo-random values of `T` (bool: a random pattern; floats: multiples of 0.25 in
/// [-25, 25], so sums of a few hundred are exact in f32).
pub fn random_values<T: Element>(rng: &mut Prng, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| match T::DTYPE {
            DType::Bool => T::from_scalar(Scalar::B(rng.chance(0.5))),
            DType::U8 => T::from_scalar(Scalar::I(rng.below(256) as i128)),
            DType::I8 => T::from_scalar(Scalar::I(rng.int(-128, 127) as i128)),
            // Non-negative and below 2^17: exact in an f64 reference, sums included.
            d if d.is_unsigned_int() => T::from_scalar(Scalar::I(rng.below(100_000) as i128)),
            d if d.is_float() => T::from_scalar(Scalar::F(rng.int(-100, 100) as f64 * 0.25)),
            // Wraps into the narrow types' range: any bit pattern is a valid value there.
            _ => T::from_scalar(Scalar::I(rng.int(-100_000i64, 100_000) as i128)),
        })
        .collect()
}

/// An array of `shape` whose C-order elements are `values`, over a larger buffer filled with
/// `filler`, with a random non-overlapping layout (permuted, gapped, reversed, offset).
pub fn strided_from<T: Element>(
    rng: &mut Prng,
    values: &[T],
    shape: &[usize],
    filler: T,
) -> NDArray {
    assert_eq!(values.len(), numel(shape));
    let (strides, offset, len) = random_layout(rng, shape);
    let mut buf = vec![filler; len];
    for (&o, &v) in naive_offsets(shape, &strides, offset).iter().zip(values) {
        buf[o] = v;
    }
    let a = NDArray::from_vec(buf, &[len])
        .unwrap()
        .as_strided(shape, &strides, offset)
        .unwrap();
    assert_eq!(a.shape(), shape);
    a
}

/// A contiguous i64 array of `shape` whose element `i` is `i` (the ids of `Chain`).
pub fn iota_i64(shape: &[usize]) -> NDArray {
    let n = numel(shape);
    NDArray::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
}
