//! Matmul with NumPy semantics (being built: see issue 3).
