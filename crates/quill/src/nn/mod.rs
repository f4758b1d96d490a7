//! Neural-network building blocks: the `Module` trait, layers, losses and activations
//! (`functional`), recurrent layers, attention and Transformer blocks, initialisers, and the
//! model zoo (`models`).

mod activation;
mod attention;
mod container;
mod conv;
pub mod functional;
mod gru;
pub mod init;
mod language_model;
mod linear;
mod lstm;
pub mod models;
mod module;
mod norm;
mod pool;
mod recurrent;
mod recurrent_op;
mod rnn;
mod transformer;

pub use activation::{Flatten, Identity, ReLU, Sigmoid, Softmax, Tanh, GELU};
pub use attention::{AttentionLayer, MultiHeadAttention};
pub use container::{Residual, Sequential};
pub use conv::Conv2d;
pub use gru::{GRUCell, GRU};
pub use linear::{Embedding, Linear};
pub use lstm::{LSTMCell, LSTM};
pub use module::Module;
pub use norm::{BatchNorm, BatchNorm1d, BatchNorm2d, Dropout, LayerNorm, RMSNorm};
pub use pool::{AvgPool2d, MaxPool2d};
pub use recurrent::{Nonlinearity, RecurrentParams};
pub use rnn::{RNNCell, RNN};
pub use transformer::{Transformer, TransformerLayer};
