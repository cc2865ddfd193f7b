//! Fuzz oracles, shared by the `cargo fuzz` targets (fuzz/) and by the
//! stable corpus-regression test: each takes arbitrary bytes, must not
//! panic, and asserts the properties a correct decoder has (what decodes
//! re-encodes to the same fields, and decodes again).

use bytes::Bytes;

use crate::{tree, Data, Interest, LpPacket, Name};

/// TLV reader and dissection tree.
pub fn tlv(data: &[u8]) {
    let b = Bytes::copy_from_slice(data);
    if let Ok(nodes) = tree::parse(&b) {
        let total: usize = nodes.iter().map(|n| n.header_len + n.length).sum();
        assert_eq!(total, b.len(), "top-level elements cover the input");
    }
    let _ = crate::Packet::decode(b);
}

/// Name TLV: decode, print, parse back.
pub fn name(data: &[u8]) {
    let b = Bytes::copy_from_slice(data);
    if let Ok(n) = Name::decode(&b) {
        assert_eq!(n.to_tlv(), b, "Name re-encodes byte-identically");
        let uri = n.to_string();
        let back = Name::from_uri(&uri).expect("printed URI parses");
        // Non-minimal numbers print as seg=N and come back minimal; compare by URI.
        assert_eq!(back.to_string(), uri);
        let _ = n.len();
        let _ = n.prefix(-1);
    }
}

/// URI text: parse, print, parse back to the same name.
pub fn uri(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(n) = Name::from_uri(s) {
            let printed = n.to_string();
            let again = Name::from_uri(&printed).expect("printed URI parses");
            assert_eq!(again.to_string(), printed);
        }
    }
}

/// Interest: decode, re-encode, decode again to the same fields.
pub fn interest(data: &[u8]) {
    if let Ok(i) = Interest::decode(Bytes::copy_from_slice(data)) {
        let _ = i.signed_portion();
        // Unknown SignatureInfo elements are re-emitted after the known ones,
        // which may move them (and change the digest); only canonical input
        // must round-trip exactly.
        let canonical = i.sig_info.as_ref().is_none_or(|s| s.other.is_empty());
        if i.params_digest_ok() && canonical {
            let again = Interest::decode(i.to_fields().encode().wire().clone())
                .expect("re-encoded Interest decodes");
            let mut expected = i.to_fields();
            expected.sig_info.iter_mut().for_each(|s| s.other.clear());
            let mut got = again.to_fields();
            got.sig_info.iter_mut().for_each(|s| s.other.clear());
            assert_eq!(got.name, expected.name);
            assert_eq!(got.app_params, expected.app_params);
            assert_eq!(got.nonce, expected.nonce);
        }
    }
}

/// Data: decode, re-encode, decode again to the same fields.
pub fn data(data: &[u8]) {
    if let Ok(d) = Data::decode(Bytes::copy_from_slice(data)) {
        let _ = d.full_name();
        let again = d.to_builder().encode_with_signature(d.sig_value().clone());
        let back = Data::decode(again.wire().clone()).expect("re-encoded Data decodes");
        assert_eq!(back.to_builder(), d.to_builder());
        assert_eq!(back.sig_value(), d.sig_value());
    }
}

/// LpPacket: decode, re-encode, decode again to the same fields.
pub fn lp(data: &[u8]) {
    if let Ok(p) = LpPacket::decode(Bytes::copy_from_slice(data)) {
        let back = LpPacket::decode(p.encode()).expect("re-encoded LpPacket decodes");
        assert_eq!(back, p);
    }
}
