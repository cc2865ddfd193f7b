//! The mgmt crate's integration tests: one binary, one module per concern.

mod python_vectors;
mod robustness;
