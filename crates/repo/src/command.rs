//! The command messages of ndn-python-repo 0.3 (`docs/repo-protocol.md` §2).
//!
//! They are python-ndn `TlvModel`s: a sequence of fields with no outer TLV.
//! Decoding accepts any field order, empty nested models (`d3 00`) and
//! unknown non-critical (even) types; an unknown critical (odd) type is an
//! error, as in python-ndn. Encoding writes the fields in the models'
//! declared order, which python-ndn's parser requires (a field that comes
//! after a later-declared one is skipped there).

use bytes::{Bytes, BytesMut};
use granary_packet::tlv::{self, Element, Reader};
use granary_packet::Name;

/// TLV types of the models.
pub mod tt {
    /// Name.
    pub const NAME: u64 = 7;
    /// NotifyAppParam's nonce.
    pub const NOTIFY_NONCE: u64 = 128;
    /// StartBlockId.
    pub const START_BLOCK_ID: u64 = 204;
    /// EndBlockId.
    pub const END_BLOCK_ID: u64 = 205;
    /// ProcessId.
    pub const PROCESS_ID: u64 = 206;
    /// StatusCode.
    pub const STATUS_CODE: u64 = 208;
    /// InsertNum.
    pub const INSERT_NUM: u64 = 209;
    /// DeleteNum.
    pub const DELETE_NUM: u64 = 210;
    /// ForwardingHint `{Name?}`.
    pub const FORWARDING_HINT: u64 = 211;
    /// RegisterPrefix `{Name?}`.
    pub const REGISTER_PREFIX: u64 = 212;
    /// CheckPrefix `{Name?}`.
    pub const CHECK_PREFIX: u64 = 213;
}

/// Status codes of 0.3.
pub mod status {
    /// Done.
    pub const OK: u64 = 200;
    /// In progress.
    pub const IN_PROGRESS: u64 = 300;
    /// Failed.
    pub const FAILED: u64 = 400;
    /// Check parameter malformed.
    pub const MALFORMED: u64 = 403;
    /// Unknown process.
    pub const NOT_FOUND: u64 = 404;
}

/// A decoding error (the message is ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

impl From<granary_packet::Error> for DecodeError {
    fn from(e: granary_packet::Error) -> Self {
        DecodeError(e.to_string())
    }
}

type Result<T> = std::result::Result<T, DecodeError>;

/// Walks the fields of a model, calling `f` for each known element; unknown
/// even types are skipped, unknown odd ones are an error.
fn walk(
    buf: &Bytes,
    known: &[u64],
    mut f: impl FnMut(&Reader<'_>, &Element) -> Result<()>,
) -> Result<()> {
    let mut r = Reader::new(buf);
    while !r.is_empty() {
        let el = r.read()?;
        if known.contains(&el.typ) {
            f(&r, &el)?;
        } else if el.typ & 1 == 1 {
            return Err(DecodeError(format!("unknown critical field {}", el.typ)));
        }
    }
    Ok(())
}

/// A nested `{Name?}` model: `None` when empty.
fn nested_name(r: &Reader<'_>, el: &Element) -> Result<Option<Name>> {
    let mut inner = Reader::inside(r.buffer(), el);
    let mut name = None;
    while !inner.is_empty() {
        let e = inner.read()?;
        if e.typ == tt::NAME {
            name = Some(Name::decode_element(&inner, &e)?);
        } else if e.typ & 1 == 1 {
            return Err(DecodeError(format!("unknown critical field {}", e.typ)));
        }
    }
    Ok(name)
}

fn put_name(buf: &mut BytesMut, n: &Name) {
    n.encode_to(buf);
}

fn put_nested(buf: &mut BytesMut, typ: u64, n: &Option<Name>) {
    let mut inner = BytesMut::new();
    if let Some(n) = n {
        put_name(&mut inner, n);
    }
    tlv::put_tlv(buf, typ, &inner);
}

/// RepoCommandParameter: the insert/delete command, and (with only a
/// ProcessId) the check parameter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandParameter {
    /// Name of the object.
    pub name: Option<Name>,
    /// ForwardingHint to fetch with (`None` when absent or empty).
    pub forwarding_hint: Option<Name>,
    /// StartBlockId.
    pub start_block_id: Option<u64>,
    /// EndBlockId.
    pub end_block_id: Option<u64>,
    /// ProcessId (4 random bytes from the stock clients).
    pub process_id: Option<Bytes>,
    /// RegisterPrefix (`None` when absent or empty).
    pub register_prefix: Option<Name>,
    /// CheckPrefix (`None` when absent or empty; ignored in 0.3).
    pub check_prefix: Option<Name>,
}

impl CommandParameter {
    /// Decodes the field sequence.
    pub fn decode(buf: &Bytes) -> Result<Self> {
        let mut p = CommandParameter::default();
        walk(
            buf,
            &[
                tt::NAME,
                tt::FORWARDING_HINT,
                tt::START_BLOCK_ID,
                tt::END_BLOCK_ID,
                tt::PROCESS_ID,
                tt::REGISTER_PREFIX,
                tt::CHECK_PREFIX,
            ],
            |r, el| {
                match el.typ {
                    tt::NAME => p.name = Some(Name::decode_element(r, el)?),
                    tt::FORWARDING_HINT => p.forwarding_hint = nested_name(r, el)?,
                    tt::START_BLOCK_ID => p.start_block_id = Some(r.nni(el)?),
                    tt::END_BLOCK_ID => p.end_block_id = Some(r.nni(el)?),
                    tt::PROCESS_ID => p.process_id = Some(r.value(el)),
                    tt::REGISTER_PREFIX => p.register_prefix = nested_name(r, el)?,
                    _ => p.check_prefix = nested_name(r, el)?,
                }
                Ok(())
            },
        )?;
        Ok(p)
    }

    /// Encodes in declared order (Name, ForwardingHint, StartBlockId,
    /// EndBlockId, ProcessId, RegisterPrefix, CheckPrefix); nested models
    /// are written (empty when `None`) only by [`CommandParameter::encode_as_client`].
    pub fn encode(&self) -> Bytes {
        self.encode_inner(false)
    }

    /// Encodes as PutfileClient does: empty nested models written as `T 00`.
    pub fn encode_as_client(&self) -> Bytes {
        self.encode_inner(true)
    }

    fn encode_inner(&self, empty_nested: bool) -> Bytes {
        let mut b = BytesMut::new();
        if let Some(n) = &self.name {
            put_name(&mut b, n);
        }
        let nested = |b: &mut BytesMut, typ, n: &Option<Name>| {
            if n.is_some() || empty_nested {
                put_nested(b, typ, n);
            }
        };
        nested(&mut b, tt::FORWARDING_HINT, &self.forwarding_hint);
        if let Some(v) = self.start_block_id {
            tlv::put_nni_tlv(&mut b, tt::START_BLOCK_ID, v);
        }
        if let Some(v) = self.end_block_id {
            tlv::put_nni_tlv(&mut b, tt::END_BLOCK_ID, v);
        }
        if let Some(p) = &self.process_id {
            tlv::put_tlv(&mut b, tt::PROCESS_ID, p);
        }
        nested(&mut b, tt::REGISTER_PREFIX, &self.register_prefix);
        nested(&mut b, tt::CHECK_PREFIX, &self.check_prefix);
        b.freeze()
    }
}

/// Which count a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Insert (InsertNum).
    Insert,
    /// Delete (DeleteNum).
    Delete,
}

impl Verb {
    /// The topic component (`insert` / `delete`).
    pub fn word(self) -> &'static [u8] {
        match self {
            Verb::Insert => b"insert",
            Verb::Delete => b"delete",
        }
    }

    /// The check component (`insert check` / `delete check`).
    pub fn check_word(self) -> &'static [u8] {
        match self {
            Verb::Insert => b"insert check",
            Verb::Delete => b"delete check",
        }
    }
}

/// RepoCommandResponse, as the check answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandResponse {
    /// ProcessId.
    pub process_id: Option<Bytes>,
    /// StatusCode.
    pub status_code: u64,
    /// InsertNum (insert) or DeleteNum (delete), with which.
    pub num: Option<(Verb, u64)>,
}

impl CommandResponse {
    /// A bare status (403, 404).
    pub fn status(code: u64) -> Self {
        CommandResponse {
            process_id: None,
            status_code: code,
            num: None,
        }
    }

    /// Encodes `ProcessId StatusCode InsertNum|DeleteNum`, in that order.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        if let Some(p) = &self.process_id {
            tlv::put_tlv(&mut b, tt::PROCESS_ID, p);
        }
        tlv::put_nni_tlv(&mut b, tt::STATUS_CODE, self.status_code);
        match self.num {
            Some((Verb::Insert, n)) => tlv::put_nni_tlv(&mut b, tt::INSERT_NUM, n),
            Some((Verb::Delete, n)) => tlv::put_nni_tlv(&mut b, tt::DELETE_NUM, n),
            None => {}
        }
        b.freeze()
    }

    /// Decodes (any order).
    pub fn decode(buf: &Bytes) -> Result<Self> {
        let mut out = CommandResponse::status(0);
        let mut status = None;
        walk(
            buf,
            &[
                tt::NAME,
                tt::START_BLOCK_ID,
                tt::END_BLOCK_ID,
                tt::PROCESS_ID,
                tt::STATUS_CODE,
                tt::INSERT_NUM,
                tt::DELETE_NUM,
            ],
            |r, el| {
                match el.typ {
                    tt::PROCESS_ID => out.process_id = Some(r.value(el)),
                    tt::STATUS_CODE => status = Some(r.nni(el)?),
                    tt::INSERT_NUM => out.num = Some((Verb::Insert, r.nni(el)?)),
                    tt::DELETE_NUM => out.num = Some((Verb::Delete, r.nni(el)?)),
                    _ => {}
                }
                Ok(())
            },
        )?;
        out.status_code = status.ok_or_else(|| DecodeError("no StatusCode".into()))?;
        Ok(out)
    }
}

/// NotifyAppParam: the ApplicationParameters of a notify Interest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyParam {
    /// The publisher's prefix (the client's).
    pub publisher: Name,
    /// The message nonce N.
    pub nonce: Bytes,
    /// The publisher's ForwardingHint, if any.
    pub forwarding_hint: Option<Name>,
}

impl NotifyParam {
    /// Decodes; Name and nonce are required.
    pub fn decode(buf: &Bytes) -> Result<Self> {
        let (mut publisher, mut nonce, mut forwarding_hint) = (None, None, None);
        walk(
            buf,
            &[tt::NAME, tt::NOTIFY_NONCE, tt::FORWARDING_HINT],
            |r, el| {
                match el.typ {
                    tt::NAME => publisher = Some(Name::decode_element(r, el)?),
                    tt::NOTIFY_NONCE => nonce = Some(r.value(el)),
                    _ => forwarding_hint = nested_name(r, el)?,
                }
                Ok(())
            },
        )?;
        Ok(NotifyParam {
            publisher: publisher.ok_or_else(|| DecodeError("no publisher Name".into()))?,
            nonce: nonce.ok_or_else(|| DecodeError("no NotifyNonce".into()))?,
            forwarding_hint,
        })
    }

    /// Encodes `Name NotifyNonce [ForwardingHint]`.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        put_name(&mut b, &self.publisher);
        tlv::put_tlv(&mut b, tt::NOTIFY_NONCE, &self.nonce);
        if self.forwarding_hint.is_some() {
            put_nested(&mut b, tt::FORWARDING_HINT, &self.forwarding_hint);
        }
        b.freeze()
    }
}

/// Oracle for the fuzz target `fuzz/fuzz_targets/repo_command.rs`, also
/// replayed by this module's tests: any bytes as each of the three
/// parameter blocks a client or a peer sends; what decodes re-encodes and
/// decodes to the same fields. Not an API.
#[doc(hidden)]
pub fn fuzz_oracle(data: &[u8]) {
    let b = Bytes::copy_from_slice(data);
    if let Ok(p) = CommandParameter::decode(&b) {
        assert_eq!(CommandParameter::decode(&p.encode()).as_ref(), Ok(&p));
        assert_eq!(
            CommandParameter::decode(&p.encode_as_client()).as_ref(),
            Ok(&p)
        );
    }
    if let Ok(r) = CommandResponse::decode(&b) {
        assert_eq!(CommandResponse::decode(&r.encode()).as_ref(), Ok(&r));
    }
    if let Ok(n) = NotifyParam::decode(&b) {
        assert_eq!(NotifyParam::decode(&n.encode()).as_ref(), Ok(&n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Bytes {
        Bytes::from(::hex::decode(s.split_whitespace().collect::<String>()).unwrap())
    }

    fn name(s: &str) -> Name {
        Name::from_uri(s).unwrap()
    }

    /// docs/repo-protocol.md §12.2: the command PutfileClient sent.
    #[test]
    fn decodes_the_captured_insert_command() {
        let c = hex("070c08046461746108046632306bd300cc0100cd0102ce0403359b70d400d5190717080b7265706f5f636c69656e7408083738366136636663");
        let p = CommandParameter::decode(&c).unwrap();
        assert_eq!(p.name, Some(name("/data/f20k")));
        assert_eq!(p.forwarding_hint, None);
        assert_eq!(p.start_block_id, Some(0));
        assert_eq!(p.end_block_id, Some(2));
        assert_eq!(p.process_id.as_deref(), Some(&[0x03, 0x35, 0x9b, 0x70][..]));
        assert_eq!(p.register_prefix, None);
        assert_eq!(p.check_prefix, Some(name("/repo_client/786a6cfc")));
        assert_eq!(p.encode_as_client(), c, "re-encodes byte for byte");
    }

    /// §12.7: the delete command (no hint, no block ids).
    #[test]
    fn decodes_the_captured_delete_command() {
        let c = hex("070c08046461746108046632306b ce04ae25beaf d400 d5190717080b7265706f5f636c69656e7408086432383735373732");
        let p = CommandParameter::decode(&c).unwrap();
        assert_eq!(p.name, Some(name("/data/f20k")));
        assert_eq!((p.start_block_id, p.end_block_id), (None, None));
        assert_eq!(p.process_id.as_deref(), Some(&[0xae, 0x25, 0xbe, 0xaf][..]));
    }

    /// §12.8 reference encodings.
    #[test]
    fn reference_encodings() {
        let p = CommandParameter {
            name: Some(name("/data/f20k")),
            forwarding_hint: Some(name("/hint")),
            start_block_id: Some(0),
            end_block_id: Some(300),
            process_id: Some(hex("03359b70")),
            register_prefix: Some(name("/data")),
            check_prefix: Some(name("/c")),
        };
        let want = hex("070c08046461746108046632306b d3080706080468696e74 cc0100 cd02012c ce0403359b70 d4080706080464617461 d5050703080163");
        assert_eq!(p.encode(), want);
        assert_eq!(CommandParameter::decode(&want).unwrap(), p);
        let r = CommandResponse {
            process_id: Some(hex("03359b70")),
            status_code: 400,
            num: Some((Verb::Insert, 1)),
        };
        assert_eq!(r.encode(), hex("ce0403359b70 d0020190 d10101"));
        assert_eq!(CommandResponse::status(403).encode(), hex("d0020193"));
        assert_eq!(CommandResponse::status(404).encode(), hex("d0020194"));
        // §12.6: in progress, done.
        let r300 = CommandResponse {
            process_id: Some(hex("03359b70")),
            status_code: 300,
            num: Some((Verb::Insert, 0)),
        };
        assert_eq!(r300.encode(), hex("ce0403359b70 d002012c d10100"));
        let del = CommandResponse {
            process_id: Some(hex("ae25beaf")),
            status_code: 200,
            num: Some((Verb::Delete, 3)),
        };
        assert_eq!(del.encode(), hex("ce04ae25beaf d001c8 d20103"));
        assert_eq!(CommandResponse::decode(&del.encode()).unwrap(), del);
        let n = NotifyParam {
            publisher: name("/repo_client/786a6cfc"),
            nonce: hex("85410d00"),
            forwarding_hint: Some(name("/hint")),
        };
        let want = hex(
            "0717080b7265706f5f636c69656e7408083738366136636663 800485410d00 d3080706080468696e74",
        );
        assert_eq!(n.encode(), want);
        assert_eq!(NotifyParam::decode(&want).unwrap(), n);
    }

    #[test]
    fn fuzz_oracle_replays_seeds_and_saved_inputs() {
        // The captured commands and reference encodings, each cut short and
        // corrupted; then what the fuzzer found (fuzz/regressions/repo_command).
        let seeds = [
            "070c08046461746108046632306bd300cc0100cd0102ce0403359b70d400d5190717080b7265706f5f636c69656e7408083738366136636663",
            "070c08046461746108046632306b d3080706080468696e74 cc0100 cd02012c ce0403359b70 d4080706080464617461 d5050703080163",
            "ce0403359b70 d0020190 d10101",
            "ce04ae25beaf d001c8 d20103",
            "0717080b7265706f5f636c69656e7408083738366136636663 800485410d00 d3080706080468696e74",
            "ce0401020304 cc0105 fc0100 070308016e",
        ];
        let mut n = 0;
        for s in seeds {
            let b = hex(s).to_vec();
            fuzz_oracle(&b);
            for cut in [1, b.len() / 2, b.len() - 1] {
                fuzz_oracle(&b[..cut]);
            }
            for i in [0, b.len() / 3, b.len() - 1] {
                let mut m = b.clone();
                m[i] ^= 0x41;
                fuzz_oracle(&m);
            }
            n += 1;
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/regressions/repo_command");
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            fuzz_oracle(&std::fs::read(e.path()).unwrap());
            n += 1;
        }
        assert!(n >= seeds.len());
    }

    #[test]
    fn decoding_is_order_free_and_strict_about_critical_types() {
        // Out of order, plus an unknown non-critical field.
        let c = hex("ce0401020304 cc0105 fc0100 070308016e");
        let p = CommandParameter::decode(&c).unwrap();
        assert_eq!(p.start_block_id, Some(5));
        assert_eq!(p.name, Some(name("/n")));
        // Unknown critical (odd) type: refused (e.g. master's ObjParam 301).
        assert!(CommandParameter::decode(&hex("fd012d00")).is_err());
        assert!(CommandParameter::decode(&hex("07")).is_err());
        // Check parameter: just the ProcessId.
        let check = CommandParameter::decode(&hex("ce0403359b70")).unwrap();
        assert_eq!(check.process_id, Some(hex("03359b70")));
        assert!(NotifyParam::decode(&hex("800401020304")).is_err());
    }
}
