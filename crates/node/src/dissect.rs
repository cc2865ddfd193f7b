//! `granary dissect`: the TLV tree of a packet stream, as text or JSON
//! ([`dissect`] is the whole command after reading its input).
//!
//! JSON output is one object per top-level TLV, one per line (JSONL). The
//! `fields` object uses the same keys as the interop contract
//! (tests/interop/CONTRACT.md), so tests compare it with what python-ndn and
//! NDNts say about the same packet.

use std::fmt::Write as _;

use bytes::Bytes;
use granary_packet::tree::{self, Node};
use granary_packet::types::{self, sig_type};
use granary_packet::{Data, Interest, KeyLocator, LpPacket, Name, SignatureInfo};
use serde_json::{json, Map, Value};

/// What `granary dissect` prints for `raw` (`--hex`/`--base64` text, or
/// bytes): the text tree, or one JSON line per packet with `json`.
pub fn dissect(raw: Vec<u8>, hex_in: bool, base64_in: bool, json: bool) -> anyhow::Result<String> {
    let input = decode_input(raw, hex_in, base64_in)?;
    if !json {
        return render_text(&input);
    }
    let mut out = String::new();
    for v in render_json(&input)? {
        out.push_str(&serde_json::to_string(&v)?);
        out.push('\n');
    }
    Ok(out)
}

/// Text form: one line per element, indented by depth.
pub fn render_text(buf: &Bytes) -> anyhow::Result<String> {
    let nodes = tree::parse(buf).map_err(|e| anyhow::anyhow!("not a TLV stream: {e}"))?;
    let mut out = String::new();
    for n in &nodes {
        text_node(n, 0, &mut out);
    }
    Ok(out)
}

fn text_node(n: &Node, depth: usize, out: &mut String) {
    let _ = write!(
        out,
        "{:indent$}{} ({}) (size: {})",
        "",
        n.typ,
        n.name(),
        n.length,
        indent = depth * 2
    );
    match &n.children {
        Some(kids) => {
            if n.typ == types::NAME {
                if let Ok(name) = Name::from_value(n.value.clone()) {
                    let _ = write!(out, " {name}");
                }
            }
            out.push('\n');
            if let Some(e) = &n.error {
                let _ = writeln!(out, "{:indent$}!! {e}", "", indent = depth * 2 + 2);
            }
            for k in kids {
                text_node(k, depth + 1, out);
            }
        }
        None => {
            let _ = writeln!(out, " {}", leaf_text(n));
        }
    }
}

fn leaf_text(n: &Node) -> String {
    let v = &n.value;
    if n.parent == types::NAME || n.parent == types::FINAL_BLOCK_ID {
        if let Ok(c) = granary_packet::Component::new(n.typ, v) {
            return c.to_string();
        }
    }
    let numeric = matches!(
        n.typ,
        types::INTEREST_LIFETIME
            | types::CONTENT_TYPE
            | types::FRESHNESS_PERIOD
            | types::SIGNATURE_TYPE
            | types::SIGNATURE_TIME
            | types::SIGNATURE_SEQ_NUM
            | types::LP_FRAG_INDEX
            | types::LP_FRAG_COUNT
            | types::LP_NACK_REASON
            | types::LP_INCOMING_FACE_ID
            | types::LP_NEXT_HOP_FACE_ID
            | types::LP_CONGESTION_MARK
            | types::LP_CACHE_POLICY_TYPE
    );
    if numeric {
        if let Some(x) = granary_packet::tlv::decode_nni(v) {
            return match n.typ {
                types::SIGNATURE_TYPE => format!("{x} ({})", sig_type::name(x)),
                types::LP_NACK_REASON => format!("{x} ({})", types::nack_reason::name(x)),
                _ => x.to_string(),
            };
        }
    }
    if matches!(n.typ, types::NOT_BEFORE | types::NOT_AFTER) {
        return String::from_utf8_lossy(v).into_owned();
    }
    let shown = &v[..v.len().min(32)];
    let mut s = hex::encode(shown);
    if v.len() > 32 {
        let _ = write!(s, "… ({} bytes)", v.len());
    }
    s
}

/// JSON form: one object per top-level TLV.
pub fn render_json(buf: &Bytes) -> anyhow::Result<Vec<Value>> {
    let nodes = tree::parse(buf).map_err(|e| anyhow::anyhow!("not a TLV stream: {e}"))?;
    Ok(nodes
        .iter()
        .map(|n| {
            packet_json(
                buf.slice(n.offset..n.offset + n.header_len + n.length),
                n.offset,
            )
        })
        .collect())
}

fn hexs(b: &[u8]) -> String {
    hex::encode(b)
}

fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

/// JSON for one packet's wire.
pub fn packet_json(wire: Bytes, offset: usize) -> Value {
    let typ = granary_packet::tlv::read_var_number(&wire, 0)
        .map(|x| x.0)
        .unwrap_or(0);
    let mut o = Map::new();
    o.insert("offset".into(), offset.into());
    o.insert("tlv_type".into(), typ.into());
    o.insert("type".into(), types::type_name(typ).into());
    o.insert("size".into(), wire.len().into());
    let res: Result<(), granary_packet::Error> = (|| {
        match typ {
            types::INTEREST => interest_json(&Interest::decode(wire.clone())?, &mut o),
            types::DATA => data_json(&Data::decode(wire.clone())?, &mut o),
            types::LP_PACKET => lp_json(&LpPacket::decode(wire.clone())?, &mut o),
            types::NAME => {
                let n = Name::decode(&wire)?;
                o.insert("name".into(), n.to_string().into());
                o.insert("components".into(), components_json(&n));
                o.insert("fields".into(), json!({}));
            }
            _ => {}
        }
        Ok(())
    })();
    if let Err(e) = res {
        o.insert("error".into(), e.to_string().into());
    }
    Value::Object(o)
}

fn components_json(n: &Name) -> Value {
    n.components()
        .map(|c| json!({"type": c.typ, "type_name": types::type_name(c.typ), "value_hex": hexs(c.value), "uri": c.to_string()}))
        .collect()
}

fn key_locator_json(k: &Option<KeyLocator>) -> Value {
    match k {
        Some(KeyLocator::Name(n)) => json!({"name": n.to_string()}),
        Some(KeyLocator::Digest(d)) => json!({"digest_hex": hexs(d)}),
        None => Value::Null,
    }
}

fn signature_json(si: &SignatureInfo, value: &[u8]) -> Value {
    json!({
        "type": si.sig_type,
        "type_name": sig_type::name(si.sig_type),
        "key_locator": key_locator_json(&si.key_locator),
        "validity": si.validity.map(|v| json!({"not_before": v.not_before.format(), "not_after": v.not_after.format()})),
        "nonce_hex": si.nonce.as_ref().map(|n| hexs(n)),
        "time": si.time,
        "seq_num": si.seq_num,
        "value_hex": hexs(value),
    })
}

fn interest_json(i: &Interest, o: &mut Map<String, Value>) {
    o.insert("name".into(), i.name.to_string().into());
    o.insert("components".into(), components_json(&i.name));
    o.insert(
        "fields".into(),
        json!({
            "can_be_prefix": i.can_be_prefix,
            "must_be_fresh": i.must_be_fresh,
            "nonce": i.nonce,
            "lifetime": i.lifetime,
            "hop_limit": i.hop_limit,
            "forwarding_hint": i.forwarding_hint.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            "app_params_hex": i.app_params.as_ref().map(|p| hexs(p)),
            "sig_type": i.sig_info.as_ref().map(|s| s.sig_type),
        }),
    );
    o.insert("params_digest_ok".into(), i.params_digest_ok().into());
    if let (Some(si), Some(sv)) = (&i.sig_info, &i.sig_value) {
        o.insert("signature".into(), signature_json(si, sv));
    }
}

fn data_json(d: &Data, o: &mut Map<String, Value>) {
    let mi = d.meta_info();
    o.insert("name".into(), d.name().to_string().into());
    o.insert("components".into(), components_json(d.name()));
    o.insert(
        "fields".into(),
        json!({
            "content_type": opt(mi.and_then(|m| m.content_type)),
            "freshness_period": opt(mi.and_then(|m| m.freshness_period)),
            "final_block_id_hex": opt(d.final_block_id().map(|c| hexs(c.wire()))),
            "content_hex": opt(d.content_bytes().map(|c| hexs(c))),
            "sig_type": d.sig_info().sig_type,
            "key_locator": key_locator_json(&d.sig_info().key_locator),
        }),
    );
    o.insert(
        "signature".into(),
        signature_json(d.sig_info(), d.sig_value()),
    );
    o.insert("implicit_digest".into(), hexs(&d.implicit_digest()).into());
}

fn lp_json(p: &LpPacket, o: &mut Map<String, Value>) {
    let mut f = Map::new();
    let mut put = |k: &str, v: Value| {
        f.insert(k.into(), v);
    };
    if let Some(x) = &p.fragment {
        put("fragment_hex", hexs(x).into());
    }
    if let Some(x) = p.sequence {
        put("sequence", x.into());
    }
    if let Some(x) = p.frag_index {
        put("frag_index", x.into());
    }
    if let Some(x) = p.frag_count {
        put("frag_count", x.into());
    }
    if let Some(x) = &p.pit_token {
        put("pit_token_hex", hexs(x).into());
    }
    if let Some(x) = p.nack {
        put("nack_reason", x.into());
    }
    if let Some(x) = p.congestion_mark {
        put("congestion_mark", x.into());
    }
    if let Some(x) = p.tx_sequence {
        put("tx_sequence", x.into());
    }
    if !p.acks.is_empty() {
        put("ack", p.acks.clone().into());
    }
    if let Some(x) = p.incoming_face_id {
        put("incoming_face_id", x.into());
    }
    if let Some(x) = p.next_hop_face_id {
        put("next_hop_face_id", x.into());
    }
    if let Some(x) = p.cache_policy {
        put("cache_policy", x.into());
    }
    if p.non_discovery {
        put("non_discovery", true.into());
    }
    o.insert("fields".into(), Value::Object(f));
    o.insert("idle".into(), p.is_idle().into());
    if let Some(frag) = &p.fragment {
        // A whole packet inside (not a piece of a fragmented one): dissect it too.
        if p.frag_count.unwrap_or(1) == 1 {
            o.insert("fragment".into(), packet_json(frag.clone(), 0));
        }
    }
}

/// Reads the input: raw bytes, or hex / base64 text.
pub fn decode_input(raw: Vec<u8>, hex_in: bool, base64_in: bool) -> anyhow::Result<Bytes> {
    if hex_in {
        let text: String = String::from_utf8_lossy(&raw)
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        return Ok(Bytes::from(
            hex::decode(text).map_err(|e| anyhow::anyhow!("input is not hexadecimal: {e}"))?,
        ));
    }
    if base64_in {
        return Ok(granary_security::keychain::decode_binary_or_base64(&raw)?);
    }
    Ok(Bytes::from(raw))
}
