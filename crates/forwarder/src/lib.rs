//! NDN forwarder (in progress).
#![forbid(unsafe_code)]
pub mod cs;
