//! Reductions (being built: see issue 3).
