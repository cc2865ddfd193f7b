//! Names and name components, with the canonical URI form of ndn-cxx / NDNts.
//!
//! A [`Name`] is its encoded TLV-VALUE (the concatenated component TLVs) in a
//! shared buffer: prefixes are slices, equality is byte equality, and a name
//! decoded from a packet shares the packet's buffer.

use std::cmp::Ordering;
use std::fmt::{self, Write as _};
use std::str::FromStr;

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, ErrorKind, Result};
use crate::tlv::{self, decode_nni, put_header, put_nni, read_var_number, Element, Reader};
use crate::types::*;

/// One name component, borrowed from the name that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ComponentRef<'a> {
    /// TLV-TYPE of the component (1..=65535).
    pub typ: u64,
    /// TLV-VALUE of the component.
    pub value: &'a [u8],
    /// The whole component TLV.
    pub wire: &'a [u8],
}

impl<'a> ComponentRef<'a> {
    /// The value as a NonNegativeInteger, if it is one.
    pub fn as_number(&self) -> Option<u64> {
        decode_nni(self.value)
    }

    /// Segment number, for a SegmentNameComponent.
    pub fn as_segment(&self) -> Option<u64> {
        (self.typ == COMP_SEGMENT)
            .then(|| self.as_number())
            .flatten()
    }

    /// Version number, for a VersionNameComponent.
    pub fn as_version(&self) -> Option<u64> {
        (self.typ == COMP_VERSION)
            .then(|| self.as_number())
            .flatten()
    }

    /// An owned copy.
    pub fn to_owned(&self) -> Component {
        Component {
            wire: Bytes::copy_from_slice(self.wire),
        }
    }

    /// Canonical order of components: TLV-TYPE, then TLV-LENGTH, then bytes.
    pub fn canonical_cmp(&self, other: &ComponentRef<'_>) -> Ordering {
        self.typ
            .cmp(&other.typ)
            .then(self.value.len().cmp(&other.value.len()))
            .then_with(|| self.value.cmp(other.value))
    }
}

impl fmt::Display for ComponentRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let alias = match self.typ {
            COMP_IMPLICIT_DIGEST if self.value.len() == 32 => {
                f.write_str("sha256digest=")?;
                return write_hex(f, self.value);
            }
            COMP_PARAMS_DIGEST if self.value.len() == 32 => {
                f.write_str("params-sha256=")?;
                return write_hex(f, self.value);
            }
            COMP_SEGMENT => "seg",
            COMP_BYTE_OFFSET => "off",
            COMP_VERSION => "v",
            COMP_TIMESTAMP => "t",
            COMP_SEQUENCE_NUM => "seq",
            _ => "",
        };
        if !alias.is_empty() {
            if let Some(n) = self.as_number() {
                return write!(f, "{alias}={n}");
            }
        }
        if self.typ != COMP_GENERIC {
            write!(f, "{}=", self.typ)?;
        }
        write_escaped(f, self.value)
    }
}

/// A 32-byte digest in lowercase hex.
fn write_hex(f: &mut fmt::Formatter<'_>, v: &[u8]) -> fmt::Result {
    let mut buf = [0u8; 64];
    hex::encode_to_slice(v, &mut buf).map_err(|_| fmt::Error)?;
    f.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
}

fn write_escaped(f: &mut fmt::Formatter<'_>, v: &[u8]) -> fmt::Result {
    if v.iter().all(|&b| b == b'.') {
        f.write_str("...")?;
        for _ in v {
            f.write_char('.')?;
        }
        return Ok(());
    }
    for &b in v {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            f.write_char(b as char)?;
        } else {
            write!(f, "%{b:02X}")?;
        }
    }
    Ok(())
}

/// An owned name component: its whole TLV in a shared buffer.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Component {
    wire: Bytes,
}

impl Component {
    /// A component of any type (1..=65535).
    pub fn new(typ: u64, value: &[u8]) -> Result<Self> {
        check_component(typ, value.len(), 0)?;
        let mut b = BytesMut::with_capacity(tlv::tlv_len(typ, value.len()));
        tlv::put_tlv(&mut b, typ, value);
        Ok(Component { wire: b.freeze() })
    }

    /// A GenericNameComponent.
    pub fn generic(value: &[u8]) -> Self {
        Self::unchecked(COMP_GENERIC, value)
    }

    /// A KeywordNameComponent (e.g. `32=metadata`).
    pub fn keyword(value: &[u8]) -> Self {
        Self::unchecked(COMP_KEYWORD, value)
    }

    /// A component whose value is a NonNegativeInteger (segment, version, …).
    pub fn number(typ: u64, n: u64) -> Self {
        let mut b = BytesMut::with_capacity(tlv::nni_tlv_len(typ, n));
        tlv::put_nni_tlv(&mut b, typ, n);
        Component { wire: b.freeze() }
    }

    /// A SegmentNameComponent.
    pub fn segment(n: u64) -> Self {
        Self::number(COMP_SEGMENT, n)
    }

    /// A VersionNameComponent.
    pub fn version(n: u64) -> Self {
        Self::number(COMP_VERSION, n)
    }

    /// An ImplicitSha256DigestComponent.
    pub fn implicit_digest(d: &[u8; 32]) -> Self {
        Self::unchecked(COMP_IMPLICIT_DIGEST, d)
    }

    /// A ParametersSha256DigestComponent.
    pub fn params_digest(d: &[u8; 32]) -> Self {
        Self::unchecked(COMP_PARAMS_DIGEST, d)
    }

    fn unchecked(typ: u64, value: &[u8]) -> Self {
        let mut b = BytesMut::with_capacity(tlv::tlv_len(typ, value.len()));
        tlv::put_tlv(&mut b, typ, value);
        Component { wire: b.freeze() }
    }

    /// Decodes one component TLV (the whole buffer must be exactly one).
    pub fn decode(wire: Bytes) -> Result<Self> {
        let mut r = Reader::new(&wire);
        let el = r.read()?;
        check_component(el.typ, el.value_len(), el.start)?;
        if !r.is_empty() {
            return Err(Error::new(el.end, ErrorKind::Trailing).with_type(el.typ));
        }
        Ok(Component { wire })
    }

    /// Borrowed view.
    pub fn as_ref(&self) -> ComponentRef<'_> {
        // The wire was validated at construction; parse it again without failing.
        let (typ, tl) = read_var_number(&self.wire, 0).unwrap_or((0, 0));
        let (_, ll) = read_var_number(&self.wire, tl).unwrap_or((0, 0));
        ComponentRef {
            typ,
            value: &self.wire[(tl + ll).min(self.wire.len())..],
            wire: &self.wire,
        }
    }

    /// The whole component TLV.
    pub fn wire(&self) -> &Bytes {
        &self.wire
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

impl fmt::Debug for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Component({self})")
    }
}

fn check_component(typ: u64, len: usize, offset: usize) -> Result<()> {
    if typ == 0 || typ > 0xFFFF {
        return Err(Error::new(
            offset,
            ErrorKind::Invalid("name component type out of range 1..=65535"),
        )
        .with_type(typ));
    }
    if (typ == COMP_IMPLICIT_DIGEST || typ == COMP_PARAMS_DIGEST) && len != 32 {
        return Err(Error::new(
            offset,
            ErrorKind::Invalid("digest component must be 32 bytes"),
        )
        .with_type(typ));
    }
    Ok(())
}

/// An NDN name.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Name {
    /// Concatenated component TLVs (the Name's TLV-VALUE), validated.
    value: Bytes,
}

impl Name {
    /// The empty name `/`.
    pub fn new() -> Self {
        Name::default()
    }

    /// Decodes the value of a Name element read by `r`, sharing its buffer.
    pub fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        if el.typ != NAME {
            return Err(
                Error::new(el.start, ErrorKind::Unexpected { expected: NAME }).with_type(el.typ),
            );
        }
        let mut inner = Reader::inside(r.buffer(), el);
        while !inner.is_empty() {
            let c = inner.read()?;
            check_component(c.typ, c.value_len(), c.start)?;
        }
        Ok(Name { value: r.value(el) })
    }

    /// Decodes a whole Name TLV (type 7); the buffer must hold exactly one.
    pub fn decode(wire: &Bytes) -> Result<Self> {
        let mut r = Reader::new(wire);
        let el = r.read()?;
        let n = Self::decode_element(&r, &el)?;
        if !r.is_empty() {
            return Err(Error::new(el.end, ErrorKind::Trailing).with_type(NAME));
        }
        Ok(n)
    }

    /// Builds a name from its TLV-VALUE (concatenated components), validating it.
    pub fn from_value(value: Bytes) -> Result<Self> {
        let mut r = Reader::new(&value);
        while !r.is_empty() {
            let c = r.read()?;
            check_component(c.typ, c.value_len(), c.start)?;
        }
        Ok(Name { value })
    }

    /// Builds a name from components.
    pub fn from_components<'c>(comps: impl IntoIterator<Item = &'c Component>) -> Self {
        let mut b = BytesMut::new();
        for c in comps {
            b.put_slice(&c.wire);
        }
        Name { value: b.freeze() }
    }

    /// The TLV-VALUE: concatenated component TLVs.
    pub fn value(&self) -> &Bytes {
        &self.value
    }

    /// Iterates over the components.
    pub fn components(&self) -> Components<'_> {
        Components { rest: &self.value }
    }

    /// Number of components.
    pub fn len(&self) -> usize {
        self.components().count()
    }

    /// True for the empty name `/`.
    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// The `i`-th component; negative indices count from the end.
    pub fn get(&self, i: isize) -> Option<ComponentRef<'_>> {
        if i >= 0 {
            self.components().nth(i as usize)
        } else {
            let n = self.len() as isize;
            (n + i >= 0)
                .then(|| self.components().nth((n + i) as usize))
                .flatten()
        }
    }

    /// The last component.
    pub fn last(&self) -> Option<ComponentRef<'_>> {
        self.components().last()
    }

    /// The first `n` components (a slice of the same buffer). A negative `n`
    /// drops that many components from the end.
    pub fn prefix(&self, n: isize) -> Name {
        let count = if n >= 0 {
            n as usize
        } else {
            self.len().saturating_sub(n.unsigned_abs())
        };
        let mut end = 0;
        for c in self.components().take(count) {
            end += c.wire.len();
        }
        Name {
            value: self.value.slice(..end),
        }
    }

    /// A new name with `c` appended.
    pub fn append(&self, c: &Component) -> Name {
        let mut b = BytesMut::with_capacity(self.value.len() + c.wire.len());
        b.put_slice(&self.value);
        b.put_slice(&c.wire);
        Name { value: b.freeze() }
    }

    /// A new name with all of `other`'s components appended.
    pub fn join(&self, other: &Name) -> Name {
        let mut b = BytesMut::with_capacity(self.value.len() + other.value.len());
        b.put_slice(&self.value);
        b.put_slice(&other.value);
        Name { value: b.freeze() }
    }

    /// True when `self` is a prefix of (or equal to) `other`.
    ///
    /// Both are validated component sequences, so a byte prefix is a
    /// component prefix.
    pub fn is_prefix_of(&self, other: &Name) -> bool {
        other.value.starts_with(&self.value)
    }

    /// Size of the Name TLV.
    pub fn encoded_len(&self) -> usize {
        tlv::tlv_len(NAME, self.value.len())
    }

    /// Writes the Name TLV.
    pub fn encode_to(&self, buf: &mut impl BufMut) {
        put_header(buf, NAME, self.value.len());
        buf.put_slice(&self.value);
    }

    /// The Name TLV as bytes.
    pub fn to_tlv(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.encoded_len());
        self.encode_to(&mut b);
        b.freeze()
    }

    /// The name without a trailing ImplicitSha256DigestComponent.
    pub fn without_implicit_digest(&self) -> Name {
        match self.last() {
            Some(c) if c.typ == COMP_IMPLICIT_DIGEST => self.prefix(-1),
            _ => self.clone(),
        }
    }

    /// Parses the canonical URI form (`/a/seg=3/v=7/32=metadata`, `ndn:` and
    /// percent-escapes accepted).
    pub fn from_uri(uri: &str) -> Result<Name> {
        parse_uri(uri)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            return f.write_str("/");
        }
        for c in self.components() {
            f.write_char('/')?;
            c.fmt(f)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

impl FromStr for Name {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        parse_uri(s)
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    /// NDN canonical order: component by component (type, then length, then
    /// value bytes); a prefix sorts first.
    ///
    /// Computed as one `memcmp` of the two TLV-VALUEs, which gives the same
    /// order because every `Name` holds *minimal* VAR-NUMBER encodings (the
    /// decoder rejects others, the encoders write only them):
    /// - equal components have identical bytes, so the first differing byte
    ///   lies in the first differing component (or one name is a prefix of
    ///   the other, and the shorter sorts first in both orders);
    /// - minimal VAR-NUMBERs are prefix-free (the first byte fixes the width:
    ///   < 253 one byte, 253/254/255 then 2/4/8 big-endian bytes) and ordered
    ///   like the numbers they encode (a wider form starts with a larger
    ///   first byte and encodes a larger number), so within that component
    ///   the first differing byte is in the TYPE if the types differ, else in
    ///   the LENGTH if the lengths differ, else in the value.
    ///
    /// `tests::byte_order_is_canonical_order` checks this against the
    /// component-by-component definition.
    fn cmp(&self, other: &Self) -> Ordering {
        self.value.as_ref().cmp(other.value.as_ref())
    }
}

/// Iterator over a name's components.
#[derive(Clone)]
pub struct Components<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Components<'a> {
    type Item = ComponentRef<'a>;

    fn next(&mut self) -> Option<ComponentRef<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        // Validated at construction: these reads cannot fail, but a failure
        // ends the iteration instead of panicking.
        let (typ, tl) = read_var_number(self.rest, 0).ok()?;
        let (len, ll) = read_var_number(self.rest, tl).ok()?;
        let end = tl + ll + len as usize;
        let wire = self.rest.get(..end)?;
        self.rest = &self.rest[end..];
        Some(ComponentRef {
            typ,
            value: &wire[tl + ll..],
            wire,
        })
    }
}

fn parse_uri(uri: &str) -> Result<Name> {
    let mut s = uri.trim();
    if let Some(rest) = s.strip_prefix("ndn:") {
        s = rest;
        if let Some(auth) = s.strip_prefix("//") {
            s = auth.find('/').map_or("", |i| &auth[i..]);
        }
    }
    if let Some(i) = s.find(['?', '#']) {
        s = &s[..i];
    }
    if !s.starts_with('/') {
        return Err(Error::uri(format!("{uri:?} does not start with '/'")));
    }
    let s = s.strip_prefix('/').unwrap_or(s);
    let s = s.strip_suffix('/').unwrap_or(s);
    let mut b = BytesMut::with_capacity(s.len() + 8);
    if s.is_empty() {
        return Ok(Name::new());
    }
    for (i, part) in s.split('/').enumerate() {
        parse_component(part, &mut b).map_err(|e| match e.kind {
            ErrorKind::Uri(m) => Error::uri(format!("component {i} ({part:?}) of {uri:?}: {m}")),
            _ => e,
        })?;
    }
    Ok(Name { value: b.freeze() })
}

fn parse_component(part: &str, out: &mut BytesMut) -> Result<()> {
    if part.is_empty() {
        return Err(Error::uri(
            "empty component (write '...' for an empty generic component)",
        ));
    }
    let (typ, text) = match part.split_once('=') {
        Some((t, v)) => match t {
            "sha256digest" => return put_digest(COMP_IMPLICIT_DIGEST, v, out),
            "params-sha256" => return put_digest(COMP_PARAMS_DIGEST, v, out),
            "seg" => return put_number(COMP_SEGMENT, v, out),
            "off" => return put_number(COMP_BYTE_OFFSET, v, out),
            "v" => return put_number(COMP_VERSION, v, out),
            "t" => return put_number(COMP_TIMESTAMP, v, out),
            "seq" => return put_number(COMP_SEQUENCE_NUM, v, out),
            _ if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) => {
                let typ: u64 = t
                    .parse()
                    .map_err(|_| Error::uri("component type too large"))?;
                if typ == 0 || typ > 0xFFFF {
                    return Err(Error::uri(format!(
                        "component type {typ} out of range 1..=65535"
                    )));
                }
                (typ, v)
            }
            _ => (COMP_GENERIC, part),
        },
        None => (COMP_GENERIC, part),
    };
    let value = unescape(text)?;
    if (typ == COMP_IMPLICIT_DIGEST || typ == COMP_PARAMS_DIGEST) && value.len() != 32 {
        return Err(Error::uri("digest component must be 32 bytes"));
    }
    tlv::put_tlv(out, typ, &value);
    Ok(())
}

fn put_digest(typ: u64, digits: &str, out: &mut BytesMut) -> Result<()> {
    if digits.len() != 64 {
        return Err(Error::uri("digest must be 64 hexadecimal digits"));
    }
    let mut v = [0u8; 32];
    hex::decode_to_slice(digits, &mut v)
        .map_err(|_| Error::uri("digest must be 64 hexadecimal digits"))?;
    tlv::put_tlv(out, typ, &v);
    Ok(())
}

fn put_number(typ: u64, text: &str, out: &mut BytesMut) -> Result<()> {
    if text.is_empty() || !text.bytes().all(|c| c.is_ascii_digit()) {
        return Err(Error::uri(format!(
            "{text:?} is not a non-negative decimal number"
        )));
    }
    let n: u64 = text
        .parse()
        .map_err(|_| Error::uri("number exceeds 64 bits"))?;
    put_header(out, typ, tlv::nni_len(n));
    put_nni(out, n);
    Ok(())
}

fn unescape(text: &str) -> Result<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut v = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .ok_or_else(|| Error::uri("truncated percent-escape"))?;
            let s = std::str::from_utf8(hex).map_err(|_| Error::uri("bad percent-escape"))?;
            let b = u8::from_str_radix(s, 16).map_err(|_| Error::uri("bad percent-escape"))?;
            v.push(b);
            i += 3;
        } else {
            v.push(bytes[i]);
            i += 1;
        }
    }
    if v.iter().all(|&b| b == b'.') {
        if v.len() < 3 {
            return Err(Error::uri("'.' and '..' are not valid components"));
        }
        v.truncate(v.len() - 3);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: component by component, a prefix first.
    fn component_order(a: &Name, b: &Name) -> Ordering {
        let (mut x, mut y) = (a.components(), b.components());
        loop {
            match (x.next(), y.next()) {
                (None, None) => return Ordering::Equal,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(p), Some(q)) => match p.canonical_cmp(&q) {
                    Ordering::Equal => {}
                    o => return o,
                },
            }
        }
    }

    #[test]
    fn byte_order_is_canonical_order() {
        // Types and lengths chosen to straddle every VAR-NUMBER width
        // boundary (252/253, 65535/65536), values that share prefixes.
        let types = [3u64, 8, 9, 32, 50, 252, 253, 254, 255, 256, 65535];
        let lens = [0usize, 1, 2, 252, 253, 254, 300, 65535, 65536];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let comp = |next: &mut dyn FnMut() -> u64| {
            let t = types[(next() % types.len() as u64) as usize];
            let l = lens[(next() % lens.len() as u64) as usize];
            let fill = (next() % 3) as u8;
            let mut v = vec![fill; l];
            if l > 0 && next() % 2 == 0 {
                v[l - 1] = fill + 1;
            }
            Component::new(t, &v).unwrap()
        };
        let mut names = vec![Name::new()];
        for _ in 0..300 {
            let n = (next() % 4) as usize;
            let mut name = if next() % 3 == 0 {
                names[(next() % names.len() as u64) as usize].clone()
            } else {
                Name::new()
            };
            for _ in 0..n {
                name = name.append(&comp(&mut next));
            }
            names.push(name);
        }
        for a in &names {
            for b in &names {
                assert_eq!(a.cmp(b), component_order(a, b), "{a} vs {b}");
            }
        }
    }

    fn rt(uri: &str) -> String {
        Name::from_uri(uri).unwrap().to_string()
    }

    #[test]
    fn uri_round_trips() {
        assert_eq!(rt("/"), "/");
        assert_eq!(rt("ndn:/a/b"), "/a/b");
        assert_eq!(rt("/a/b/"), "/a/b");
        assert_eq!(
            rt("/seg=3/v=1000/off=0/t=5/seq=9"),
            "/seg=3/v=1000/off=0/t=5/seq=9"
        );
        assert_eq!(rt("/50=%03"), "/seg=3");
        assert_eq!(rt("/50=%00%03"), "/seg=3");
        assert_eq!(rt("/50=%00%00%03"), "/50=%00%00%03");
        assert_eq!(rt("/32=metadata"), "/32=metadata");
        assert_eq!(rt("/8=abc"), "/abc");
        assert_eq!(rt("/a%20b/%2F"), "/a%20b/%2F");
        assert_eq!(rt("/..../...."), "/..../....");
        assert_eq!(rt("/..."), "/...");
        assert_eq!(rt("/65535=x/252=..."), "/65535=x/252=...");
        assert_eq!(rt("/a=b"), "/a%3Db");
        let d = "/sha256digest=".to_string() + &"ab".repeat(32);
        assert_eq!(rt(&d), d);
        let p = "/params-sha256=".to_string() + &"0f".repeat(32);
        assert_eq!(rt(&p), p);
        assert_eq!(rt("/a?x=1#frag"), "/a");
    }

    #[test]
    fn uri_errors() {
        for bad in [
            "a",
            "/a//b",
            "/.",
            "/..",
            "/seg=x",
            "/0=a",
            "/65536=a",
            "/sha256digest=00",
            "/%4",
        ] {
            assert!(Name::from_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn empty_generic_component_is_three_periods() {
        let n = Name::from_uri("/...").unwrap();
        assert_eq!(n.value().as_ref(), &[8, 0]);
    }

    #[test]
    fn prefix_and_order() {
        let n = Name::from_uri("/a/b/c").unwrap();
        assert_eq!(n.len(), 3);
        assert_eq!(n.prefix(2).to_string(), "/a/b");
        assert_eq!(n.prefix(-1).to_string(), "/a/b");
        assert!(n.prefix(2).is_prefix_of(&n));
        assert!(!Name::from_uri("/a/bb").unwrap().is_prefix_of(&n));
        let mut v: Vec<Name> = ["/b", "/a/b", "/a", "/aa", "/seg=1", "/c"]
            .iter()
            .map(|s| Name::from_uri(s).unwrap())
            .collect();
        v.sort();
        let s: Vec<String> = v.iter().map(|n| n.to_string()).collect();
        assert_eq!(s, ["/a", "/a/b", "/b", "/c", "/aa", "/seg=1"]);
        assert_eq!(n.get(-1).unwrap().value, b"c");
    }

    #[test]
    fn decode_rejects_bad_components() {
        let bad = Bytes::from_static(&[7, 3, 1, 1, 0]);
        assert!(Name::decode(&bad).is_err());
        let zero = Bytes::from_static(&[7, 2, 0, 0]);
        assert!(Name::decode(&zero).is_err());
        let ok = Bytes::from_static(&[7, 5, 8, 1, b'a', 32, 0]);
        assert_eq!(Name::decode(&ok).unwrap().to_string(), "/a/32=...");
    }
}
