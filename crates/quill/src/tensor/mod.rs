//! `Tensor`: an NDArray plus its place in the autograd graph (being built).
