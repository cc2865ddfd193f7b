//! Interest packets, including signed Interests (v0.3) and the
//! ParametersSha256DigestComponent.

use bytes::{BufMut, Bytes, BytesMut};
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind, Result};
use crate::name::{Component, Name};
use crate::signature::SignatureInfo;
use crate::tlv::{self, Element, Reader};
use crate::types::*;

/// Default InterestLifetime when the element is absent (ms).
pub const DEFAULT_LIFETIME_MS: u64 = 4000;

/// Fields of an Interest. `None`/`false`/empty means absent on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InterestFields {
    /// Name.
    pub name: Name,
    /// CanBePrefix.
    pub can_be_prefix: bool,
    /// MustBeFresh.
    pub must_be_fresh: bool,
    /// ForwardingHint names.
    pub forwarding_hint: Vec<Name>,
    /// Nonce (4 bytes, big-endian as u32).
    pub nonce: Option<u32>,
    /// InterestLifetime (ms).
    pub lifetime: Option<u64>,
    /// HopLimit.
    pub hop_limit: Option<u8>,
    /// ApplicationParameters.
    pub app_params: Option<Bytes>,
    /// InterestSignatureInfo.
    pub sig_info: Option<SignatureInfo>,
    /// InterestSignatureValue.
    pub sig_value: Option<Bytes>,
}

/// A decoded (or freshly encoded) Interest. Immutable: fields agree with the
/// wire. Build new ones with [`InterestFields::encode`] or [`InterestFields::sign_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interest {
    fields: InterestFields,
    wire: Bytes,
    /// Offset of ApplicationParameters in `wire` (0 when absent).
    params_at: usize,
    /// Offset of InterestSignatureValue in `wire` (0 when absent).
    sig_value_at: usize,
}

impl std::ops::Deref for Interest {
    type Target = InterestFields;
    fn deref(&self) -> &InterestFields {
        &self.fields
    }
}

impl Interest {
    /// Decodes an Interest TLV; `wire` must hold exactly one.
    pub fn decode(wire: Bytes) -> Result<Interest> {
        let el = tlv::read_single(&wire)?;
        let r = Reader::new(&wire);
        Self::decode_element(&r, &el)
    }

    /// Decodes the Interest element `el` of a larger buffer.
    pub fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Interest> {
        el.expect(INTEREST)?;
        let mut inner = Reader::inside(r.buffer(), el);
        let first = inner.read()?;
        if first.typ != NAME {
            return Err(
                Error::new(first.start, ErrorKind::Missing { element: NAME }).with_type(INTEREST),
            );
        }
        let mut f = InterestFields {
            name: Name::decode_element(&inner, &first)?,
            ..Default::default()
        };
        let (mut params_at, mut sig_value_at) = (0, 0);
        let mut last = 0u8;
        while !inner.is_empty() {
            let e = inner.read()?;
            let order = match e.typ {
                CAN_BE_PREFIX => 1,
                MUST_BE_FRESH => 2,
                FORWARDING_HINT => 3,
                NONCE => 4,
                INTEREST_LIFETIME => 5,
                HOP_LIMIT => 6,
                APPLICATION_PARAMETERS => 7,
                INTEREST_SIGNATURE_INFO => 8,
                INTEREST_SIGNATURE_VALUE => 9,
                _ => {
                    inner.unknown(&e, INTEREST)?;
                    continue;
                }
            };
            if order <= last {
                return Err(Error::new(e.start, ErrorKind::OutOfOrder).with_type(e.typ));
            }
            last = order;
            let bad = |msg| Error::new(e.start, ErrorKind::Invalid(msg)).with_type(e.typ);
            match e.typ {
                CAN_BE_PREFIX | MUST_BE_FRESH => {
                    if e.value_len() != 0 {
                        return Err(bad("must be empty"));
                    }
                    if e.typ == CAN_BE_PREFIX {
                        f.can_be_prefix = true;
                    } else {
                        f.must_be_fresh = true;
                    }
                }
                FORWARDING_HINT => {
                    let mut hints = Reader::inside(inner.buffer(), &e);
                    while !hints.is_empty() {
                        let h = hints.read()?;
                        f.forwarding_hint.push(Name::decode_element(&hints, &h)?);
                    }
                }
                NONCE => {
                    let v = inner.value_ref(&e);
                    let arr: [u8; 4] = v.try_into().map_err(|_| bad("Nonce must be 4 bytes"))?;
                    f.nonce = Some(u32::from_be_bytes(arr));
                }
                INTEREST_LIFETIME => f.lifetime = Some(inner.nni(&e)?),
                HOP_LIMIT => {
                    let v = inner.value_ref(&e);
                    if v.len() != 1 {
                        return Err(bad("HopLimit must be 1 byte"));
                    }
                    f.hop_limit = Some(v[0]);
                }
                APPLICATION_PARAMETERS => {
                    f.app_params = Some(inner.value(&e));
                    params_at = e.start - el.start;
                }
                INTEREST_SIGNATURE_INFO => f.sig_info = Some(SignatureInfo::decode(&inner, &e)?),
                _ => {
                    f.sig_value = Some(inner.value(&e));
                    sig_value_at = e.start - el.start;
                }
            }
        }
        if f.sig_info.is_some() != f.sig_value.is_some()
            || (f.sig_info.is_some() && f.app_params.is_none())
        {
            return Err(Error::new(
                el.start,
                ErrorKind::Invalid(
                    "signed Interest needs ApplicationParameters, SignatureInfo and SignatureValue",
                ),
            )
            .with_type(INTEREST));
        }
        Ok(Interest {
            fields: f,
            wire: r.buffer().slice(el.start..el.end),
            params_at,
            sig_value_at,
        })
    }

    /// All fields.
    pub fn fields(&self) -> &InterestFields {
        &self.fields
    }

    /// The whole Interest TLV.
    pub fn wire(&self) -> &Bytes {
        &self.wire
    }

    /// InterestLifetime, defaulted (ms).
    pub fn lifetime_ms(&self) -> u64 {
        self.fields.lifetime.unwrap_or(DEFAULT_LIFETIME_MS)
    }

    /// The bytes from ApplicationParameters to the end (what the
    /// ParametersSha256DigestComponent covers).
    pub fn params_region(&self) -> Option<&[u8]> {
        (self.fields.app_params.is_some()).then(|| &self.wire[self.params_at..])
    }

    /// Checks the ParametersSha256DigestComponent rule: with
    /// ApplicationParameters, exactly one digest component equal to SHA-256 of
    /// the parameters region; without, none.
    pub fn params_digest_ok(&self) -> bool {
        let mut digests = self
            .fields
            .name
            .components()
            .filter(|c| c.typ == COMP_PARAMS_DIGEST);
        match (self.params_region(), digests.next(), digests.next()) {
            (None, None, _) => true,
            (Some(region), Some(d), None) => d.value == Sha256::digest(region).as_slice(),
            _ => false,
        }
    }

    /// The signed portion of a signed Interest (name components except the
    /// parameters digest, then ApplicationParameters through
    /// InterestSignatureInfo), or `None` when unsigned.
    pub fn signed_portion(&self) -> Option<Vec<u8>> {
        if self.sig_value_at == 0 {
            return None;
        }
        let tail = &self.wire[self.params_at..self.sig_value_at];
        Some(signed_portion(&self.fields.name, tail))
    }

    /// The same Interest with Nonce and HopLimit set, every other element kept
    /// byte-for-byte (so signatures and the parameters digest stay valid).
    /// This is how a forwarder rewrites an Interest; re-encoding from fields
    /// would drop unknown elements.
    pub fn with_nonce_and_hop_limit(&self, nonce: u32, hop_limit: Option<u8>) -> Interest {
        self.respliced(nonce, hop_limit, true)
    }

    /// The same Interest without its ForwardingHint (what a forwarder sends
    /// on once the Interest has reached the producer's region), with Nonce
    /// and HopLimit set; every other element is kept byte-for-byte.
    pub fn without_forwarding_hint(&self, nonce: u32, hop_limit: Option<u8>) -> Interest {
        self.respliced(nonce, hop_limit, false)
    }

    fn respliced(&self, nonce: u32, hop_limit: Option<u8>, keep_hint: bool) -> Interest {
        let mut outer = Reader::new(&self.wire);
        let Ok(el) = outer.read() else {
            return self.clone();
        };
        let mut inner = Reader::inside(&self.wire, &el);
        // Name, CanBePrefix, MustBeFresh, ForwardingHint; then Nonce,
        // InterestLifetime, HopLimit; then everything else in its order.
        let (mut before, mut lifetime, mut after) = (Vec::new(), None, Vec::new());
        while !inner.is_empty() {
            let Ok(e) = inner.read() else {
                return self.clone();
            };
            let span = &self.wire[e.start..e.end];
            match e.typ {
                FORWARDING_HINT if !keep_hint => {}
                NAME | CAN_BE_PREFIX | MUST_BE_FRESH | FORWARDING_HINT => before.push(span),
                NONCE | HOP_LIMIT => {}
                INTEREST_LIFETIME => lifetime = Some(span),
                _ => after.push((e.start, span)),
            }
        }
        let mut value = Vec::with_capacity(self.wire.len() + 9);
        for s in before {
            value.extend_from_slice(s);
        }
        tlv::put_header(&mut value, NONCE, 4);
        value.extend_from_slice(&nonce.to_be_bytes());
        if let Some(l) = lifetime {
            value.extend_from_slice(l);
        }
        if let Some(h) = hop_limit {
            tlv::put_header(&mut value, HOP_LIMIT, 1);
            value.push(h);
        }
        let hdr = tlv::var_number_len(INTEREST)
            + tlv::var_number_len(
                value.len() as u64 + after.iter().map(|(_, s)| s.len() as u64).sum::<u64>(),
            );
        let (mut params_at, mut sig_value_at) = (0, 0);
        for (start, s) in &after {
            if *start == self.params_at && self.params_at != 0 {
                params_at = hdr + value.len();
            }
            if *start == self.sig_value_at && self.sig_value_at != 0 {
                sig_value_at = hdr + value.len();
            }
            value.extend_from_slice(s);
        }
        let mut buf = BytesMut::with_capacity(hdr + value.len());
        tlv::put_header(&mut buf, INTEREST, value.len());
        buf.put_slice(&value);
        let mut fields = self.fields.clone();
        fields.nonce = Some(nonce);
        fields.hop_limit = hop_limit;
        if !keep_hint {
            fields.forwarding_hint.clear();
        }
        Interest {
            fields,
            wire: buf.freeze(),
            params_at,
            sig_value_at,
        }
    }

    /// A copy of the fields, for building a derived Interest.
    pub fn to_fields(&self) -> InterestFields {
        self.fields.clone()
    }
}

fn signed_portion(name: &Name, tail: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(name.value().len() + tail.len());
    for c in name.components().filter(|c| c.typ != COMP_PARAMS_DIGEST) {
        v.extend_from_slice(c.wire);
    }
    v.extend_from_slice(tail);
    v
}

impl InterestFields {
    /// An Interest for `name` with no other fields.
    pub fn new(name: Name) -> Self {
        InterestFields {
            name,
            ..Default::default()
        }
    }

    fn hint_len(&self) -> usize {
        self.forwarding_hint.iter().map(Name::encoded_len).sum()
    }

    fn head_len(&self) -> usize {
        (if self.can_be_prefix { 2 } else { 0 })
            + (if self.must_be_fresh { 2 } else { 0 })
            + if self.forwarding_hint.is_empty() {
                0
            } else {
                tlv::tlv_len(FORWARDING_HINT, self.hint_len())
            }
            + self.nonce.map_or(0, |_| 6)
            + self
                .lifetime
                .map_or(0, |l| tlv::nni_tlv_len(INTEREST_LIFETIME, l))
            + self.hop_limit.map_or(0, |_| 3)
    }

    fn put_head(&self, buf: &mut impl BufMut) {
        if self.can_be_prefix {
            tlv::put_header(buf, CAN_BE_PREFIX, 0);
        }
        if self.must_be_fresh {
            tlv::put_header(buf, MUST_BE_FRESH, 0);
        }
        if !self.forwarding_hint.is_empty() {
            tlv::put_header(buf, FORWARDING_HINT, self.hint_len());
            for h in &self.forwarding_hint {
                h.encode_to(buf);
            }
        }
        if let Some(n) = self.nonce {
            tlv::put_header(buf, NONCE, 4);
            buf.put_u32(n);
        }
        if let Some(l) = self.lifetime {
            tlv::put_nni_tlv(buf, INTEREST_LIFETIME, l);
        }
        if let Some(h) = self.hop_limit {
            tlv::put_header(buf, HOP_LIMIT, 1);
            buf.put_u8(h);
        }
    }

    /// The ApplicationParameters + InterestSignatureInfo bytes (what a
    /// signature covers after the name).
    fn params_and_sig_info(&self) -> Vec<u8> {
        let mut v = Vec::new();
        if let Some(p) = &self.app_params {
            tlv::put_tlv(&mut v, APPLICATION_PARAMETERS, p);
        }
        if let Some(si) = &self.sig_info {
            si.encode_to(INTEREST_SIGNATURE_INFO, &mut v);
        }
        v
    }

    /// Encodes the Interest. With ApplicationParameters, the
    /// ParametersSha256DigestComponent is computed (replacing one already in
    /// the name, or appended). `sig_value`, when set, is written as is.
    pub fn encode(&self) -> Interest {
        let mut tail = self.params_and_sig_info();
        if let Some(sv) = &self.sig_value {
            tlv::put_tlv(&mut tail, INTEREST_SIGNATURE_VALUE, sv);
        }
        self.assemble(tail, self.sig_value.clone())
    }

    /// Signs and encodes: `sign` receives the signed portion and returns the
    /// signature value. `sig_info` must be set.
    pub fn sign_with<E>(
        &self,
        sign: impl FnOnce(&[u8]) -> std::result::Result<Bytes, E>,
    ) -> std::result::Result<Interest, E> {
        let mut f = self.clone();
        if f.app_params.is_none() {
            f.app_params = Some(Bytes::new());
        }
        let mut tail = f.params_and_sig_info();
        let sv = sign(&signed_portion(&f.name, &tail))?;
        tlv::put_tlv(&mut tail, INTEREST_SIGNATURE_VALUE, &sv);
        Ok(f.assemble(tail, Some(sv)))
    }

    fn assemble(&self, tail: Vec<u8>, sig_value: Option<Bytes>) -> Interest {
        let mut fields = self.clone();
        fields.sig_value = sig_value;
        if self.app_params.is_some() {
            let digest: [u8; 32] = Sha256::digest(&tail).into();
            let dc = Component::params_digest(&digest);
            let mut comps: Vec<Component> = Vec::new();
            let mut replaced = false;
            for c in self.name.components() {
                if c.typ == COMP_PARAMS_DIGEST {
                    if !replaced {
                        comps.push(dc.clone());
                        replaced = true;
                    }
                } else {
                    comps.push(c.to_owned());
                }
            }
            if !replaced {
                comps.push(dc);
            }
            fields.name = Name::from_components(&comps);
        }
        let head_len = fields.head_len();
        let value_len = fields.name.encoded_len() + head_len + tail.len();
        let mut buf = BytesMut::with_capacity(tlv::tlv_len(INTEREST, value_len));
        tlv::put_header(&mut buf, INTEREST, value_len);
        fields.name.encode_to(&mut buf);
        fields.put_head(&mut buf);
        let params_at = if fields.app_params.is_some() {
            buf.len()
        } else {
            0
        };
        buf.put_slice(&tail);
        let sig_value_at = match &fields.sig_value {
            Some(sv) => buf.len() - tlv::tlv_len(INTEREST_SIGNATURE_VALUE, sv.len()),
            None => 0,
        };
        Interest {
            fields,
            wire: buf.freeze(),
            params_at,
            sig_value_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_interest_round_trip() {
        let mut f = InterestFields::new(Name::from_uri("/a/b").unwrap());
        f.can_be_prefix = true;
        f.must_be_fresh = true;
        f.nonce = Some(0xDEADBEEF);
        f.lifetime = Some(1000);
        f.hop_limit = Some(9);
        f.forwarding_hint = vec![Name::from_uri("/hint").unwrap()];
        let i = f.encode();
        let d = Interest::decode(i.wire().clone()).unwrap();
        assert_eq!(d, i);
        assert!(d.params_digest_ok());
        assert_eq!(d.to_fields().encode().wire(), i.wire());
    }

    #[test]
    fn forwarding_hint_is_dropped_and_the_rest_kept() {
        let mut f = InterestFields::new(Name::from_uri("/a/b").unwrap());
        f.forwarding_hint = vec![
            Name::from_uri("/site/a").unwrap(),
            Name::from_uri("/site/b").unwrap(),
        ];
        f.app_params = Some(Bytes::from_static(b"p"));
        f.lifetime = Some(1500);
        let i = f.encode();
        let kept = i.with_nonce_and_hop_limit(7, Some(3));
        assert_eq!(kept.forwarding_hint.len(), 2);
        let s = i.without_forwarding_hint(7, Some(3));
        assert!(s.forwarding_hint.is_empty());
        let d = Interest::decode(s.wire().clone()).unwrap();
        assert_eq!(d, s);
        assert!(d.forwarding_hint.is_empty());
        assert_eq!(d.nonce, Some(7));
        assert_eq!(d.hop_limit, Some(3));
        assert_eq!(d.lifetime, Some(1500));
        assert_eq!(d.name, i.name);
        assert!(d.params_digest_ok());
        assert_eq!(d.params_region(), i.params_region());
    }

    #[test]
    fn params_digest_is_computed_and_checked() {
        let mut f = InterestFields::new(Name::from_uri("/a").unwrap());
        f.app_params = Some(Bytes::from_static(b"hello"));
        let i = f.encode();
        assert_eq!(i.name.len(), 2);
        assert_eq!(i.name.last().unwrap().typ, COMP_PARAMS_DIGEST);
        let d = Interest::decode(i.wire().clone()).unwrap();
        assert!(d.params_digest_ok());
        // Tamper with the parameters: digest no longer matches.
        let mut w = i.wire().to_vec();
        let n = w.len();
        w[n - 1] ^= 1;
        assert!(!Interest::decode(Bytes::from(w)).unwrap().params_digest_ok());
    }

    #[test]
    fn signed_interest_portion() {
        let mut f = InterestFields::new(Name::from_uri("/cmd").unwrap());
        let mut si = SignatureInfo::new(sig_type::DIGEST_SHA256);
        si.nonce = Some(Bytes::from_static(&[1, 2, 3, 4]));
        si.time = Some(1_700_000_000_000);
        f.sig_info = Some(si);
        let i = f.sign_with(crate::digest::value::<()>).unwrap();
        let d = Interest::decode(i.wire().clone()).unwrap();
        assert!(d.params_digest_ok());
        let sp = d.signed_portion().unwrap();
        assert_eq!(
            d.sig_value.as_ref().unwrap().as_ref(),
            Sha256::digest(&sp).as_slice()
        );
        assert!(sp.starts_with(&[8, 3, b'c', b'm', b'd', 36, 0, 44]));
    }

    #[test]
    fn rewriting_nonce_and_hop_limit_keeps_signature_and_digest() {
        let mut f = InterestFields::new(Name::from_uri("/cmd").unwrap());
        f.lifetime = Some(1000);
        f.app_params = Some(Bytes::from_static(b"p"));
        f.sig_info = Some(SignatureInfo::new(sig_type::DIGEST_SHA256));
        let i = f.sign_with(crate::digest::value::<()>).unwrap();
        let r = i.with_nonce_and_hop_limit(7, Some(3));
        let d = Interest::decode(r.wire().clone()).unwrap();
        assert_eq!(d, r);
        assert_eq!(
            (d.nonce, d.hop_limit, d.lifetime),
            (Some(7), Some(3), Some(1000))
        );
        assert!(d.params_digest_ok());
        assert_eq!(d.signed_portion(), i.signed_portion());
        let again = d.with_nonce_and_hop_limit(8, None);
        assert_eq!(
            Interest::decode(again.wire().clone()).unwrap().hop_limit,
            None
        );
    }

    #[test]
    fn bad_fields() {
        // Nonce of 3 bytes.
        let w = Bytes::from_static(&[5, 7, 7, 0, 10, 3, 1, 2, 3]);
        assert!(matches!(
            Interest::decode(w).unwrap_err().kind,
            ErrorKind::Invalid(_)
        ));
        // No name.
        let w = Bytes::from_static(&[5, 2, 33, 0]);
        assert!(Interest::decode(w).is_err());
    }
}
