//! # granary-mgmt
//!
//! The NFD management protocol's data formats for Granary:
//!
//! - [`ControlParameters`] (TLV 104) and [`ControlResponse`] (TLV 101);
//! - status dataset items [`FaceStatus`], [`FibEntry`], [`RibEntry`],
//!   [`StrategyChoice`], [`CsInfo`] and the ForwarderStatus payload
//!   [`GeneralStatus`], with [`decode_dataset`] / [`encode_dataset`];
//! - control command Interests: [`parse_command`] (legacy 4-component signed
//!   form, v0.3 signed Interests, unsigned) and [`make_command`];
//! - dataset segmentation ([`segment_dataset`], [`reassemble_dataset`]);
//! - [`status`] codes, [`tlv_types`] TLV numbers and [`values`] of enumerated fields.
//!
//! Like `granary-packet`, decoding walks one shared [`bytes::Bytes`] buffer,
//! encoding computes sizes first and writes once, errors carry the byte offset
//! and TLV type ([`granary_packet::Error`]), and no input makes it panic.
//! This crate does no I/O and no cryptography: it exposes the signed portion,
//! SignatureInfo and SignatureValue of a command for `granary-security` to
//! verify, and builds unsigned command Interests for it to sign.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod codec;
pub mod command;
pub mod control;
pub mod dataset;
pub mod segment;
pub mod status;
pub mod tlv_types;
pub mod values;

pub use codec::TlvElement;
pub use command::{make_command, parse_command, Command, LegacySigned, SignedForm, V03Signed};
pub use control::{ControlParameters, ControlResponse};
pub use dataset::{
    decode_dataset, encode_dataset, ChannelStatus, CsInfo, FaceQueryFilter, FaceStatus, FibEntry,
    GeneralStatus, NextHopRecord, RibEntry, Route, StrategyChoice,
};
pub use segment::{reassemble_dataset, segment_dataset, DATASET_FRESHNESS_MS, MAX_DATASET_SEGMENT};

use granary_packet::Name;

/// Oracle for the fuzz target `fuzz/fuzz_targets/mgmt.rs`, also replayed by
/// this crate's tests: any bytes as a ControlParameters, a ControlResponse,
/// every dataset kind and a ForwarderStatus payload, and as a command
/// Interest under `/localhost/nfd`; what decodes re-encodes and decodes to
/// the same fields. Not an API.
#[doc(hidden)]
pub fn fuzz_oracle(data: &[u8]) {
    use bytes::Bytes;
    use granary_packet::tlv::Reader;

    fn element<T: TlvElement + PartialEq + std::fmt::Debug>(b: &Bytes) {
        let r = Reader::new(b);
        let mut rr = Reader::new(b);
        let Ok(el) = rr.read() else { return };
        if el.typ != T::TLV_TYPE {
            return;
        }
        if let Ok(x) = T::decode_element(&r, &el) {
            let again = x.encode();
            let mut r2 = Reader::new(&again);
            let el2 = r2.read().expect("a re-encoded element reads");
            assert_eq!(T::decode_element(&r2, &el2).as_ref(), Ok(&x));
        }
    }
    fn dataset<T: TlvElement + PartialEq + std::fmt::Debug>(b: &Bytes) {
        if let Ok(v) = decode_dataset::<T>(b) {
            assert_eq!(decode_dataset::<T>(&encode_dataset(&v)).as_ref(), Ok(&v));
        }
    }
    let b = Bytes::copy_from_slice(data);
    element::<ControlParameters>(&b);
    element::<ControlResponse>(&b);
    dataset::<FaceStatus>(&b);
    dataset::<FibEntry>(&b);
    dataset::<RibEntry>(&b);
    dataset::<StrategyChoice>(&b);
    dataset::<CsInfo>(&b);
    dataset::<ChannelStatus>(&b);
    if let Ok(g) = GeneralStatus::decode(&b) {
        assert_eq!(GeneralStatus::decode(&g.encode()).as_ref(), Ok(&g));
    }
    if let Ok(i) = granary_packet::Interest::decode(b.clone()) {
        if let Ok(prefix) = Name::from_uri(LOCALHOST_NFD) {
            let _ = parse_command(&i, &prefix);
        }
    }
}

/// The management prefix for local clients.
pub const LOCALHOST_NFD: &str = "/localhost/nfd";
/// The management prefix for commands from a neighbour (e.g. rib/register
/// from a remote face).
pub const LOCALHOP_NFD: &str = "/localhop/nfd";

/// Errors of command parsing and dataset reassembly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MgmtError {
    /// A TLV decoding error (offset and TLV type inside).
    #[error(transparent)]
    Packet(#[from] granary_packet::Error),
    /// The Interest is not under the management prefix.
    #[error("{name} is not under the management prefix {prefix}")]
    NotUnderPrefix {
        /// The Interest name.
        name: Name,
        /// The expected prefix.
        prefix: Name,
    },
    /// The command name ends before this component.
    #[error("command name has no {0} component")]
    MissingComponent(&'static str),
    /// This component is not a GenericNameComponent.
    #[error("{0} component is not a GenericNameComponent")]
    NotGeneric(&'static str),
    /// This component is not UTF-8.
    #[error("{0} component is not valid UTF-8")]
    NotUtf8(&'static str),
    /// The command name has this many components after ControlParameters that
    /// fit neither signed form.
    #[error("{0} unexpected component(s) after ControlParameters")]
    UnexpectedComponents(usize),
    /// ApplicationParameters without a matching ParametersSha256DigestComponent.
    #[error("ParametersSha256DigestComponent missing or does not match the parameters")]
    BadParamsDigest,
    /// A legacy signed command whose signature components are malformed.
    #[error("legacy signed command: {0}")]
    BadLegacySignature(&'static str),
    /// No segments to reassemble.
    #[error("no dataset segments")]
    NoSegments,
    /// Segment at this index of the input is not named `<prefix>/v=<n>/seg=<i>`.
    #[error("input {0} is not named <prefix>/<version>/<segment>")]
    BadSegmentName(usize),
    /// Segments of different datasets (prefix or version differ).
    #[error("segments belong to different datasets")]
    MixedSegments,
    /// This segment number is missing.
    #[error("segment {0} is missing")]
    MissingSegment(u64),
    /// This segment number appears more than once.
    #[error("segment {0} appears more than once")]
    DuplicateSegment(u64),
    /// FinalBlockId absent everywhere, not a segment, inconsistent, or not the
    /// last segment.
    #[error("FinalBlockId missing, inconsistent or not the last segment")]
    BadFinalBlockId,
}
