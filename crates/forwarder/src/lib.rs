//! # granary-forwarder
//!
//! The NDN forwarder: PIT with aggregation and loop detection (nonces and a
//! dead-nonce list), FIB computed from a RIB, Content Store with LRU / LFU /
//! FIFO / Random replacement, best-route and multicast strategies with
//! per-prefix choice, Nack generation, `/localhost` and `/localhop` scope,
//! NFD management, and the daemon that wires faces to it.
//!
//! Depends on `granary-packet`, `granary-face` and `granary-mgmt`; knows
//! nothing of repositories or applications.
#![forbid(unsafe_code)]

mod config;
pub mod cs;
pub mod daemon;
pub mod fib;
pub mod forwarder;
#[cfg(test)]
mod hint_tests;
pub mod mgmt;
#[cfg(test)]
mod mgmt_tests;
pub mod namehash;
#[cfg(test)]
mod owner_tests;
pub mod permanent;
mod pipeline;
pub mod pit;
mod run;
mod scope;
mod shard;
pub mod strategy;
#[cfg(test)]
mod test_faces;
pub mod vip;
mod vip_hooks;

pub use forwarder::{FaceContext, Forwarder, ForwarderConfig};
