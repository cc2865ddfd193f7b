//! The catalog served over NDN on an in-process face of the daemon.
//!
//! One task receives Interests; each request runs its query on a blocking
//! thread (the catalog is synchronous) and answers segment 0; the encoded
//! answer is kept for [`RESULT_TTL_MS`] so that its later segments are served
//! by name. The table of kept answers is bounded ([`MAX_KEPT`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_catalog::{Catalog, Query};
use granary_face::internal::AppFace;
use granary_face::{LinkFields, NetPacket};
use granary_mgmt::ControlParameters;
use granary_packet::types::{nack_reason, COMP_SEGMENT, COMP_VERSION};
use granary_packet::{Component, Data, DataBuilder, Interest, Name};
use serde_json::{json, Value};

use crate::protocol::*;

/// Answers kept for later segments, at most.
pub const MAX_KEPT: usize = 256;

struct Kept {
    segments: Vec<Data>,
    at: Instant,
}

/// The service: a catalog and the prefixes it answers under.
pub struct Service {
    catalog: Arc<Catalog>,
    prefixes: Vec<Name>,
    kept: Mutex<HashMap<Name, Kept>>,
}

impl Service {
    /// A service answering under `prefixes` (e.g. [`LOCAL_PREFIX`] and
    /// `<node prefix>/catalog`).
    pub fn new(catalog: Arc<Catalog>, prefixes: Vec<Name>) -> Arc<Self> {
        Arc::new(Service {
            catalog,
            prefixes,
            kept: Mutex::default(),
        })
    }

    /// Registers the prefixes (rib/register through the face) and serves
    /// Interests until the face closes.
    pub async fn run(self: Arc<Self>, mut face: AppFace) {
        let nfd = Name::from_uri(granary_mgmt::LOCALHOST_NFD).unwrap_or_default();
        for p in &self.prefixes {
            let mut cp = ControlParameters::new();
            cp.name = Some(p.clone());
            cp.cost = Some(0);
            cp.flags = Some(granary_mgmt::values::route_flags::CHILD_INHERIT);
            cp.origin = Some(granary_mgmt::values::route_origin::STATIC);
            let cmd = granary_mgmt::make_command(&nfd, "rib", "register", &cp).encode();
            face.send(NetPacket::Interest(cmd), LinkFields::default())
                .await;
        }
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(NetPacket, LinkFields)>(256);
        loop {
            tokio::select! {
                got = face.recv() => {
                    let Some((pkt, link)) = got else { break };
                    let NetPacket::Interest(i) = pkt else { continue };
                    let out = LinkFields { pit_token: link.pit_token.clone(), ..Default::default() };
                    if let Some(p) = self.on_interest(&i, &tx, out.clone()) {
                        face.send(p, out).await;
                    }
                }
                Some((p, link)) = rx.recv() => {
                    face.send(p, link).await;
                }
            }
        }
    }

    fn verb_of(&self, n: &Name) -> Option<(usize, String)> {
        let p = self.prefixes.iter().find(|p| p.is_prefix_of(n))?;
        let c = n.get(p.len() as isize)?;
        Some((p.len(), String::from_utf8_lossy(c.value).into_owned()))
    }

    /// Answers at once (a kept segment, a Nack) or starts the request and
    /// sends segment 0 through `tx` when it is ready.
    fn on_interest(
        self: &Arc<Self>,
        i: &Interest,
        tx: &tokio::sync::mpsc::Sender<(NetPacket, LinkFields)>,
        link: LinkFields,
    ) -> Option<NetPacket> {
        let n = &i.name;
        let Some((at, verb)) = self.verb_of(n) else {
            return Some(NetPacket::Nack(i.clone(), nack_reason::NO_ROUTE));
        };
        // A later segment: <prefix>/<verb>/<digest>/v=<v>/seg=<k>.
        if n.len() == at + 4 {
            let seg = n.get(-1).filter(|c| c.typ == COMP_SEGMENT);
            let ver = n.get(-2).filter(|c| c.typ == COMP_VERSION);
            if let (Some(seg), Some(_)) = (seg, ver) {
                let k = seg.as_segment().unwrap_or(u64::MAX);
                let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
                kept.retain(|_, v| v.at.elapsed() < Duration::from_millis(RESULT_TTL_MS));
                if let Some(d) = kept
                    .get(&n.prefix(-1))
                    .and_then(|v| v.segments.get(k as usize))
                {
                    return Some(NetPacket::Data(d.clone()));
                }
            }
            return Some(NetPacket::Nack(i.clone(), nack_reason::NO_ROUTE));
        }
        // A request: <prefix>/<verb>/<params-sha256> with parameters.
        let Some(params) = i.app_params.clone() else {
            return Some(NetPacket::Nack(i.clone(), nack_reason::NO_ROUTE));
        };
        if n.len() != at + 2 || !i.params_digest_ok() || params.len() > MAX_REQUEST {
            return Some(NetPacket::Nack(i.clone(), nack_reason::NO_ROUTE));
        }
        let me = self.clone();
        let name = n.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let cat = me.catalog.clone();
            let answer = tokio::task::spawn_blocking(move || answer(&cat, &verb, &params))
                .await
                .unwrap_or_else(|e| json!({"error": format!("catalog task failed: {e}")}));
            let segments = segment(&name, answer);
            let first = segments[0].clone();
            {
                let mut kept = me.kept.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() >= MAX_KEPT {
                    kept.retain(|_, v| v.at.elapsed() < Duration::from_millis(RESULT_TTL_MS));
                    if kept.len() >= MAX_KEPT {
                        kept.clear();
                    }
                }
                if segments.len() > 1 {
                    kept.insert(
                        first.name().prefix(-1),
                        Kept {
                            segments,
                            at: Instant::now(),
                        },
                    );
                }
            }
            let _ = tx.send((NetPacket::Data(first), link)).await;
        });
        None
    }
}

/// A search page as it is sent: records without their detail (`meta`) and
/// free-text blob (`text`); the `record` verb gives those.
pub fn slim(page: &mut granary_catalog::Page) {
    for h in &mut page.hits {
        h.meta = Value::Null;
        h.text.clear();
    }
}

/// Runs one request against the catalog.
pub fn answer(cat: &Catalog, verb: &str, params: &[u8]) -> Value {
    let req: Value = match serde_json::from_slice(params) {
        Ok(v) => v,
        Err(e) => return json!({"error": format!("request is not JSON: {e}")}),
    };
    let r = match verb {
        VERB_SEARCH => serde_json::from_value::<Query>(req)
            .map_err(|e| format!("bad query: {e}"))
            .and_then(|q| cat.query(&q).map_err(|e| e.to_string()))
            .map(|mut page| {
                slim(&mut page);
                json!(page)
            }),
        VERB_AUTOCOMPLETE => {
            let facet = req["facet"].as_str().unwrap_or_default().to_string();
            let prefix = req["prefix"].as_str().unwrap_or_default();
            let limit = req["limit"].as_u64().unwrap_or(10).min(1000) as usize;
            let q = match req.get("query").filter(|v| !v.is_null()) {
                Some(v) => match serde_json::from_value::<Query>(v.clone()) {
                    Ok(q) => Some(q),
                    Err(e) => return json!({"error": format!("bad query: {e}")}),
                },
                None => None,
            };
            cat.autocomplete(&facet, prefix, limit, q.as_ref())
                .map(|values| json!({"facet": facet, "values": values}))
                .map_err(|e| e.to_string())
        }
        VERB_RECORD => {
            let name = req["name"].as_str().unwrap_or_default();
            let version = req["version"].as_u64();
            match cat.get(name, version) {
                Ok(Some(r)) => {
                    let versions = cat.versions(name).unwrap_or_default();
                    let mut v = json!(r);
                    v["versions"] = json!(versions);
                    Ok(v)
                }
                Ok(None) => Err(format!("{name}: not in the catalog")),
                Err(e) => Err(e.to_string()),
            }
        }
        other => Err(format!(
            "unknown verb {other:?} (search, autocomplete, record)"
        )),
    };
    r.unwrap_or_else(|e| json!({ "error": e }))
}

/// The answer as Data segments named `<name>/v=<now µs>/seg=<k>`,
/// DigestSha256-signed, with FinalBlockId on every one.
pub fn segment(name: &Name, answer: Value) -> Vec<Data> {
    let mut body = answer.to_string().into_bytes();
    if body.len() > MAX_ANSWER {
        body = json!({"error": format!("answer of {} bytes is too large; ask for fewer records", body.len())})
            .to_string()
            .into_bytes();
    }
    let body = Bytes::from(body);
    let version = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let versioned = name.append(&Component::version(version));
    let n = body.len().div_ceil(SEGMENT_SIZE).max(1);
    (0..n)
        .map(|k| {
            let part = body.slice(k * SEGMENT_SIZE..((k + 1) * SEGMENT_SIZE).min(body.len()));
            let b = DataBuilder::new(versioned.append(&Component::segment(k as u64)))
                .content(part)
                .freshness_period(FRESHNESS_MS)
                .final_block_id(Component::segment(n as u64 - 1));
            granary_security::Signer::Digest
                .sign_data(b)
                .expect("DigestSha256 signing cannot fail")
        })
        .collect()
}
