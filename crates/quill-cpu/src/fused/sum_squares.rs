//! The host loop of `sum_squares` (gradient clipping's global norm): the sum of squares of a
//! contiguous slice in f64, with eight partial sums so that the loop vectorises and the result
//! depends on nothing but the data (not the thread count: it runs on one).

/// `sum(x^2)` over `s` in f64.
pub fn fold<T: Copy + Into<f64>>(s: &[T]) -> f64 {
    let mut acc = [0.0f64; 8];
    let chunks = s.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            let x: f64 = x.into();
            *a += x * x;
        }
    }
    for (a, &x) in acc.iter_mut().zip(tail) {
        let x: f64 = x.into();
        *a += x * x;
    }
    acc.iter().sum()
}
