//! concat, stack and split (being built).
