//! Neural-network building blocks: the `Module` trait, layers, losses and activations
//! (`functional`), initialisers, and the models the main job trains.

mod activation;
mod container;
pub mod functional;
pub mod init;
mod linear;
pub mod models;
mod module;
mod norm;

pub use activation::{Flatten, Identity, ReLU, Sigmoid, Softmax, Tanh, GELU};
pub use container::{Residual, Sequential};
pub use linear::{Embedding, Linear};
pub use module::Module;
pub use norm::{BatchNorm, BatchNorm1d, BatchNorm2d, Dropout, LayerNorm};
