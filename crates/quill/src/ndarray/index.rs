//! gather, scatter_add, index_select and take_along_axis (being built).
