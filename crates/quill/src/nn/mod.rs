//! Neural-network building blocks: losses and activations (`functional`), modules, initialisers.

pub mod functional;
