//! NumPy-like printing (placeholder, being replaced).

use super::NDArray;
use std::fmt;

impl fmt::Display for NDArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NDArray(shape={:?}, dtype={})",
            self.shape(),
            self.dtype()
        )
    }
}
impl fmt::Debug for NDArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
