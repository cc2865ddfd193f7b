//! Decoding errors: what was wrong, and where (byte offset, TLV type).

use std::fmt;

use crate::types::type_name;

/// Result alias for packet decoding.
pub type Result<T> = std::result::Result<T, Error>;

/// A decoding or parsing error with its location.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    /// Byte offset in the input where the offending element starts.
    pub offset: usize,
    /// TLV-TYPE of the offending element, when known.
    pub tlv_type: Option<u64>,
    /// What was wrong.
    pub kind: ErrorKind,
}

/// The kinds of decoding error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input ends before the element does.
    Truncated { needed: usize, available: usize },
    /// A VAR-NUMBER not in its shortest form.
    NonMinimalVarNumber,
    /// TLV-TYPE 0 is reserved and invalid.
    ZeroType,
    /// TLV-LENGTH beyond [`crate::tlv::MAX_TLV_LENGTH`].
    TooLong { length: u64 },
    /// A NonNegativeInteger whose length is not 1, 2, 4 or 8.
    BadNni { length: usize },
    /// A different element was expected here.
    Unexpected { expected: u64 },
    /// A required element is missing.
    Missing { element: u64 },
    /// An unrecognised critical element inside `context`.
    UnknownCritical { context: u64 },
    /// An element appears twice or out of order.
    OutOfOrder,
    /// Bytes left over after the element.
    Trailing,
    /// Nested deeper than [`crate::tlv::MAX_DEPTH`].
    TooDeep,
    /// A value that is well-formed TLV but semantically invalid.
    Invalid(&'static str),
    /// A URI that cannot be parsed.
    Uri(String),
}

impl Error {
    /// An error at `offset`.
    pub fn new(offset: usize, kind: ErrorKind) -> Self {
        Error {
            offset,
            tlv_type: None,
            kind,
        }
    }

    /// Attaches the TLV type of the offending element.
    pub fn with_type(mut self, typ: u64) -> Self {
        self.tlv_type = Some(typ);
        self
    }

    /// Shifts the offset (for errors found in a sub-buffer).
    pub fn shifted(mut self, by: usize) -> Self {
        self.offset += by;
        self
    }

    /// A URI parse error.
    pub fn uri(msg: impl Into<String>) -> Self {
        Error::new(0, ErrorKind::Uri(msg.into()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let ErrorKind::Uri(msg) = &self.kind {
            return write!(f, "invalid NDN URI: {msg}");
        }
        write!(f, "at offset {}", self.offset)?;
        if let Some(t) = self.tlv_type {
            write!(f, ", TLV type {t} ({})", type_name(t))?;
        }
        f.write_str(": ")?;
        match &self.kind {
            ErrorKind::Truncated { needed, available } => {
                write!(f, "truncated: needs {needed} bytes, {available} available")
            }
            ErrorKind::NonMinimalVarNumber => {
                f.write_str("VAR-NUMBER not in its shortest encoding")
            }
            ErrorKind::ZeroType => f.write_str("TLV-TYPE 0 is invalid"),
            ErrorKind::TooLong { length } => write!(f, "TLV-LENGTH {length} exceeds the limit"),
            ErrorKind::BadNni { length } => {
                write!(
                    f,
                    "NonNegativeInteger of {length} bytes (must be 1, 2, 4 or 8)"
                )
            }
            ErrorKind::Unexpected { expected } => {
                write!(f, "expected TLV type {expected} ({})", type_name(*expected))
            }
            ErrorKind::Missing { element } => {
                write!(
                    f,
                    "required element {element} ({}) is missing",
                    type_name(*element)
                )
            }
            ErrorKind::UnknownCritical { context } => {
                write!(
                    f,
                    "unrecognised critical element inside {context} ({})",
                    type_name(*context)
                )
            }
            ErrorKind::OutOfOrder => f.write_str("element repeated or out of order"),
            ErrorKind::Trailing => f.write_str("trailing bytes after the element"),
            ErrorKind::TooDeep => f.write_str("nested too deeply"),
            ErrorKind::Invalid(msg) => f.write_str(msg),
            ErrorKind::Uri(msg) => f.write_str(msg),
        }
    }
}
