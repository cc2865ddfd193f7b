//! SignatureInfo (Data and Interest forms), KeyLocator and ValidityPeriod.

use bytes::{BufMut, Bytes};

use crate::calendar;
use crate::error::{Error, ErrorKind, Result};
use crate::name::Name;
use crate::tlv::{self, Element, Reader};
use crate::types::*;

/// Where to find the key that verifies a signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyLocator {
    /// A key or certificate name.
    Name(Name),
    /// A KeyDigest (e.g. SHA-256 of an HMAC key).
    Digest(Bytes),
}

impl KeyLocator {
    fn value_len(&self) -> usize {
        match self {
            KeyLocator::Name(n) => n.encoded_len(),
            KeyLocator::Digest(d) => tlv::tlv_len(KEY_DIGEST, d.len()),
        }
    }

    fn encoded_len(&self) -> usize {
        tlv::tlv_len(KEY_LOCATOR, self.value_len())
    }

    fn encode_to(&self, buf: &mut impl BufMut) {
        tlv::put_header(buf, KEY_LOCATOR, self.value_len());
        match self {
            KeyLocator::Name(n) => n.encode_to(buf),
            KeyLocator::Digest(d) => tlv::put_tlv(buf, KEY_DIGEST, d),
        }
    }

    fn decode(r: &Reader<'_>, el: &Element) -> Result<Self> {
        let mut inner = Reader::inside(r.buffer(), el);
        let first = inner.read()?;
        let kl = match first.typ {
            NAME => KeyLocator::Name(Name::decode_element(&inner, &first)?),
            KEY_DIGEST => KeyLocator::Digest(inner.value(&first)),
            t => {
                return Err(Error::new(
                    first.start,
                    ErrorKind::Invalid("KeyLocator holds neither Name nor KeyDigest"),
                )
                .with_type(t))
            }
        };
        Ok(kl)
    }
}

/// A point in time, in seconds since the Unix epoch (UTC), as ValidityPeriod
/// carries it (`YYYYMMDDThhmmss`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Parses `YYYYMMDDThhmmss`.
    pub fn parse(s: &[u8]) -> Option<Timestamp> {
        if s.len() != 15 || s[8] != b'T' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<i64> {
            let part = &s[r];
            part.iter().all(u8::is_ascii_digit).then(|| {
                part.iter()
                    .fold(0i64, |acc, d| acc * 10 + (d - b'0') as i64)
            })
        };
        let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
        let (h, mi, se) = (num(9..11)?, num(11..13)?, num(13..15)?);
        if !(1..=12).contains(&mo)
            || d < 1
            || Some(d) > calendar::days_in_month(y, mo as u8).map(i64::from)
            || h > 23
            || mi > 59
            || se > 59
        {
            return None;
        }
        Some(Timestamp(
            calendar::days_from_civil(y, mo as u8, d as u8) * 86400 + h * 3600 + mi * 60 + se,
        ))
    }

    /// Formats as `YYYYMMDDThhmmss` (years clamped to 0000..=9999).
    pub fn format(&self) -> String {
        let secs = self.0.clamp(-62_167_219_200, 253_402_300_799);
        let days = secs.div_euclid(86400);
        let rem = secs.rem_euclid(86400);
        let (y, m, d) = calendar::civil_from_days(days);
        format!(
            "{y:04}{m:02}{d:02}T{:02}{:02}{:02}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    }
}

/// A certificate's ValidityPeriod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidityPeriod {
    /// NotBefore.
    pub not_before: Timestamp,
    /// NotAfter.
    pub not_after: Timestamp,
}

impl ValidityPeriod {
    const VALUE_LEN: usize = 2 * tlv::tlv_len(NOT_BEFORE, 15);

    /// True when `t` (Unix seconds) lies inside the period.
    pub fn contains(&self, t: i64) -> bool {
        self.not_before.0 <= t && t <= self.not_after.0
    }

    fn encode_to(&self, buf: &mut impl BufMut) {
        tlv::put_header(buf, VALIDITY_PERIOD, Self::VALUE_LEN);
        tlv::put_tlv(buf, NOT_BEFORE, self.not_before.format().as_bytes());
        tlv::put_tlv(buf, NOT_AFTER, self.not_after.format().as_bytes());
    }

    fn decode(r: &Reader<'_>, el: &Element) -> Result<Self> {
        let mut inner = Reader::inside(r.buffer(), el);
        let mut get = |typ: u64| -> Result<Timestamp> {
            let e = inner.read()?;
            if e.typ != typ {
                return Err(
                    Error::new(e.start, ErrorKind::Unexpected { expected: typ }).with_type(e.typ)
                );
            }
            Timestamp::parse(inner.value_ref(&e)).ok_or_else(|| {
                Error::new(
                    e.start,
                    ErrorKind::Invalid("timestamp is not YYYYMMDDThhmmss"),
                )
                .with_type(typ)
            })
        };
        let not_before = get(NOT_BEFORE)?;
        let not_after = get(NOT_AFTER)?;
        Ok(ValidityPeriod {
            not_before,
            not_after,
        })
    }
}

/// SignatureInfo of a Data (type 22) or InterestSignatureInfo (type 44).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SignatureInfo {
    /// SignatureType.
    pub sig_type: u64,
    /// KeyLocator.
    pub key_locator: Option<KeyLocator>,
    /// ValidityPeriod (certificates).
    pub validity: Option<ValidityPeriod>,
    /// SignatureNonce (signed Interests).
    pub nonce: Option<Bytes>,
    /// SignatureTime in milliseconds since the Unix epoch (signed Interests).
    pub time: Option<u64>,
    /// SignatureSeqNum (signed Interests).
    pub seq_num: Option<u64>,
    /// Unrecognised non-critical elements (e.g. AdditionalDescription),
    /// whole TLVs in wire order, re-encoded after the known ones.
    pub other: Vec<Bytes>,
}

impl SignatureInfo {
    /// A SignatureInfo with only a type.
    pub fn new(sig_type: u64) -> Self {
        SignatureInfo {
            sig_type,
            ..Default::default()
        }
    }

    /// Length of the TLV-VALUE.
    pub fn value_len(&self) -> usize {
        tlv::nni_tlv_len(SIGNATURE_TYPE, self.sig_type)
            + self.key_locator.as_ref().map_or(0, |k| k.encoded_len())
            + self.validity.map_or(0, |_| {
                tlv::tlv_len(VALIDITY_PERIOD, ValidityPeriod::VALUE_LEN)
            })
            + self
                .nonce
                .as_ref()
                .map_or(0, |n| tlv::tlv_len(SIGNATURE_NONCE, n.len()))
            + self.time.map_or(0, |t| tlv::nni_tlv_len(SIGNATURE_TIME, t))
            + self
                .seq_num
                .map_or(0, |s| tlv::nni_tlv_len(SIGNATURE_SEQ_NUM, s))
            + self.other.iter().map(Bytes::len).sum::<usize>()
    }

    /// Size of the whole element with the given outer type (22 or 44).
    pub fn encoded_len(&self, outer: u64) -> usize {
        tlv::tlv_len(outer, self.value_len())
    }

    /// Writes the element with the given outer type (22 or 44).
    pub fn encode_to(&self, outer: u64, buf: &mut impl BufMut) {
        tlv::put_header(buf, outer, self.value_len());
        tlv::put_nni_tlv(buf, SIGNATURE_TYPE, self.sig_type);
        if let Some(k) = &self.key_locator {
            k.encode_to(buf);
        }
        if let Some(v) = &self.validity {
            v.encode_to(buf);
        }
        if let Some(n) = &self.nonce {
            tlv::put_tlv(buf, SIGNATURE_NONCE, n);
        }
        if let Some(t) = self.time {
            tlv::put_nni_tlv(buf, SIGNATURE_TIME, t);
        }
        if let Some(s) = self.seq_num {
            tlv::put_nni_tlv(buf, SIGNATURE_SEQ_NUM, s);
        }
        for o in &self.other {
            buf.put_slice(o);
        }
    }

    /// Decodes the element `el` read by `r`.
    pub fn decode(r: &Reader<'_>, el: &Element) -> Result<Self> {
        let mut inner = Reader::inside(r.buffer(), el);
        let first = inner.read()?;
        if first.typ != SIGNATURE_TYPE {
            return Err(Error::new(
                first.start,
                ErrorKind::Missing {
                    element: SIGNATURE_TYPE,
                },
            )
            .with_type(el.typ));
        }
        let mut si = SignatureInfo::new(inner.nni(&first)?);
        let mut last = SIGNATURE_TYPE;
        while !inner.is_empty() {
            let e = inner.read()?;
            let order = match e.typ {
                KEY_LOCATOR => 1,
                VALIDITY_PERIOD => 2,
                SIGNATURE_NONCE => 3,
                SIGNATURE_TIME => 4,
                SIGNATURE_SEQ_NUM => 5,
                _ => {
                    inner.unknown(&e, el.typ)?;
                    si.other.push(inner.buffer().slice(e.start..e.end));
                    continue;
                }
            };
            // KeyLocator comes first; the others must not repeat. Their
            // relative order is not enforced: NDNts writes ValidityPeriod last.
            let seen = match e.typ {
                KEY_LOCATOR => si.key_locator.is_some(),
                VALIDITY_PERIOD => si.validity.is_some(),
                SIGNATURE_NONCE => si.nonce.is_some(),
                SIGNATURE_TIME => si.time.is_some(),
                _ => si.seq_num.is_some(),
            };
            if seen || (order == 1 && last != SIGNATURE_TYPE) {
                return Err(Error::new(e.start, ErrorKind::OutOfOrder).with_type(e.typ));
            }
            last = e.typ;
            match e.typ {
                KEY_LOCATOR => si.key_locator = Some(KeyLocator::decode(&inner, &e)?),
                VALIDITY_PERIOD => si.validity = Some(ValidityPeriod::decode(&inner, &e)?),
                SIGNATURE_NONCE => si.nonce = Some(inner.value(&e)),
                SIGNATURE_TIME => si.time = Some(inner.nni(&e)?),
                _ => si.seq_num = Some(inner.nni(&e)?),
            }
        }
        Ok(si)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for s in [
            "19700101T000000",
            "20261122T030248",
            "20000229T235959",
            "99991231T235959",
            "00010101T000000",
        ] {
            let t = Timestamp::parse(s.as_bytes()).unwrap();
            assert_eq!(t.format(), s);
        }
        assert_eq!(Timestamp::parse(b"19700101T000001").unwrap().0, 1);
        assert_eq!(
            Timestamp::parse(b"20261122T000000").unwrap().0,
            1_795_305_600
        );
        for bad in [
            "20250229T000000",
            "2025013T0000000",
            "20251301T000000",
            "20250101X000000",
            "20250101T240000",
        ] {
            assert!(Timestamp::parse(bad.as_bytes()).is_none(), "{bad}");
        }
    }
}
