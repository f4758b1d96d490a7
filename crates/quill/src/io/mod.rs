//! Reading and writing arrays: safetensors checkpoints, written atomically (being built).
