//! Datasets, data loading and transforms (being built).
