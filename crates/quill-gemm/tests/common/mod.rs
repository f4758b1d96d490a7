//! Helpers the integration tests share.

/// The full index (batch dims first, the last two 0) of product `e` of a batch of shape
/// `batch`, in C order, for operands of rank `r`.
pub fn batch_index(r: usize, batch: &[usize], e: usize) -> Vec<usize> {
    let mut idx = vec![0; r];
    let mut rest = e;
    for d in (0..r - 2).rev() {
        idx[d] = rest % batch[d];
        rest /= batch[d];
    }
    idx
}
