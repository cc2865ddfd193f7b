//! TLV primitives: VAR-NUMBER, NonNegativeInteger, element scanning and the
//! critical-type rule of NDN packet format v0.3.
//!
//! Decoding never copies: a [`Reader`] walks a shared [`Bytes`] buffer and hands
//! out [`Element`]s (positions into that buffer) whose values are cheap slices.

use bytes::{BufMut, Bytes};

use crate::error::{Error, ErrorKind, Result};

/// Largest TLV-LENGTH accepted by any decoder (1 GiB). Anything larger is an
/// error before any allocation is attempted.
pub const MAX_TLV_LENGTH: u64 = 1 << 30;

/// Nesting depth at which decoders give up (a Name inside a KeyLocator inside a
/// SignatureInfo inside a Data inside a Fragment inside an LpPacket is 6).
pub const MAX_DEPTH: usize = 16;

/// Number of bytes the VAR-NUMBER encoding of `n` takes.
#[inline]
pub const fn var_number_len(n: u64) -> usize {
    if n < 253 {
        1
    } else if n <= 0xFFFF {
        3
    } else if n <= 0xFFFF_FFFF {
        5
    } else {
        9
    }
}

/// Appends the shortest VAR-NUMBER encoding of `n`.
#[inline]
pub fn put_var_number(buf: &mut impl BufMut, n: u64) {
    if n < 253 {
        buf.put_u8(n as u8);
    } else if n <= 0xFFFF {
        buf.put_u8(253);
        buf.put_u16(n as u16);
    } else if n <= 0xFFFF_FFFF {
        buf.put_u8(254);
        buf.put_u32(n as u32);
    } else {
        buf.put_u8(255);
        buf.put_u64(n);
    }
}

/// Reads a VAR-NUMBER at `pos`, returning the number and its encoded size.
///
/// Non-minimal encodings (e.g. `FD 00 05` for 5) are rejected: NDN requires the
/// shortest form, and accepting others would let two different byte strings
/// decode to the same packet, which breaks signatures and digests.
#[inline]
pub fn read_var_number(buf: &[u8], pos: usize) -> Result<(u64, usize)> {
    let first = *buf.get(pos).ok_or_else(|| {
        Error::new(
            pos,
            ErrorKind::Truncated {
                needed: 1,
                available: 0,
            },
        )
    })?;
    let (len, n) = match first {
        0..=252 => return Ok((first as u64, 1)),
        253 => (3usize, read_be(buf, pos, 2)?),
        254 => (5, read_be(buf, pos, 4)?),
        255 => (9, read_be(buf, pos, 8)?),
    };
    let minimal = match len {
        3 => n >= 253,
        5 => n > 0xFFFF,
        _ => n > 0xFFFF_FFFF,
    };
    if !minimal {
        return Err(Error::new(pos, ErrorKind::NonMinimalVarNumber));
    }
    Ok((n, len))
}

#[inline]
fn read_be(buf: &[u8], pos: usize, width: usize) -> Result<u64> {
    let bytes = buf.get(pos + 1..pos + 1 + width).ok_or_else(|| {
        Error::new(
            pos,
            ErrorKind::Truncated {
                needed: 1 + width,
                available: buf.len().saturating_sub(pos),
            },
        )
    })?;
    Ok(bytes.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64))
}

/// Encoded size of a NonNegativeInteger value (1, 2, 4 or 8 bytes).
#[inline]
pub const fn nni_len(n: u64) -> usize {
    if n <= 0xFF {
        1
    } else if n <= 0xFFFF {
        2
    } else if n <= 0xFFFF_FFFF {
        4
    } else {
        8
    }
}

/// Appends the shortest NonNegativeInteger encoding of `n` (value only).
#[inline]
pub fn put_nni(buf: &mut impl BufMut, n: u64) {
    match nni_len(n) {
        1 => buf.put_u8(n as u8),
        2 => buf.put_u16(n as u16),
        4 => buf.put_u32(n as u32),
        _ => buf.put_u64(n),
    }
}

/// Decodes a NonNegativeInteger value; its length must be 1, 2, 4 or 8.
#[inline]
pub fn decode_nni(value: &[u8]) -> Option<u64> {
    match value.len() {
        1 | 2 | 4 | 8 => Some(value.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64)),
        _ => None,
    }
}

/// NDN packet format v0.3 rule: types 0–31 are critical ("grandfathered"), and
/// above that a type is critical when it is odd.
#[inline]
pub const fn is_critical(typ: u64) -> bool {
    typ <= 31 || typ & 1 == 1
}

/// Size of a whole TLV element with a value of `value_len` bytes.
#[inline]
pub const fn tlv_len(typ: u64, value_len: usize) -> usize {
    var_number_len(typ) + var_number_len(value_len as u64) + value_len
}

/// Appends a TLV header (type and length).
#[inline]
pub fn put_header(buf: &mut impl BufMut, typ: u64, value_len: usize) {
    put_var_number(buf, typ);
    put_var_number(buf, value_len as u64);
}

/// Appends a whole TLV element.
#[inline]
pub fn put_tlv(buf: &mut impl BufMut, typ: u64, value: &[u8]) {
    put_header(buf, typ, value.len());
    buf.put_slice(value);
}

/// Appends a TLV element holding a NonNegativeInteger.
#[inline]
pub fn put_nni_tlv(buf: &mut impl BufMut, typ: u64, n: u64) {
    put_header(buf, typ, nni_len(n));
    put_nni(buf, n);
}

/// Size of a TLV element holding a NonNegativeInteger.
#[inline]
pub const fn nni_tlv_len(typ: u64, n: u64) -> usize {
    tlv_len(typ, nni_len(n))
}

/// One TLV element: positions into the buffer it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Element {
    /// TLV-TYPE.
    pub typ: u64,
    /// Offset of the first byte of TLV-TYPE.
    pub start: usize,
    /// Offset of the first byte of TLV-VALUE.
    pub value_start: usize,
    /// Offset one past the last byte of TLV-VALUE.
    pub end: usize,
}

impl Element {
    /// Length of TLV-VALUE.
    #[inline]
    pub fn value_len(&self) -> usize {
        self.end - self.value_start
    }
}

/// Reads the one element `wire` must consist of (trailing bytes are an error).
pub fn read_single(wire: &Bytes) -> Result<Element> {
    let mut r = Reader::new(wire);
    let el = r.read()?;
    if !r.is_empty() {
        return Err(Error::new(el.end, ErrorKind::Trailing).with_type(el.typ));
    }
    Ok(el)
}

impl Element {
    /// Errors unless this element has type `typ`.
    pub fn expect(&self, typ: u64) -> Result<()> {
        if self.typ == typ {
            Ok(())
        } else {
            Err(Error::new(self.start, ErrorKind::Unexpected { expected: typ }).with_type(self.typ))
        }
    }
}

/// Walks consecutive TLV elements in `buf[pos..end]`.
///
/// All positions are absolute offsets into `buf`, so errors carry the offset
/// in the original input.
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    /// A reader over the whole buffer.
    pub fn new(buf: &'a Bytes) -> Self {
        Reader {
            buf,
            pos: 0,
            end: buf.len(),
        }
    }

    /// A reader over the value of `el`.
    pub fn inside(buf: &'a Bytes, el: &Element) -> Self {
        Reader {
            buf,
            pos: el.value_start,
            end: el.end,
        }
    }

    /// The underlying shared buffer.
    pub fn buffer(&self) -> &'a Bytes {
        self.buf
    }

    /// Current absolute offset.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// True when no bytes remain.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.end
    }

    /// Reads the next element header and skips over its value.
    pub fn read(&mut self) -> Result<Element> {
        let start = self.pos;
        let region = &self.buf[..self.end];
        let (typ, tl) = read_var_number(region, start)?;
        if typ == 0 {
            return Err(Error::new(start, ErrorKind::ZeroType));
        }
        let (len, ll) = read_var_number(region, start + tl)?;
        if len > MAX_TLV_LENGTH {
            return Err(Error::new(start, ErrorKind::TooLong { length: len }).with_type(typ));
        }
        let value_start = start + tl + ll;
        let available = self.end - value_start;
        if len as usize > available {
            return Err(Error::new(
                start,
                ErrorKind::Truncated {
                    needed: len as usize,
                    available,
                },
            )
            .with_type(typ));
        }
        let end = value_start + len as usize;
        self.pos = end;
        Ok(Element {
            typ,
            start,
            value_start,
            end,
        })
    }

    /// Peeks at the type of the next element without consuming it.
    pub fn peek_type(&self) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        read_var_number(&self.buf[..self.end], self.pos)
            .ok()
            .map(|(t, _)| t)
    }

    /// Value of an element as a shared slice (no copy).
    #[inline]
    pub fn value(&self, el: &Element) -> Bytes {
        self.buf.slice(el.value_start..el.end)
    }

    /// Value of an element as a borrowed slice.
    #[inline]
    pub fn value_ref(&self, el: &Element) -> &'a [u8] {
        &self.buf[el.value_start..el.end]
    }

    /// Decodes an element's value as a NonNegativeInteger.
    pub fn nni(&self, el: &Element) -> Result<u64> {
        decode_nni(self.value_ref(el)).ok_or_else(|| {
            Error::new(
                el.start,
                ErrorKind::BadNni {
                    length: el.value_len(),
                },
            )
            .with_type(el.typ)
        })
    }

    /// Error for an element this decoder does not know: critical ones are
    /// fatal, non-critical ones are to be ignored (returns `Ok`).
    pub fn unknown(&self, el: &Element, context: u64) -> Result<()> {
        if is_critical(el.typ) {
            Err(Error::new(el.start, ErrorKind::UnknownCritical { context }).with_type(el.typ))
        } else {
            Ok(())
        }
    }
}
