//! # granary-packet
//!
//! NDN packet format v0.3 and NDNLPv2 for Granary: TLV primitives, names and
//! their canonical URIs, Interest, Data, SignatureInfo, LpPacket, a
//! generic TLV tree for dissection, and what a version number means as a
//! time (`version`).
//!
//! Decoding borrows from one shared [`bytes::Bytes`] buffer: a decoded packet's
//! name, content and signature are slices of the input, never copies.
//! Encoding computes sizes first and writes each packet into one buffer.
//!
//! This crate does no I/O and no cryptography beyond SHA-256 digests (implicit
//! digest, ParametersSha256DigestComponent, the keyless DigestSha256
//! signature in [`digest`]); keyed signing lives in `granary-security`.
#![forbid(unsafe_code)]
#![allow(missing_docs)] // enum-variant fields are self-describing; items are documented

pub mod calendar;
pub mod data;
pub mod digest;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod interest;
pub mod lp;
pub mod name;
pub mod signature;
pub mod tlv;
pub mod tree;
pub mod types;
pub mod version;

pub use bytes::Bytes;
pub use data::{Data, DataBuilder, MetaInfo};
pub use error::{Error, ErrorKind, Result};
pub use interest::{Interest, InterestFields};
pub use lp::LpPacket;
pub use name::{Component, ComponentRef, Name};
pub use signature::{KeyLocator, SignatureInfo, Timestamp, ValidityPeriod};
pub use version::version_time;

/// Any network-layer or link-layer packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// An Interest.
    Interest(Interest),
    /// A Data.
    Data(Data),
    /// An LpPacket.
    Lp(LpPacket),
}

impl Packet {
    /// Decodes one packet of any kind; `wire` must hold exactly one TLV.
    pub fn decode(wire: Bytes) -> Result<Packet> {
        match tlv::read_var_number(&wire, 0)?.0 {
            types::INTEREST => Interest::decode(wire).map(Packet::Interest),
            types::DATA => Data::decode(wire).map(Packet::Data),
            types::LP_PACKET => LpPacket::decode(wire).map(Packet::Lp),
            t => Err(
                Error::new(0, ErrorKind::Invalid("not an Interest, Data or LpPacket")).with_type(t),
            ),
        }
    }
}

/// SHA-256 of `data` (the digest NDN uses everywhere).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}
