//! Reduction kernels (being built: see issue 3).
