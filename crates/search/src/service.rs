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

    /// Registers the prefixes (rib/register through the face). Awaited
    /// before the node says it is ready: the commands are then ahead of any
    /// packet of a face that connects later, so a search sent right after
    /// start-up finds the route.
    pub async fn register(&self, face: &AppFace) {
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
    }

    /// Serves Interests until the face closes ([`Service::register`] first).
    pub async fn run(self: Arc<Self>, mut face: AppFace) {
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

/// A request field as it was sent: absent (or null), a value of the wanted
/// type, or anything else (kept, with why it is not one, for the error
/// message). Reading a field never fails the request, so each verb checks its
/// fields in its own order and says which one is wrong in its own words.
#[derive(Debug, Default)]
enum Field<T> {
    #[default]
    Absent,
    Given(T),
    Wrong(Value, String),
}

impl<'de, T: serde::de::DeserializeOwned> serde::Deserialize<'de> for Field<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = <Value as serde::Deserialize>::deserialize(d)?;
        Ok(match v {
            Value::Null => Field::Absent,
            v => match serde_json::from_value::<T>(v.clone()) {
                Ok(t) => Field::Given(t),
                Err(e) => Field::Wrong(v, e.to_string()),
            },
        })
    }
}

impl Field<u64> {
    /// An optional whole number: anything else is refused rather than
    /// silently replaced.
    fn whole(self, key: &str) -> Result<Option<u64>, String> {
        match self {
            Field::Absent => Ok(None),
            Field::Given(n) => Ok(Some(n)),
            Field::Wrong(v, _) => Err(format!("\"{key}\" must be a whole number, not {v}")),
        }
    }

    /// An optional count: absent gives `default`, more than `max` is `max`.
    fn count(self, key: &str, default: u64, max: u64) -> Result<usize, String> {
        self.whole(key)
            .map(|n| n.map_or(default, |n| n.min(max)) as usize)
    }
}

impl Field<String> {
    /// An optional string.
    fn text(self, key: &str) -> Result<Option<String>, String> {
        match self {
            Field::Absent => Ok(None),
            Field::Given(s) => Ok(Some(s)),
            Field::Wrong(..) => Err(format!("\"{key}\" must be a string")),
        }
    }
}

impl Field<Query> {
    /// An optional search that narrows the answer.
    fn query(self) -> Result<Option<Query>, String> {
        match self {
            Field::Absent => Ok(None),
            Field::Given(q) => Ok(Some(q)),
            Field::Wrong(_, e) => Err(format!("bad query: {e}")),
        }
    }
}

/// `autocomplete`: values of `facet` starting with `prefix`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct AutocompleteRequest {
    facet: Field<String>,
    prefix: Field<String>,
    limit: Field<u64>,
    query: Field<Query>,
}

/// `names`: the children of `parent` in the name tree.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct NamesRequest {
    parent: Field<String>,
    prefix: Field<String>,
    limit: Field<u64>,
    query: Field<Query>,
}

/// `record`: one record, by name and (optionally) version.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct RecordRequest {
    name: Field<String>,
    version: Field<u64>,
}

/// `locate`: the nodes holding a name.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct LocateRequest {
    name: Field<String>,
    version: Field<u64>,
    node_timeout_ms: Field<u64>,
}

/// A request object read into `R`: unknown fields are ignored and every field
/// reads (see [`Field`]), so this cannot fail on an object.
fn parse<R: serde::de::DeserializeOwned + Default>(req: Value) -> R {
    serde_json::from_value(req).unwrap_or_default()
}

/// Runs one request against the catalog.
pub fn answer(cat: &Catalog, verb: &str, params: &[u8]) -> Value {
    let down = std::cell::Cell::new(false);
    let cat_err = |e: granary_catalog::Error| {
        if e.is_unavailable() {
            down.set(true);
            format!("{e}; the node reconnects by itself: try again shortly")
        } else {
            e.to_string()
        }
    };
    let req: Value = match serde_json::from_slice(params) {
        Ok(v) => v,
        Err(e) => return json!({"error": format!("request is not JSON: {e}")}),
    };
    let r = match verb {
        VERB_SEARCH => serde_json::from_value::<Query>(req)
            .map_err(|e| format!("bad query: {e}"))
            .and_then(|q| cat.query(&q).map_err(cat_err))
            .map(|mut page| {
                slim(&mut page);
                json!(page)
            }),
        _ if !req.is_object() => Err("the request must be a JSON object".to_string()),
        VERB_DATASETS => serde_json::from_value::<granary_catalog::DatasetQuery>(req)
            .map_err(|e| format!("bad dataset query: {e}"))
            .and_then(|q| cat.datasets(&q).map_err(cat_err))
            .map(|page| json!(page)),
        VERB_AUTOCOMPLETE => {
            let r: AutocompleteRequest = parse(req);
            let Field::Given(facet) = r.facet else {
                return json!({"error": "autocomplete needs \"facet\": a string"});
            };
            let (prefix, limit) = match (r.prefix.text("prefix"), r.limit.count("limit", 10, 1000))
            {
                (Ok(p), Ok(l)) => (p.unwrap_or_default(), l),
                (Err(e), _) | (_, Err(e)) => return json!({ "error": e }),
            };
            let q = match r.query.query() {
                Ok(q) => q,
                Err(e) => return json!({ "error": e }),
            };
            cat.autocomplete(&facet, &prefix, limit, q.as_ref())
                .map(|values| json!({"facet": facet, "values": values}))
                .map_err(cat_err)
        }
        VERB_NAMES => {
            let r: NamesRequest = parse(req);
            let (parent, prefix, limit) = match (
                r.parent.text("parent"),
                r.prefix.text("prefix"),
                r.limit.count("limit", 100, 10_000),
            ) {
                (Ok(a), Ok(p), Ok(l)) => (
                    a.unwrap_or_else(|| "/".to_string()),
                    p.unwrap_or_default(),
                    l,
                ),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return json!({ "error": e }),
            };
            let q = match r.query.query() {
                Ok(q) => q,
                Err(e) => return json!({ "error": e }),
            };
            cat.name_children(&parent, &prefix, limit, q.as_ref())
                .map(|children| json!({"parent": parent, "children": children}))
                .map_err(cat_err)
        }
        VERB_RECORD => {
            let r: RecordRequest = parse(req);
            let Field::Given(name) = r.name else {
                return json!({"error": "record needs \"name\": a string"});
            };
            let version = match r.version.whole("version") {
                Ok(v) => v,
                Err(e) => return json!({ "error": e }),
            };
            match cat.get(&name, version) {
                Ok(Some(r)) => {
                    let versions = cat.versions(&name).unwrap_or_default();
                    let mut v = json!(r);
                    v["versions"] = json!(versions);
                    Ok(v)
                }
                Ok(None) => Err(format!("{name}: not in the catalog")),
                Err(e) => Err(cat_err(e)),
            }
        }
        VERB_LOCATE => {
            let r: LocateRequest = parse(req);
            let Field::Given(name) = r.name else {
                return json!({"error": "locate needs \"name\": a string"});
            };
            let (version, timeout) = match (
                r.version.whole("version"),
                r.node_timeout_ms.whole("node_timeout_ms"),
            ) {
                (Ok(v), Ok(t)) => (
                    v,
                    t.map_or_else(|| cat.node_timeout(), Duration::from_millis),
                ),
                (Err(e), _) | (_, Err(e)) => return json!({ "error": e }),
            };
            cat.locate(&name, version, timeout)
                .map(|locs| {
                    let v = locs.first().map(|l| l.version).or(version);
                    json!({"name": name, "version": v, "locations": locs})
                })
                .map_err(cat_err)
        }
        other => Err(format!(
            "unknown verb {other:?} (search, datasets, autocomplete, names, record, locate)"
        )),
    };
    match r {
        Ok(v) => v,
        // The catalog's database is down: said as such, so that a client
        // can tell an outage (try again) from a bad request.
        Err(e) if down.get() => json!({ "error": e, "unavailable": true }),
        Err(e) => json!({ "error": e }),
    }
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
            granary_packet::digest::sign_data(b)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! Bad requests against the real service code path (Interests encoded and decoded
    //! as wire bytes, a real SQLite catalog): each gets its documented answer —
    //! `{"error"}` Data or a Nack — and the service keeps answering good requests.

    use super::*;
    use granary_catalog::Record;
    use granary_packet::InterestFields;

    fn catalog() -> (tempfile::TempDir, Arc<Catalog>) {
        let d = tempfile::tempdir().unwrap();
        let cat = Catalog::open(d.path().join("cat").to_str().unwrap()).unwrap();
        let recs: Vec<Record> = (0..30)
            .map(|i| Record {
                name: format!("/cmip6/CMIP/M{}/f{i}.nc", i % 3),
                version: 1,
                project: "CMIP6".into(),
                facets: [("source_id".to_string(), format!("M{}", i % 3))].into(),
                title: format!("tas_{i}.nc"),
                text: "near surface air temperature".into(),
                ..Record::default()
            })
            .collect();
        cat.upsert_many(&recs).unwrap();
        (d, Arc::new(cat))
    }

    fn interest(name: Name, params: Option<&[u8]>) -> Interest {
        let mut f = InterestFields::new(name);
        f.can_be_prefix = true;
        f.must_be_fresh = true;
        f.nonce = Some(7);
        f.app_params = params.map(Bytes::copy_from_slice);
        f.encode()
    }

    fn verb(prefix: &Name, v: &[u8]) -> Name {
        prefix.append(&Component::generic(v))
    }

    /// What the service answers: Ok(JSON) for a Data, Err(()) for a Nack.
    async fn ask(svc: &Arc<Service>, i: &Interest) -> Result<Value, ()> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let p = match svc.on_interest(i, &tx, LinkFields::default()) {
            Some(p) => p,
            None => {
                tokio::time::timeout(Duration::from_secs(20), rx.recv())
                    .await
                    .expect("an answer in time")
                    .expect("the service task answered")
                    .0
            }
        };
        match p {
            NetPacket::Data(d) => {
                assert!(d.name().len() == i.name.len() + 2, "{}", d.name());
                assert!(i.name.is_prefix_of(d.name()));
                assert_eq!(
                    d.final_block_id().and_then(|c| c.as_ref().as_segment()),
                    Some(0)
                );
                Ok(serde_json::from_slice(d.content()).expect("answers are JSON"))
            }
            NetPacket::Nack(..) => Err(()),
            other => panic!("unexpected answer {other:?}"),
        }
    }

    fn error_of(v: &Value) -> &str {
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("expected an error, got {v}"))
    }

    /// Each verb's field checks: which field is named, in which order, in which words.
    #[test]
    fn field_errors_name_the_field() {
        let (_d, cat) = catalog();
        let cases: [(&str, &str, &str); 12] = [
            (
                "autocomplete",
                r#"{"facet":5}"#,
                r#"autocomplete needs "facet": a string"#,
            ),
            (
                "autocomplete",
                r#"{"facet":null}"#,
                r#"autocomplete needs "facet": a string"#,
            ),
            (
                "autocomplete",
                r#"{"facet":"a","prefix":1,"limit":-1}"#,
                r#""prefix" must be a string"#,
            ),
            (
                "autocomplete",
                r#"{"facet":"a","limit":2.5}"#,
                r#""limit" must be a whole number, not 2.5"#,
            ),
            (
                "names",
                r#"{"parent":"/","prefix":"x","limit":"all"}"#,
                r#""limit" must be a whole number, not "all""#,
            ),
            (
                "names",
                r#"{"parent":7,"limit":"all"}"#,
                r#""parent" must be a string"#,
            ),
            (
                "record",
                r#"{"version":1}"#,
                r#"record needs "name": a string"#,
            ),
            (
                "record",
                r#"{"name":"/a","version":-1}"#,
                r#""version" must be a whole number, not -1"#,
            ),
            ("locate", "{}", r#"locate needs "name": a string"#),
            (
                "locate",
                r#"{"name":"/a","version":"1","node_timeout_ms":"x"}"#,
                r#""version" must be a whole number, not "1""#,
            ),
            (
                "locate",
                r#"{"name":"/a","node_timeout_ms":[1]}"#,
                r#""node_timeout_ms" must be a whole number, not [1]"#,
            ),
            ("names", "[]", "the request must be a JSON object"),
        ];
        for (verb, params, want) in cases {
            let a = answer(&cat, verb, params.as_bytes());
            assert_eq!(error_of(&a), want, "{verb} {params}");
        }
        let a = answer(
            &cat,
            "names",
            br#"{"parent":"/cmip6/CMIP","query":{"nope":1}}"#,
        );
        assert!(error_of(&a).starts_with("bad query: "), "{a}");
        // Unknown fields are ignored, null is absent.
        let a = answer(
            &cat,
            "names",
            br#"{"parent":"/cmip6/CMIP","limit":null,"other":1}"#,
        );
        assert_eq!(a["children"], json!([["M0", 10], ["M1", 10], ["M2", 10]]));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_requests_get_errors_or_nacks_and_the_service_keeps_serving() {
        let (_d, cat) = catalog();
        let prefix = Name::from_uri(LOCAL_PREFIX).unwrap();
        let svc = Service::new(cat.clone(), vec![prefix.clone()]);
        let search = verb(&prefix, VERB_SEARCH.as_bytes());
        let params: &[u8] = br#"{"filters":{"source_id":["M1"]}}"#;
        let good = interest(search.clone(), Some(params));
        let ok = ask(&svc, &good).await.unwrap();
        assert_eq!(ok["total"], 10, "{ok}");

        // Nacks: no parameters, wrong digest, oversize, extra components, other prefix,
        // a later segment that was never made.
        assert!(ask(&svc, &interest(search.clone(), None)).await.is_err());
        // One byte of the parameters changed on the wire: the Interest still decodes, to
        // the same name, but the digest in the name no longer fits its parameters.
        let mut wire = good.wire().to_vec();
        let at = wire
            .windows(params.len())
            .position(|w| w == params)
            .expect("the parameters are on the wire as they are");
        wire[at + params.len() - 1] ^= 0x01;
        let bad = Interest::decode(Bytes::from(wire)).expect("a changed parameter byte decodes");
        assert_eq!(bad.name, good.name);
        assert!(good.params_digest_ok() && !bad.params_digest_ok());
        assert!(ask(&svc, &bad).await.is_err(), "wrong digest");
        let huge = vec![b' '; MAX_REQUEST + 1];
        assert!(ask(&svc, &interest(search.clone(), Some(&huge)))
            .await
            .is_err());
        let extra = search.append(&Component::generic(b"more"));
        assert!(ask(&svc, &interest(extra, Some(b"{}"))).await.is_err());
        let other = Name::from_uri("/elsewhere/catalog/search").unwrap();
        assert!(ask(&svc, &interest(other, Some(b"{}"))).await.is_err());
        let seg = good
            .name
            .append(&Component::version(1))
            .append(&Component::segment(1));
        assert!(ask(&svc, &interest(seg, None)).await.is_err());

        // {"error"} Data: every malformed, mistyped, missing, out-of-range or hostile
        // request, on every verb.
        let nested = "[".repeat(60_000);
        let long = format!(
            r#"{{"filters":{{"source_id":["{}"]}}}}"#,
            "x".repeat(10_000)
        );
        let cases: Vec<(&[u8], &[u8])> = vec![
            (b"search", b"{"),
            (b"search", b""),
            (b"search", b"\xff\xfe\x00garbage"),
            (b"search", nested.as_bytes()),
            (b"search", b"[1,2,3]"),
            (b"search", b"null"),
            (b"search", br#"{"filterz":{}}"#),
            (b"search", br#"{"limit":"ten"}"#),
            (b"search", br#"{"limit":1000000000}"#),
            (b"search", br#"{"offset":-1}"#),
            (b"search", br#"{"sort":"random()"}"#),
            (b"search", br#"{"facets":"everything"}"#),
            (b"search", br#"{"filters":{"source_id":"M1"}}"#),
            (b"search", br#"{"filters":{"source_id":["a\u0000b"]}}"#),
            (b"search", br#"{"filters":{"bad\u0007key":["M1"]}}"#),
            (b"search", long.as_bytes()),
            (b"search", br#"{"time_overlap":["1850",2000]}"#),
            (b"autocomplete", b"{}"),
            (b"autocomplete", br#"{"facet":5}"#),
            (b"autocomplete", br#"{"facet":"source_id","limit":-3}"#),
            (b"autocomplete", br#"{"facet":"source_id","prefix":["M"]}"#),
            (
                b"autocomplete",
                br#"{"facet":"source_id","query":{"nope":1}}"#,
            ),
            (b"autocomplete", br#"{"facet":"source\u0000id"}"#),
            (b"names", br#"{"parent":7}"#),
            (b"names", br#"{"parent":"/cmip6","limit":"all"}"#),
            (b"names", br#"{"parent":"/cmip6\u0000"}"#),
            (b"record", b"{}"),
            (b"record", br#"{"name":"/nosuch"}"#),
            (
                b"record",
                br#"{"name":"/cmip6/CMIP/M0/f0.nc","version":"one"}"#,
            ),
            (b"drop", b"{}"),
            (b"\xff\x00verb", b"{}"),
        ];
        for (v, params) in &cases {
            let i = interest(verb(&prefix, v), Some(params));
            let a = ask(&svc, &i).await.unwrap_or_else(|_| {
                panic!(
                    "{:?} {:?}: a Nack",
                    String::from_utf8_lossy(v),
                    params.len()
                )
            });
            assert!(!error_of(&a).is_empty());
            // The same request through `answer` (what the HTTP gateway calls).
            let direct = answer(&cat, &String::from_utf8_lossy(v), params);
            assert!(!error_of(&direct).is_empty());
        }

        // Hostile strings that are valid requests are answered, as plain data.
        for text in [
            r#"'; DROP TABLE records; --"#,
            r#"\"x\" NEAR(a b) -c* col:tas OR 1=1"#,
            "temperature 中文 🌍",
        ] {
            let q = json!({"text": text, "facets": "all"}).to_string();
            let a = ask(&svc, &interest(search.clone(), Some(q.as_bytes())))
                .await
                .unwrap();
            assert!(a.get("error").is_none() && a["total"].is_u64(), "{a}");
        }
        let q = json!({"filters": {"source_id": ["M1' OR '1'='1"]}}).to_string();
        let a = ask(&svc, &interest(search.clone(), Some(q.as_bytes())))
            .await
            .unwrap();
        assert_eq!(a["total"], 0, "{a}");

        // And it still serves: the same good request, the other verbs.
        assert_eq!(ask(&svc, &good).await.unwrap(), {
            let mut v = ok.clone();
            v["total"] = json!(10);
            v
        });
        let ac = interest(
            verb(&prefix, VERB_AUTOCOMPLETE.as_bytes()),
            Some(br#"{"facet":"source_id","prefix":"m"}"#),
        );
        assert_eq!(
            ask(&svc, &ac).await.unwrap()["values"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        let nm = interest(
            verb(&prefix, VERB_NAMES.as_bytes()),
            Some(br#"{"parent":"/cmip6/CMIP"}"#),
        );
        let names = ask(&svc, &nm).await.unwrap();
        assert_eq!(
            names["children"],
            json!([["M0", 10], ["M1", 10], ["M2", 10]])
        );
        assert_eq!(cat.len().unwrap(), 30, "nothing was changed by any request");
    }
}
