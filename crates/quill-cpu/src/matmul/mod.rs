//! Matmul kernels (being built: see issue 3).
