//! Neural-network building blocks: the `Module` trait, layers, losses and activations
//! (`functional`), attention and Transformer blocks, initialisers, and the models the main
//! job trains.

mod activation;
mod attention;
mod container;
mod conv;
pub mod functional;
pub mod init;
mod linear;
pub mod models;
mod module;
mod norm;
mod pool;
mod transformer;

pub use activation::{Flatten, Identity, ReLU, Sigmoid, Softmax, Tanh, GELU};
pub use attention::{AttentionLayer, MultiHeadAttention};
pub use container::{Residual, Sequential};
pub use conv::Conv2d;
pub use linear::{Embedding, Linear};
pub use module::Module;
pub use norm::{BatchNorm, BatchNorm1d, BatchNorm2d, Dropout, LayerNorm};
pub use pool::{AvgPool2d, MaxPool2d};
pub use transformer::{Transformer, TransformerLayer};
