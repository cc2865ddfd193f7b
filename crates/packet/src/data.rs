//! Data packets: zero-copy decoding, single-buffer signed encoding.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind, Result};
use crate::name::{Component, Name};
use crate::signature::SignatureInfo;
use crate::tlv::{self, Element, Reader};
use crate::types::*;

/// MetaInfo of a Data packet. `None` fields are absent on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetaInfo {
    /// ContentType.
    pub content_type: Option<u64>,
    /// FreshnessPeriod in milliseconds.
    pub freshness_period: Option<u64>,
    /// FinalBlockId (a name component).
    pub final_block_id: Option<Component>,
}

impl MetaInfo {
    fn value_len(&self) -> usize {
        self.content_type
            .map_or(0, |t| tlv::nni_tlv_len(CONTENT_TYPE, t))
            + self
                .freshness_period
                .map_or(0, |f| tlv::nni_tlv_len(FRESHNESS_PERIOD, f))
            + self
                .final_block_id
                .as_ref()
                .map_or(0, |c| tlv::tlv_len(FINAL_BLOCK_ID, c.wire().len()))
    }

    fn encoded_len(&self) -> usize {
        tlv::tlv_len(META_INFO, self.value_len())
    }

    fn encode_to(&self, buf: &mut impl BufMut) {
        tlv::put_header(buf, META_INFO, self.value_len());
        if let Some(t) = self.content_type {
            tlv::put_nni_tlv(buf, CONTENT_TYPE, t);
        }
        if let Some(f) = self.freshness_period {
            tlv::put_nni_tlv(buf, FRESHNESS_PERIOD, f);
        }
        if let Some(c) = &self.final_block_id {
            tlv::put_tlv(buf, FINAL_BLOCK_ID, c.wire());
        }
    }

    fn decode(r: &Reader<'_>, el: &Element) -> Result<Self> {
        let mut inner = Reader::inside(r.buffer(), el);
        let mut mi = MetaInfo::default();
        let mut last = 0u8;
        while !inner.is_empty() {
            let e = inner.read()?;
            let order = match e.typ {
                CONTENT_TYPE => 1,
                FRESHNESS_PERIOD => 2,
                FINAL_BLOCK_ID => 3,
                _ => {
                    inner.unknown(&e, META_INFO)?;
                    continue;
                }
            };
            if order <= last {
                return Err(Error::new(e.start, ErrorKind::OutOfOrder).with_type(e.typ));
            }
            last = order;
            match e.typ {
                CONTENT_TYPE => mi.content_type = Some(inner.nni(&e)?),
                FRESHNESS_PERIOD => mi.freshness_period = Some(inner.nni(&e)?),
                _ => {
                    mi.final_block_id = Some(
                        Component::decode(inner.value(&e))
                            .map_err(|err| err.shifted(e.value_start))?,
                    )
                }
            }
        }
        Ok(mi)
    }
}

/// A decoded (or freshly encoded) Data packet. Immutable: its fields always
/// agree with its wire encoding. Build new packets with [`DataBuilder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data {
    name: Name,
    meta_info: Option<MetaInfo>,
    content: Option<Bytes>,
    sig_info: SignatureInfo,
    sig_value: Bytes,
    wire: Bytes,
    signed: Range<usize>,
    content_digest: ContentDigest,
}

/// The SHA-256 of a Data's content, computed once on first use
/// ([`Data::content_sha256`]). Derived from the (immutable) content, so it
/// takes no part in equality.
#[derive(Clone, Default)]
struct ContentDigest(std::sync::OnceLock<[u8; 32]>);

impl PartialEq for ContentDigest {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ContentDigest {}

impl std::fmt::Debug for ContentDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("..")
    }
}

impl Data {
    /// Decodes a Data TLV; `wire` must hold exactly one.
    pub fn decode(wire: Bytes) -> Result<Data> {
        let el = tlv::read_single(&wire)?;
        let r = Reader::new(&wire);
        let mut d = Self::decode_element(&r, &el)?;
        d.wire = wire;
        Ok(d)
    }

    /// Decodes the Data element `el` of a larger buffer (positions are
    /// rebased onto the element's own wire).
    pub fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Data> {
        el.expect(DATA)?;
        let mut inner = Reader::inside(r.buffer(), el);
        let first = inner.read()?;
        if first.typ != NAME {
            return Err(
                Error::new(first.start, ErrorKind::Missing { element: NAME }).with_type(DATA),
            );
        }
        let name = Name::decode_element(&inner, &first)?;
        let mut meta_info = None;
        let mut content = None;
        let mut sig_info = None;
        let mut sig_value = None;
        let mut signed_end = 0;
        let mut last = 0u8;
        while !inner.is_empty() {
            let e = inner.read()?;
            let order = match e.typ {
                META_INFO => 1,
                CONTENT => 2,
                SIGNATURE_INFO => 3,
                SIGNATURE_VALUE => 4,
                _ => {
                    inner.unknown(&e, DATA)?;
                    continue;
                }
            };
            if order <= last {
                return Err(Error::new(e.start, ErrorKind::OutOfOrder).with_type(e.typ));
            }
            last = order;
            match e.typ {
                META_INFO => meta_info = Some(MetaInfo::decode(&inner, &e)?),
                CONTENT => content = Some(inner.value(&e)),
                SIGNATURE_INFO => {
                    sig_info = Some(SignatureInfo::decode(&inner, &e)?);
                    signed_end = e.end;
                }
                _ => sig_value = Some(inner.value(&e)),
            }
        }
        let sig_info = sig_info.ok_or_else(|| {
            Error::new(
                el.start,
                ErrorKind::Missing {
                    element: SIGNATURE_INFO,
                },
            )
            .with_type(DATA)
        })?;
        let sig_value = sig_value.ok_or_else(|| {
            Error::new(
                el.start,
                ErrorKind::Missing {
                    element: SIGNATURE_VALUE,
                },
            )
            .with_type(DATA)
        })?;
        Ok(Data {
            name,
            meta_info,
            content,
            sig_info,
            sig_value,
            wire: r.buffer().slice(el.start..el.end),
            signed: first.start - el.start..signed_end - el.start,
            content_digest: ContentDigest::default(),
        })
    }

    /// Name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// MetaInfo, if present on the wire.
    pub fn meta_info(&self) -> Option<&MetaInfo> {
        self.meta_info.as_ref()
    }

    /// ContentType (absent means BLOB).
    pub fn content_type(&self) -> u64 {
        self.meta_info
            .as_ref()
            .and_then(|m| m.content_type)
            .unwrap_or(content_type::BLOB)
    }

    /// FreshnessPeriod in ms (absent means 0).
    pub fn freshness_period(&self) -> u64 {
        self.meta_info
            .as_ref()
            .and_then(|m| m.freshness_period)
            .unwrap_or(0)
    }

    /// FinalBlockId.
    pub fn final_block_id(&self) -> Option<&Component> {
        self.meta_info
            .as_ref()
            .and_then(|m| m.final_block_id.as_ref())
    }

    /// Content (empty when absent).
    pub fn content(&self) -> &[u8] {
        self.content.as_deref().unwrap_or(&[])
    }

    /// SHA-256 of the content, computed on first use and kept (clones made
    /// after that share nothing but the value). A consumer's socket reader
    /// can compute it ahead, off the thread that verifies.
    pub fn content_sha256(&self) -> [u8; 32] {
        *self
            .content_digest
            .0
            .get_or_init(|| crate::sha256(self.content()))
    }

    /// Content as a shared buffer, `None` when absent on the wire.
    pub fn content_bytes(&self) -> Option<&Bytes> {
        self.content.as_ref()
    }

    /// SignatureInfo.
    pub fn sig_info(&self) -> &SignatureInfo {
        &self.sig_info
    }

    /// SignatureValue.
    pub fn sig_value(&self) -> &Bytes {
        &self.sig_value
    }

    /// The whole Data TLV.
    pub fn wire(&self) -> &Bytes {
        &self.wire
    }

    /// The bytes covered by the signature: Name through SignatureInfo.
    pub fn signed_portion(&self) -> &[u8] {
        &self.wire[self.signed.clone()]
    }

    /// SHA-256 of the whole Data TLV (the implicit digest).
    pub fn implicit_digest(&self) -> [u8; 32] {
        Sha256::digest(&self.wire).into()
    }

    /// The name with the implicit digest component appended.
    pub fn full_name(&self) -> Name {
        self.name
            .append(&Component::implicit_digest(&self.implicit_digest()))
    }

    /// A builder holding this packet's fields (to re-encode or derive).
    pub fn to_builder(&self) -> DataBuilder {
        DataBuilder {
            name: self.name.clone(),
            meta_info: self.meta_info.clone(),
            content: self.content.clone(),
            sig_info: self.sig_info.clone(),
        }
    }

    /// True when `interest_name` (with `can_be_prefix`) selects this Data,
    /// including a trailing implicit digest.
    pub fn matches_name(&self, interest_name: &Name, can_be_prefix: bool) -> bool {
        if interest_name == &self.name {
            return true;
        }
        if can_be_prefix && interest_name.is_prefix_of(&self.name) {
            return true;
        }
        match interest_name.last() {
            Some(c) if c.typ == COMP_IMPLICIT_DIGEST => {
                interest_name.prefix(-1) == self.name && c.value == self.implicit_digest()
            }
            _ => false,
        }
    }
}

/// Fields of a Data packet to be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataBuilder {
    /// Name.
    pub name: Name,
    /// MetaInfo (`None`: no MetaInfo element).
    pub meta_info: Option<MetaInfo>,
    /// Content (`None`: no Content element).
    pub content: Option<Bytes>,
    /// SignatureInfo.
    pub sig_info: SignatureInfo,
}

/// Room reserved in front of the signed portion for the Data TLV header.
const HEADROOM: usize = 1 + 9;

impl DataBuilder {
    /// A Data with `name`, no MetaInfo, no Content, DigestSha256 SignatureInfo.
    pub fn new(name: Name) -> Self {
        DataBuilder {
            name,
            meta_info: None,
            content: None,
            sig_info: SignatureInfo::new(sig_type::DIGEST_SHA256),
        }
    }

    /// Sets the content.
    pub fn content(mut self, content: impl Into<Bytes>) -> Self {
        self.content = Some(content.into());
        self
    }

    /// Sets the FreshnessPeriod (ms).
    pub fn freshness_period(mut self, ms: u64) -> Self {
        self.meta_info
            .get_or_insert_with(Default::default)
            .freshness_period = Some(ms);
        self
    }

    /// Sets the ContentType.
    pub fn content_type(mut self, t: u64) -> Self {
        self.meta_info
            .get_or_insert_with(Default::default)
            .content_type = Some(t);
        self
    }

    /// Sets the FinalBlockId.
    pub fn final_block_id(mut self, c: Component) -> Self {
        self.meta_info
            .get_or_insert_with(Default::default)
            .final_block_id = Some(c);
        self
    }

    /// Size of the signed portion (Name through SignatureInfo).
    pub fn signed_len(&self) -> usize {
        self.name.encoded_len()
            + self.meta_info.as_ref().map_or(0, |m| m.encoded_len())
            + self
                .content
                .as_ref()
                .map_or(0, |c| tlv::tlv_len(CONTENT, c.len()))
            + self.sig_info.encoded_len(SIGNATURE_INFO)
    }

    /// Encodes the packet into one buffer: the signed portion is written,
    /// `sign` computes the SignatureValue over it, and the value and the
    /// outer header are written around it without copying. `max_sig_len` is a
    /// capacity hint.
    pub fn sign_with<E>(
        &self,
        max_sig_len: usize,
        sign: impl FnOnce(&[u8]) -> std::result::Result<Bytes, E>,
    ) -> std::result::Result<Data, E> {
        let content = self
            .content
            .as_deref()
            .map(ContentSource::<fn(&mut [u8]) -> std::result::Result<(), E>>::Given);
        self.encode(content, max_sig_len, sign)
    }

    /// [`DataBuilder::sign_with`] with `len` content bytes that `fill`
    /// writes in place (e.g. read straight from a file into the packet),
    /// instead of the builder's content: no separate content buffer, no
    /// copy out of it.
    pub fn sign_with_content<E>(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> std::result::Result<(), E>,
        max_sig_len: usize,
        sign: impl FnOnce(&[u8]) -> std::result::Result<Bytes, E>,
    ) -> std::result::Result<Data, E> {
        self.encode(Some(ContentSource::Fill(len, fill)), max_sig_len, sign)
    }

    fn encode<E, F: FnOnce(&mut [u8]) -> std::result::Result<(), E>>(
        &self,
        content: Option<ContentSource<'_, F>>,
        max_sig_len: usize,
        sign: impl FnOnce(&[u8]) -> std::result::Result<Bytes, E>,
    ) -> std::result::Result<Data, E> {
        let content_tlv = content.as_ref().map_or(0, |c| {
            tlv::tlv_len(
                CONTENT,
                match c {
                    ContentSource::Given(b) => b.len(),
                    ContentSource::Fill(n, _) => *n,
                },
            )
        });
        let signed_len = self.name.encoded_len()
            + self.meta_info.as_ref().map_or(0, |m| m.encoded_len())
            + content_tlv
            + self.sig_info.encoded_len(SIGNATURE_INFO);
        let mut buf = BytesMut::with_capacity(HEADROOM + signed_len + 4 + max_sig_len);
        buf.put_bytes(0, HEADROOM);
        self.name.encode_to(&mut buf);
        if let Some(m) = &self.meta_info {
            m.encode_to(&mut buf);
        }
        let mut content_at = None;
        match content {
            // Given bytes are copied once (no zero-fill first).
            Some(ContentSource::Given(b)) => {
                tlv::put_header(&mut buf, CONTENT, b.len());
                let at = buf.len();
                buf.put_slice(b);
                content_at = Some(at..at + b.len());
            }
            Some(ContentSource::Fill(n, fill)) => {
                tlv::put_header(&mut buf, CONTENT, n);
                let at = buf.len();
                buf.put_bytes(0, n);
                fill(&mut buf[at..at + n])?;
                content_at = Some(at..at + n);
            }
            None => {}
        }
        self.sig_info.encode_to(SIGNATURE_INFO, &mut buf);
        let sig_value = sign(&buf[HEADROOM..])?;
        tlv::put_header(&mut buf, SIGNATURE_VALUE, sig_value.len());
        let sig_at = buf.len()..buf.len() + sig_value.len();
        buf.put_slice(&sig_value);
        drop(sig_value);
        let value_len = buf.len() - HEADROOM;
        let hdr = tlv::var_number_len(DATA) + tlv::var_number_len(value_len as u64);
        let start = HEADROOM - hdr;
        tlv::put_header(&mut &mut buf[start..HEADROOM], DATA, value_len);
        let all = buf.freeze();
        // Content and signature are views of the one encoded buffer (as
        // after decoding): a built Data holds a single allocation, which
        // is what a content store charges for.
        let content = content_at.map(|r| all.slice(r));
        let sig_value = all.slice(sig_at);
        let wire = all.slice(start..);
        let name_at = hdr;
        Ok(Data {
            name: self.name.clone(),
            meta_info: self.meta_info.clone(),
            content,
            sig_info: self.sig_info.clone(),
            sig_value,
            wire,
            signed: name_at..name_at + signed_len,
            content_digest: ContentDigest::default(),
        })
    }

    /// Encodes with a precomputed SignatureValue.
    pub fn encode_with_signature(&self, sig_value: Bytes) -> Data {
        let r: std::result::Result<Data, std::convert::Infallible> =
            self.sign_with(sig_value.len(), |_| Ok(sig_value.clone()));
        match r {
            Ok(d) => d,
            Err(never) => match never {},
        }
    }
}

/// Where an encoded Data's content comes from.
enum ContentSource<'a, F> {
    /// The builder's own bytes.
    Given(&'a [u8]),
    /// `len` bytes written in place by the closure.
    Fill(usize, F),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_digest_is_memoized_and_not_part_of_equality() {
        let d = DataBuilder::new(Name::from_uri("/a/seg=1").unwrap())
            .content(vec![5u8; 1000])
            .sign_with(32, |_| Ok::<_, ()>(Bytes::from_static(&[9u8; 32])))
            .unwrap();
        let fresh = Data::decode(d.wire().clone()).unwrap();
        assert_eq!(d.content_sha256(), crate::sha256(&[5u8; 1000]));
        assert_eq!(d, fresh, "a computed digest does not change equality");
        assert_eq!(d.clone().content_sha256(), fresh.content_sha256());
    }

    #[test]
    fn content_filled_in_place_encodes_as_given_content() {
        let b = DataBuilder::new(Name::from_uri("/a/seg=3").unwrap())
            .freshness_period(1000)
            .final_block_id(Component::segment(9));
        let sig = crate::digest::value::<String>;
        let given = b
            .clone()
            .content(vec![3u8; 5000])
            .sign_with(32, sig)
            .unwrap();
        let filled = b
            .sign_with_content(
                5000,
                |d| {
                    d.fill(3);
                    Ok(())
                },
                32,
                sig,
            )
            .unwrap();
        assert_eq!(filled.wire(), given.wire());
        assert_eq!(filled, Data::decode(given.wire().clone()).unwrap());
        let failed = b.sign_with_content(10, |_| Err("disk".to_string()), 32, sig);
        assert_eq!(failed.unwrap_err(), "disk");
    }

    #[test]
    fn a_built_data_is_one_buffer() {
        // Content and signature are views of the wire encoding, so a cached
        // Data holds one allocation, not the builder's content besides.
        let d = DataBuilder::new(Name::from_uri("/a/seg=1").unwrap())
            .content(vec![7u8; 8192])
            .sign_with(32, |_| Ok::<_, ()>(Bytes::from_static(&[9u8; 32])))
            .unwrap();
        let wire = d.wire().as_ptr_range();
        let within = |b: &[u8]| wire.contains(&b.as_ptr()) && b.as_ptr_range().end <= wire.end;
        assert!(within(d.content()));
        assert_eq!(d.content(), &[7u8; 8192][..]);
        assert!(within(d.sig_value()));
        assert_eq!(d.sig_value(), &[9u8; 32][..]);
        assert_eq!(
            Data::decode(d.wire().clone()).unwrap().content(),
            d.content()
        );
    }

    #[test]
    fn encode_decode_round_trip() {
        let b = DataBuilder::new(Name::from_uri("/a/seg=1").unwrap())
            .content(vec![7u8; 8192])
            .freshness_period(4000)
            .final_block_id(Component::segment(9));
        let d = b.sign_with(32, crate::digest::value::<()>).unwrap();
        let d2 = Data::decode(d.wire().clone()).unwrap();
        assert_eq!(d, d2);
        assert_eq!(d2.content().len(), 8192);
        assert_eq!(d2.freshness_period(), 4000);
        assert_eq!(d2.final_block_id().unwrap().as_ref().as_segment(), Some(9));
        assert_eq!(
            d2.sig_value().as_ref(),
            Sha256::digest(d2.signed_portion()).as_slice()
        );
        let again = d2
            .to_builder()
            .encode_with_signature(d2.sig_value().clone());
        assert_eq!(again.wire(), d.wire());
    }

    #[test]
    fn missing_and_disordered_fields_are_errors() {
        // Data with only a Name.
        let w = Bytes::from_static(&[6, 3, 7, 1, 8]);
        assert!(Data::decode(w).is_err());
        // Content before MetaInfo.
        let w = Bytes::from_static(&[6, 13, 7, 0, 21, 0, 20, 0, 22, 3, 27, 1, 0, 23, 0]);
        let e = Data::decode(w).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfOrder);
        assert_eq!(e.offset, 6);
    }

    #[test]
    fn unknown_noncritical_ignored_critical_rejected() {
        let trailing = Bytes::from_static(&[6, 11, 7, 0, 0xFC, 0, 22, 3, 27, 1, 0, 23, 0, 0]);
        assert_eq!(
            Data::decode(trailing).unwrap_err().kind,
            ErrorKind::Trailing
        );
        let ok = Bytes::from_static(&[6, 11, 7, 0, 0xFC, 0, 22, 3, 27, 1, 0, 23, 0]);
        assert!(Data::decode(ok).is_ok());
        let bad = Bytes::from_static(&[6, 11, 7, 0, 0xFB, 0, 22, 3, 27, 1, 0, 23, 0]);
        assert!(matches!(
            Data::decode(bad).unwrap_err().kind,
            ErrorKind::UnknownCritical { .. }
        ));
    }
}
