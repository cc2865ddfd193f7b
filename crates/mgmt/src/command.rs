//! Control command Interests: parsing both signed forms (server side) and
//! building the v0.3 form (client side).
//!
//! ```text
//! v0.3:   /<prefix>/<module>/<verb>/<ControlParameters>/<ParametersSha256Digest>
//!         + ApplicationParameters, InterestSignatureInfo, InterestSignatureValue
//! legacy: /<prefix>/<module>/<verb>/<ControlParameters>/<timestamp>/<nonce>
//!         /<SignatureInfo>/<SignatureValue>
//! ```
//!
//! This module checks structure only; verifying the signature (and checking
//! timestamps and nonces for replay) is the caller's job with the bytes
//! exposed in [`SignedForm`].

use bytes::Bytes;
use granary_packet::tlv::{decode_nni, Element, Reader};
use granary_packet::types::{COMP_GENERIC, COMP_PARAMS_DIGEST, SIGNATURE_INFO, SIGNATURE_VALUE};
use granary_packet::{Component, Error, ErrorKind, Interest, InterestFields, Name, SignatureInfo};

use crate::codec::TlvElement;
use crate::control::ControlParameters;
use crate::MgmtError;

/// A parsed control command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Management module (`faces`, `fib`, `rib`, `strategy-choice`, `cs`, …).
    pub module: String,
    /// Command verb (`create`, `register`, `set`, …).
    pub verb: String,
    /// The ControlParameters from the name.
    pub params: ControlParameters,
    /// How (and whether) the command is signed.
    pub signed: SignedForm,
}

/// The signature of a command Interest, with what a verifier needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedForm {
    /// Not signed.
    None,
    /// Legacy signed Interest (signed Interest v0.2, four name components).
    Legacy(LegacySigned),
    /// Signed Interest v0.3 (InterestSignatureInfo/Value).
    V03(V03Signed),
}

/// A legacy (v0.2) command signature, carried in the last four name components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacySigned {
    /// Timestamp component: milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// Nonce component value (random bytes; python-ndn and ndn-cxx write an
    /// 8-byte number).
    pub nonce: Bytes,
    /// SignatureInfo (TLV 22) from the second-to-last component.
    pub sig_info: SignatureInfo,
    /// SignatureValue (TLV 23) value from the last component.
    pub sig_value: Bytes,
    /// The signed portion: the Name's TLV-VALUE up to, not including, the last
    /// component (every component TLV from the first through SignatureInfo).
    pub signed_portion: Bytes,
}

/// A v0.3 signed Interest's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V03Signed {
    /// InterestSignatureInfo (SignatureNonce/Time/SeqNum are in here).
    pub sig_info: SignatureInfo,
    /// InterestSignatureValue.
    pub sig_value: Bytes,
    /// The signed portion: name components except the
    /// ParametersSha256DigestComponent, then ApplicationParameters through
    /// InterestSignatureInfo.
    pub signed_portion: Bytes,
}

impl SignedForm {
    /// True when signed in either form.
    pub fn is_signed(&self) -> bool {
        !matches!(self, SignedForm::None)
    }

    /// SignatureInfo, when signed.
    pub fn sig_info(&self) -> Option<&SignatureInfo> {
        match self {
            SignedForm::None => None,
            SignedForm::Legacy(l) => Some(&l.sig_info),
            SignedForm::V03(v) => Some(&v.sig_info),
        }
    }

    /// SignatureValue, when signed.
    pub fn sig_value(&self) -> Option<&Bytes> {
        match self {
            SignedForm::None => None,
            SignedForm::Legacy(l) => Some(&l.sig_value),
            SignedForm::V03(v) => Some(&v.sig_value),
        }
    }

    /// The bytes the signature covers, when signed.
    pub fn signed_portion(&self) -> Option<&Bytes> {
        match self {
            SignedForm::None => None,
            SignedForm::Legacy(l) => Some(&l.signed_portion),
            SignedForm::V03(v) => Some(&v.signed_portion),
        }
    }
}

/// Parses a control command Interest under `prefix` (e.g. `/localhost/nfd`).
///
/// Accepted shapes, after `<prefix>/<module>/<verb>/<ControlParameters>`
/// (all GenericNameComponents, module and verb UTF-8):
/// - nothing: unsigned;
/// - a ParametersSha256DigestComponent: v0.3 — signed when the Interest has
///   InterestSignatureInfo/Value, unsigned otherwise; the digest must match;
/// - four GenericNameComponents `<timestamp>/<nonce>/<SignatureInfo>/
///   <SignatureValue>`: legacy signed (timestamp a NonNegativeInteger,
///   SignatureInfo and SignatureValue each exactly one TLV of type 22 / 23).
///
/// Decoding errors inside a component carry offsets into the Name's TLV-VALUE.
pub fn parse_command(i: &Interest, prefix: &Name) -> Result<Command, MgmtError> {
    let name = &i.name;
    if !prefix.is_prefix_of(name) {
        return Err(MgmtError::NotUnderPrefix {
            name: name.clone(),
            prefix: prefix.clone(),
        });
    }
    // Walk the name value with a Reader so that component values are shared
    // slices of the packet.
    let value = name.value();
    let mut r = Reader::new(value);
    let mut comps: Vec<Element> = Vec::new();
    while !r.is_empty() {
        comps.push(r.read()?);
    }
    let rest = comps.get(prefix.len()..).unwrap_or_default();
    let [module, verb, params, tail @ ..] = rest else {
        return Err(MgmtError::MissingComponent(match rest.len() {
            0 => "module",
            1 => "verb",
            _ => "ControlParameters",
        }));
    };
    let module = generic_utf8(&r, module, "module")?;
    let verb = generic_utf8(&r, verb, "verb")?;
    generic(params, "ControlParameters")?;
    let params =
        ControlParameters::decode(&r.value(params)).map_err(|e| e.shifted(params.value_start))?;

    let signed = match tail {
        [] if i.app_params.is_none() => SignedForm::None,
        [d] if d.typ == COMP_PARAMS_DIGEST => {
            if !i.params_digest_ok() {
                return Err(MgmtError::BadParamsDigest);
            }
            match (&i.sig_info, &i.sig_value, i.signed_portion()) {
                (Some(si), Some(sv), Some(portion)) => SignedForm::V03(V03Signed {
                    sig_info: si.clone(),
                    sig_value: sv.clone(),
                    signed_portion: Bytes::from(portion),
                }),
                _ => SignedForm::None,
            }
        }
        [] => return Err(MgmtError::BadParamsDigest),
        [ts, nonce, si, sv] if i.sig_info.is_none() && i.app_params.is_none() => {
            SignedForm::Legacy(legacy(&r, value, ts, nonce, si, sv)?)
        }
        _ => return Err(MgmtError::UnexpectedComponents(tail.len())),
    };
    Ok(Command {
        module,
        verb,
        params,
        signed,
    })
}

fn generic(c: &Element, what: &'static str) -> Result<(), MgmtError> {
    if c.typ == COMP_GENERIC {
        Ok(())
    } else {
        Err(MgmtError::NotGeneric(what))
    }
}

fn generic_utf8(r: &Reader<'_>, c: &Element, what: &'static str) -> Result<String, MgmtError> {
    generic(c, what)?;
    std::str::from_utf8(r.value_ref(c))
        .map(str::to_owned)
        .map_err(|_| MgmtError::NotUtf8(what))
}

/// The single TLV of type `typ` that makes up a component's value.
fn inner_tlv<'a>(r: &Reader<'a>, c: &Element, typ: u64) -> Result<(Reader<'a>, Element), Error> {
    let mut inner = Reader::inside(r.buffer(), c);
    let el = inner.read()?;
    if el.typ != typ {
        return Err(
            Error::new(el.start, ErrorKind::Unexpected { expected: typ }).with_type(el.typ),
        );
    }
    if !inner.is_empty() {
        return Err(Error::new(el.end, ErrorKind::Trailing).with_type(typ));
    }
    Ok((inner, el))
}

fn legacy(
    r: &Reader<'_>,
    name_value: &Bytes,
    ts: &Element,
    nonce: &Element,
    si: &Element,
    sv: &Element,
) -> Result<LegacySigned, MgmtError> {
    generic(ts, "timestamp")?;
    generic(nonce, "nonce")?;
    generic(si, "SignatureInfo")?;
    generic(sv, "SignatureValue")?;
    let timestamp = decode_nni(r.value_ref(ts)).ok_or(MgmtError::BadLegacySignature(
        "timestamp component is not a NonNegativeInteger",
    ))?;
    let (si_reader, si_el) = inner_tlv(r, si, SIGNATURE_INFO)?;
    let sig_info = SignatureInfo::decode(&si_reader, &si_el)?;
    let (sv_reader, sv_el) = inner_tlv(r, sv, SIGNATURE_VALUE)?;
    Ok(LegacySigned {
        timestamp,
        nonce: r.value(nonce),
        sig_info,
        sig_value: sv_reader.value(&sv_el),
        signed_portion: name_value.slice(..sv.start),
    })
}

/// Builds an unsigned v0.3 command Interest:
/// `<prefix>/<module>/<verb>/<ControlParameters>` with empty
/// ApplicationParameters, so that encoding (or signing, e.g. with
/// granary-security's `Signer::sign_interest`) appends the
/// ParametersSha256DigestComponent. Other fields (lifetime, nonce) are left
/// for the caller.
pub fn make_command(
    prefix: &Name,
    module: &str,
    verb: &str,
    params: &ControlParameters,
) -> InterestFields {
    let name = prefix
        .append(&Component::generic(module.as_bytes()))
        .append(&Component::generic(verb.as_bytes()))
        .append(&Component::generic(&params.encode()));
    InterestFields {
        app_params: Some(Bytes::new()),
        ..InterestFields::new(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_packet::sha256;
    use granary_packet::types::sig_type;

    fn nfd() -> Name {
        Name::from_uri("/localhost/nfd").unwrap()
    }

    fn params() -> ControlParameters {
        ControlParameters {
            name: Some(Name::from_uri("/a").unwrap()),
            face_id: Some(7),
            ..Default::default()
        }
    }

    fn digest_signed(f: InterestFields) -> Interest {
        let mut f = f;
        let mut si = SignatureInfo::new(sig_type::DIGEST_SHA256);
        si.nonce = Some(Bytes::from_static(&[1, 2, 3, 4, 5, 6, 7, 8]));
        si.time = Some(1_700_000_000_000);
        f.sig_info = Some(si);
        granary_packet::digest::sign_interest(f)
    }

    #[test]
    fn v03_signed_round_trip() {
        let f = make_command(&nfd(), "rib", "register", &params());
        assert_eq!(f.name.len(), 5);
        let i = digest_signed(f);
        let i = Interest::decode(i.wire().clone()).unwrap();
        assert_eq!(i.name.len(), 6);
        let c = parse_command(&i, &nfd()).unwrap();
        assert_eq!((c.module.as_str(), c.verb.as_str()), ("rib", "register"));
        assert_eq!(c.params, params());
        let SignedForm::V03(v) = &c.signed else {
            panic!("{:?}", c.signed)
        };
        assert_eq!(v.sig_info.sig_type, sig_type::DIGEST_SHA256);
        assert_eq!(v.sig_value.as_ref(), sha256(&v.signed_portion));
        assert_eq!(c.signed.signed_portion(), Some(&v.signed_portion));
        assert!(c.signed.is_signed());
    }

    #[test]
    fn unsigned_forms() {
        // v0.3 shape, not signed.
        let i = make_command(&nfd(), "faces", "destroy", &params()).encode();
        let c = parse_command(&i, &nfd()).unwrap();
        assert_eq!(c.signed, SignedForm::None);
        assert_eq!(c.signed.sig_info(), None);
        // Bare: no digest, no ApplicationParameters.
        let name = nfd()
            .append(&Component::generic(b"cs"))
            .append(&Component::generic(b"erase"))
            .append(&Component::generic(&params().encode()));
        let i = InterestFields::new(name).encode();
        let c = parse_command(&i, &nfd()).unwrap();
        assert_eq!((c.verb.as_str(), c.signed), ("erase", SignedForm::None));
    }

    fn legacy_interest(sv_tlv_type: u8) -> (Interest, Bytes) {
        let mut name = nfd()
            .append(&Component::generic(b"rib"))
            .append(&Component::generic(b"unregister"))
            .append(&Component::generic(&params().encode()))
            .append(&Component::generic(&1_700_000_000_000u64.to_be_bytes()))
            .append(&Component::generic(&[9; 8]))
            .append(&Component::generic(&[22, 3, 27, 1, 0]));
        let portion = name.value().clone();
        let mut sv = vec![sv_tlv_type, 32];
        sv.extend_from_slice(&sha256(&portion));
        name = name.append(&Component::generic(&sv));
        (InterestFields::new(name).encode(), portion)
    }

    #[test]
    fn legacy_signed() {
        let (i, portion) = legacy_interest(23);
        let c = parse_command(&i, &nfd()).unwrap();
        assert_eq!(c.verb, "unregister");
        let SignedForm::Legacy(l) = &c.signed else {
            panic!("{:?}", c.signed)
        };
        assert_eq!(l.timestamp, 1_700_000_000_000);
        assert_eq!(l.nonce.as_ref(), &[9; 8]);
        assert_eq!(l.sig_info.sig_type, sig_type::DIGEST_SHA256);
        assert_eq!(l.signed_portion, portion);
        assert_eq!(l.sig_value.as_ref(), sha256(&portion));
        // SignatureValue component holding a SignatureInfo TLV.
        let (i, _) = legacy_interest(22);
        assert!(parse_command(&i, &nfd()).is_err());
    }

    #[test]
    fn malformed_commands() {
        let n = |uri: &str| InterestFields::new(Name::from_uri(uri).unwrap()).encode();
        assert!(matches!(
            parse_command(&n("/localhop/nfd/rib/register"), &nfd()),
            Err(MgmtError::NotUnderPrefix { .. })
        ));
        assert_eq!(
            parse_command(&n("/localhost/nfd"), &nfd()),
            Err(MgmtError::MissingComponent("module"))
        );
        assert_eq!(
            parse_command(&n("/localhost/nfd/rib"), &nfd()),
            Err(MgmtError::MissingComponent("verb"))
        );
        assert_eq!(
            parse_command(&n("/localhost/nfd/rib/register"), &nfd()),
            Err(MgmtError::MissingComponent("ControlParameters"))
        );
        assert_eq!(
            parse_command(&n("/localhost/nfd/rib/v=1/%68%00"), &nfd()),
            Err(MgmtError::NotGeneric("verb"))
        );
        assert_eq!(
            parse_command(&n("/localhost/nfd/%FF/list/%68%00"), &nfd()),
            Err(MgmtError::NotUtf8("module"))
        );
        // ControlParameters component that is not a ControlParameters TLV;
        // the error offset is into the Name value.
        let e = parse_command(&n("/localhost/nfd/rib/list/%69%00"), &nfd()).unwrap_err();
        let MgmtError::Packet(p) = e else {
            panic!("{e:?}")
        };
        assert_eq!(p.offset, 29);
        assert!(matches!(
            parse_command(&n("/localhost/nfd/rib/list/%68%00/x"), &nfd()),
            Err(MgmtError::UnexpectedComponents(1))
        ));
        // Legacy shape with a timestamp that is not a NonNegativeInteger.
        assert!(matches!(
            parse_command(
                &n("/localhost/nfd/rib/list/%68%00/abc/n/%16%03%1B%01%00/%17%00"),
                &nfd()
            ),
            Err(MgmtError::BadLegacySignature(_))
        ));
        // Tampered ApplicationParameters: digest mismatch.
        let i = digest_signed(make_command(&nfd(), "rib", "register", &params()));
        let mut w = i.wire().to_vec();
        let last = w.len() - 1;
        w[last] ^= 1; // inside InterestSignatureValue, covered by the digest
        let tampered = Interest::decode(Bytes::from(w)).unwrap();
        assert_eq!(
            parse_command(&tampered, &nfd()),
            Err(MgmtError::BadParamsDigest)
        );
    }
}
