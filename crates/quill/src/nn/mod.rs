//! Neural-network building blocks: the `Module` trait, layers, losses and activations
//! (`functional`), initialisers, and the models the main job trains.

mod activation;
mod container;
mod conv;
pub mod functional;
mod gru;
pub mod init;
mod linear;
mod lstm;
pub mod models;
mod module;
mod norm;
mod pool;
mod recurrent;
mod recurrent_kernels;
mod recurrent_op;
mod rnn;

pub use activation::{Flatten, Identity, ReLU, Sigmoid, Softmax, Tanh, GELU};
pub use container::{Residual, Sequential};
pub use conv::Conv2d;
pub use gru::{GRUCell, GRU};
pub use linear::{Embedding, Linear};
pub use lstm::{LSTMCell, LSTM};
pub use module::Module;
pub use norm::{BatchNorm, BatchNorm1d, BatchNorm2d, Dropout, LayerNorm};
pub use pool::{AvgPool2d, MaxPool2d};
pub use recurrent::{Nonlinearity, RecurrentParams};
pub use rnn::{RNNCell, RNN};
