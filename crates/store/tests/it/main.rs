//! The store crate's integration tests: one binary, one module per concern.

mod cdc;
mod drop_behind;
mod store;
