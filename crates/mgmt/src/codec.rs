//! Decoding and encoding helpers shared by the management structures, and the
//! [`TlvElement`] trait they implement.

use bytes::{BufMut, Bytes, BytesMut};
use granary_packet::tlv::{self, Element, Reader};
use granary_packet::{Error, ErrorKind, Result};

/// A management structure that is one TLV element (ControlParameters,
/// ControlResponse, FaceStatus, FibEntry, …).
///
/// Decoding borrows from the input buffer (names, strings are copied only when
/// they become `String`s); encoding computes the size first and writes once.
pub trait TlvElement: Sized {
    /// TLV-TYPE of the element.
    const TLV_TYPE: u64;

    /// Decodes the element `el` read by `r` (its type must be [`Self::TLV_TYPE`]).
    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self>;

    /// Length of the TLV-VALUE.
    fn value_len(&self) -> usize;

    /// Writes the TLV-VALUE.
    fn encode_value<B: BufMut>(&self, buf: &mut B);

    /// Size of the whole element.
    fn encoded_len(&self) -> usize {
        tlv::tlv_len(Self::TLV_TYPE, self.value_len())
    }

    /// Writes the whole element.
    fn encode_to<B: BufMut>(&self, buf: &mut B) {
        tlv::put_header(buf, Self::TLV_TYPE, self.value_len());
        self.encode_value(buf);
    }

    /// The whole element in a new buffer.
    fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.encoded_len());
        self.encode_to(&mut b);
        b.freeze()
    }

    /// Decodes a buffer holding exactly one element of this type.
    fn decode(wire: &Bytes) -> Result<Self> {
        let mut r = Reader::new(wire);
        let el = r.read()?;
        let v = Self::decode_element(&r, &el)?;
        if !r.is_empty() {
            return Err(Error::new(el.end, ErrorKind::Trailing).with_type(el.typ));
        }
        Ok(v)
    }
}

/// Errors unless `el` has type `typ`.
pub(crate) fn expect_type(el: &Element, typ: u64) -> Result<()> {
    if el.typ == typ {
        Ok(())
    } else {
        Err(Error::new(el.start, ErrorKind::Unexpected { expected: typ }).with_type(el.typ))
    }
}

/// Walks the sub-elements of one element (or of a whole buffer), handing out
/// the recognised ones and applying the evolvability rule to the others:
/// unknown non-critical elements are skipped, unknown critical ones are errors.
/// A recognised element may appear at most once; with `ordered`, recognised
/// elements must also follow the order of the `known` list.
pub(crate) struct Fields<'a> {
    r: Reader<'a>,
    context: u64,
    ordered: bool,
    last: usize,
    seen: u64,
}

impl<'a> Fields<'a> {
    /// The sub-elements of `el`.
    pub(crate) fn inside(r: &Reader<'a>, el: &Element, ordered: bool) -> Self {
        Fields {
            r: Reader::inside(r.buffer(), el),
            context: el.typ,
            ordered,
            last: 0,
            seen: 0,
        }
    }

    /// The elements of a whole buffer; `context` names it in errors.
    pub(crate) fn over(buf: &'a Bytes, context: u64, ordered: bool) -> Self {
        Fields {
            r: Reader::new(buf),
            context,
            ordered,
            last: 0,
            seen: 0,
        }
    }

    /// The reader, for reading values of handed-out elements.
    pub(crate) fn reader(&self) -> &Reader<'a> {
        &self.r
    }

    /// The next recognised element as (index into `known`, element), or
    /// `None` at the end. `known` has at most 64 entries.
    pub(crate) fn next(&mut self, known: &[u64]) -> Result<Option<(usize, Element)>> {
        while !self.r.is_empty() {
            let e = self.r.read()?;
            let Some(i) = known.iter().position(|&t| t == e.typ) else {
                self.r.unknown(&e, self.context)?;
                continue;
            };
            let bit = 1u64 << (i % 64);
            if self.seen & bit != 0 || (self.ordered && i < self.last) {
                return Err(Error::new(e.start, ErrorKind::OutOfOrder).with_type(e.typ));
            }
            self.seen |= bit;
            self.last = i;
            return Ok(Some((i, e)));
        }
        Ok(None)
    }

    /// The value of `e` as a NonNegativeInteger.
    pub(crate) fn nni(&self, e: &Element) -> Result<u64> {
        self.r.nni(e)
    }

    /// The value of `e` as a UTF-8 string.
    pub(crate) fn string(&self, e: &Element) -> Result<String> {
        utf8(&self.r, e)
    }
}

/// The value of `e` as a UTF-8 string.
pub(crate) fn utf8(r: &Reader<'_>, e: &Element) -> Result<String> {
    std::str::from_utf8(r.value_ref(e))
        .map(str::to_owned)
        .map_err(|_| {
            Error::new(e.start, ErrorKind::Invalid("string is not valid UTF-8")).with_type(e.typ)
        })
}

/// Unwraps a required field, or reports it missing from `el`.
pub(crate) fn required<T>(v: Option<T>, element: u64, el: &Element) -> Result<T> {
    v.ok_or_else(|| Error::new(el.start, ErrorKind::Missing { element }).with_type(el.typ))
}

/// Size of an optional NonNegativeInteger element.
pub(crate) fn opt_nni_len(typ: u64, v: Option<u64>) -> usize {
    v.map_or(0, |n| tlv::nni_tlv_len(typ, n))
}

/// Writes an optional NonNegativeInteger element.
pub(crate) fn put_opt_nni(buf: &mut impl BufMut, typ: u64, v: Option<u64>) {
    if let Some(n) = v {
        tlv::put_nni_tlv(buf, typ, n);
    }
}

/// Size of a string element.
pub(crate) fn str_len(typ: u64, s: &str) -> usize {
    tlv::tlv_len(typ, s.len())
}

/// Size of the NonNegativeInteger elements in `fields`.
pub(crate) fn nnis_len(fields: &[(u64, u64)]) -> usize {
    fields.iter().map(|&(t, n)| tlv::nni_tlv_len(t, n)).sum()
}

/// Writes the NonNegativeInteger elements in `fields`, in order.
pub(crate) fn put_nnis(buf: &mut impl BufMut, fields: &[(u64, u64)]) {
    for &(t, n) in fields {
        tlv::put_nni_tlv(buf, t, n);
    }
}
