//! Index arithmetic written out naively: element counts, C-order ravel / unravel, every
//! multi-index of a shape, axis normalisation, `-1` inference, and the flat offsets of a raw
//! (shape, strides, offset) layout by an odometer in i128, independent of quill-core's iterator.

/// Number of elements of a shape (1 for rank 0).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The C-order multi-index of element `k`.
pub fn unravel(shape: &[usize], mut k: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

/// The C-order position of a multi-index.
pub fn ravel(shape: &[usize], idx: &[usize]) -> usize {
    assert_eq!(shape.len(), idx.len(), "index {idx:?} for shape {shape:?}");
    let mut k = 0;
    for d in 0..shape.len() {
        assert!(idx[d] < shape[d], "index {idx:?} outside shape {shape:?}");
        k = k * shape[d] + idx[d];
    }
    k
}

/// Every multi-index of `shape` in C order (one empty index for rank 0, none for size 0).
pub fn all_indices(shape: &[usize]) -> Vec<Vec<usize>> {
    (0..numel(shape)).map(|k| unravel(shape, k)).collect()
}

/// Maps a possibly negative axis into `0..n`; `None` when out of range.
pub fn norm_axis(a: isize, n: usize) -> Option<usize> {
    let n = n as i128;
    let a = a as i128;
    let v = if a < 0 { a + n } else { a };
    (0..n).contains(&v).then_some(v as usize)
}

/// NumPy's `-1` inference for a reshape of `numel` elements: `None` when the spec is invalid.
pub fn infer_shape(numel: usize, spec: &[isize]) -> Option<Vec<usize>> {
    let holes = spec.iter().filter(|&&d| d == -1).count();
    if holes > 1 || spec.iter().any(|&d| d < -1) {
        return None;
    }
    let known: u128 = spec
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as u128)
        .product();
    if holes == 0 {
        return (known == numel as u128).then(|| spec.iter().map(|&d| d as usize).collect());
    }
    if known == 0 || !(numel as u128).is_multiple_of(known) {
        return None;
    }
    let fill = (numel as u128 / known) as usize;
    Some(
        spec.iter()
            .map(|&d| if d == -1 { fill } else { d as usize })
            .collect(),
    )
}

/// The flat offset of every element of a raw strided layout, in C order (an odometer in i128,
/// so that no intermediate can overflow). Panics on a negative offset.
pub fn naive_offsets(shape: &[usize], strides: &[isize], offset: usize) -> Vec<usize> {
    assert_eq!(shape.len(), strides.len());
    let n = numel(shape);
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        let off = offset as i128
            + idx
                .iter()
                .zip(strides)
                .map(|(&i, &s)| i as i128 * s as i128)
                .sum::<i128>();
        out.push(usize::try_from(off).expect("strided layout reaches a negative offset"));
        let mut d = shape.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// True when the elements are one forward run of the buffer (the meaning of C-contiguous).
pub fn naive_is_contiguous(offs: &[usize]) -> bool {
    offs.windows(2).all(|w| w[1] == w[0] + 1)
}

/// True when no two elements share an offset.
pub fn all_distinct(offs: &[usize]) -> bool {
    let mut v = offs.to_vec();
    v.sort_unstable();
    v.windows(2).all(|w| w[0] != w[1])
}

/// `buf[o]` for each offset.
pub fn gather<T: Copy>(buf: &[T], offs: &[usize]) -> Vec<T> {
    offs.iter().map(|&o| buf[o]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odometer_agrees_with_unravel() {
        // Two ways to the same offsets: the odometer, and offset + sum(idx * stride) per index.
        let (shape, strides, offset) = ([2usize, 0, 3], [5isize, 7, -2], 4usize);
        assert!(naive_offsets(&shape, &strides, offset).is_empty());
        let (shape, strides) = ([2usize, 3, 2], [-6isize, 2, 1]);
        let want: Vec<usize> = all_indices(&shape)
            .iter()
            .map(|i| (6 + i[0] as isize * -6 + i[1] as isize * 2 + i[2] as isize) as usize)
            .collect();
        assert_eq!(naive_offsets(&shape, &strides, 6), want);
        assert_eq!(naive_offsets(&[], &[], 9), vec![9]);
        for k in 0..12 {
            assert_eq!(ravel(&shape, &unravel(&shape, k)), k);
        }
    }

    #[test]
    fn infer_shape_rules() {
        assert_eq!(infer_shape(12, &[3, -1]), Some(vec![3, 4]));
        assert_eq!(infer_shape(12, &[5, -1]), None);
        assert_eq!(infer_shape(0, &[0, -1]), None, "ambiguous, as NumPy");
        assert_eq!(infer_shape(12, &[-1, -1]), None);
        assert_eq!(infer_shape(1, &[]), Some(vec![]));
    }
}
