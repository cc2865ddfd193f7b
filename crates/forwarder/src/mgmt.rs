//! NFD management on `/localhost/nfd` (and `/localhop/nfd`): commands and
//! status datasets, answered under the forwarder's lock as they arrive.
//!
//! Commands from local faces are accepted whether signed (either form) or
//! not, as NFD's default `localhost` policy does. Commands arriving on
//! non-local faces (`/localhop/nfd`) must be signed Interests v0.3 whose
//! KeyLocator names a key of a configured trust anchor, must verify, and
//! must pass the replay checker (SignatureTime window, nonce memory).
//!
//! Management sees the forwarder only through [`Managed`]: the tables it
//! reads and changes (faces, RIB/FIB, strategy choice, CS settings), the
//! totals of its datasets, and a way to reply. It never calls the pipelines:
//! its replies go straight to the requesting face and never enter the PIT or
//! the Content Store. The forwarder implements [`Managed`] and calls
//! [`handle`] for `/localhost` and `/localhop` Interests before the PIT.

use std::net::SocketAddr;

use bytes::Bytes;
use granary_face::{Counters, FaceHandle, FaceId, LinkFields, Persistency, Scope};
use granary_mgmt::values::{
    cs_flags, face_persistency, face_scope, link_type, route_flags, route_origin,
};
use granary_mgmt::{
    encode_dataset, parse_command, segment_dataset, status, Command, ControlParameters,
    ControlResponse, CsInfo, FaceStatus, FibEntry, GeneralStatus, NextHopRecord, RibEntry,
    StrategyChoice as ScEntry, TlvElement, MAX_DATASET_SEGMENT,
};
use granary_packet::{Data, DataBuilder, Interest, Name};
use tokio::time::Instant;

use crate::config::{FaceContext, FaceMap};
use crate::cs::{CsConfig, Policy};
use crate::fib::{Route, Tables};
use crate::strategy::{Strategy, StrategyChoice};

/// The forwarder as management sees it: the one interface between NFD
/// management and the forwarder. Everything a command or a dataset needs,
/// and nothing of the pipelines (no PIT entries, no forwarding).
pub(crate) trait Managed {
    /// Management's own state.
    fn state(&self) -> &MgmtState;
    /// Management's own state, to change.
    fn state_mut(&mut self) -> &mut MgmtState;
    /// The face table.
    fn faces(&self) -> &FaceMap;
    /// Adds a face (faces/create over UDP).
    fn add_face(&mut self, h: FaceHandle);
    /// Removes a face and its routes (faces/destroy); the face is returned,
    /// not closed.
    fn remove_face(&mut self, id: FaceId) -> Option<FaceHandle>;
    /// RIB and FIB.
    fn tables(&self) -> &Tables;
    /// RIB and FIB, to change.
    fn tables_mut(&mut self) -> &mut Tables;
    /// Strategy choice.
    fn strategies(&self) -> &StrategyChoice;
    /// Strategy choice, to change.
    fn strategies_mut(&mut self) -> &mut StrategyChoice;
    /// True when the PIT and CS are split over data shards.
    fn sharded(&self) -> bool;
    /// The CS settings as configured (sharded: the whole, not one shard's).
    fn cs_config(&self) -> &CsConfig;
    /// Applies CS settings (sharded: each shard takes its share).
    fn set_cs_config(&mut self, cfg: CsConfig);
    /// Erases up to `limit` cached packets under `prefix`; how many went.
    fn cs_erase(&mut self, prefix: &Name, limit: usize) -> usize;
    /// Table sizes and counters, over every shard.
    fn totals(&self) -> Totals;
    /// Packet counters of the faces closed so far.
    fn closed_faces(&self) -> ClosedFaces;
    /// What faces are created with (faces/create).
    fn face_context(&self) -> &FaceContext;
    /// Marks face `id` permanent (faces/create with Persistency Permanent).
    fn make_permanent(&mut self, id: FaceId, target: crate::permanent::Target, up: bool);
    /// The permanent faces, up and down.
    fn permanent_faces(&self) -> Vec<PermanentStatus>;
    /// Dials every permanent face that is down now, whatever its back-off
    /// (faces/redial); returns how many.
    fn redial_permanent(&mut self) -> u64;
    /// A face's VIP capacity in VIPs per period (None: VIP not in use).
    fn vip_face_capacity(&self, _face: FaceId) -> Option<u64> {
        None
    }
    /// Configures a face's Data rate in bits/s, VIP's capacity source
    /// (None: measure it); false when this forwarder cannot (sharded).
    fn set_face_rate(&mut self, _face: FaceId, _rate_bps: Option<u64>) -> bool {
        false
    }
    /// A face's configured Data rate in bits/s.
    fn face_rate(&self, _face: FaceId) -> Option<u64> {
        None
    }
    /// Sends a reply to the face a command came from.
    fn reply(&self, face: FaceId, d: &Data, pit_token: Option<Bytes>);
    /// Called after every command: sharded, the data shards take the new
    /// face table, FIB, strategy choice and CS settings before anything
    /// else is forwarded.
    fn after_command(&mut self);
}

/// What closed faces had counted (the forwarder's `Stats::closed_faces`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ClosedFaces {
    pub in_interests: u64,
    pub in_data: u64,
    pub in_nacks: u64,
    pub out_interests: u64,
    pub out_data: u64,
    pub out_nacks: u64,
}

impl ClosedFaces {
    /// Adds a closing face's counters.
    pub(crate) fn add(&mut self, c: &granary_face::Counters) {
        let g = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        self.in_interests += g(&c.in_interests);
        self.in_data += g(&c.in_data);
        self.in_nacks += g(&c.in_nacks);
        self.out_interests += g(&c.out_interests);
        self.out_data += g(&c.out_data);
        self.out_nacks += g(&c.out_nacks);
    }
}

/// One permanent face, as faces/list and status/forwarding show it.
#[derive(Debug, Clone)]
pub struct PermanentStatus {
    /// Face id (the same across re-dials).
    pub id: FaceId,
    /// Remote FaceUri.
    pub uri: String,
    /// Connected.
    pub up: bool,
    /// Failed connection attempts since it was last up.
    pub failures: u64,
    /// Times it came back after going down.
    pub redials: u64,
    /// The last connection error.
    pub last_error: String,
}

/// Table sizes and counters for the cs/info and status/general datasets,
/// summed over every shard.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    /// PIT entries.
    pub pit_entries: u64,
    /// Cached packets.
    pub cs_entries: u64,
    /// CS hits.
    pub cs_hits: u64,
    /// CS misses.
    pub cs_misses: u64,
    /// PIT entries satisfied by Data.
    pub satisfied: u64,
    /// PIT entries that expired.
    pub unsatisfied: u64,
    /// Interests forwarded by a ForwardingHint.
    pub hinted: u64,
    /// Interests whose hint was stripped in the network region.
    pub hint_stripped: u64,
    /// Nacks NoRoute generated.
    pub no_route: u64,
}

/// Management's own state: its configuration (trust anchors, listener
/// URIs), the replay checker, and recently generated datasets, so later
/// segments can be fetched.
pub struct MgmtState {
    datasets: Vec<(Instant, Vec<Data>)>,
    /// Certificates whose keys may sign commands from non-local faces.
    trust: Vec<granary_security::Certificate>,
    replay: granary_security::ReplayChecker,
    /// Listener URIs (faces/channels).
    channels: Vec<String>,
    /// When the forwarder started (status/general).
    started: std::time::SystemTime,
}

impl MgmtState {
    /// State for a forwarder starting now.
    pub(crate) fn new(trust: Vec<granary_security::Certificate>, channels: Vec<String>) -> Self {
        MgmtState {
            datasets: Vec::new(),
            trust,
            replay: granary_security::ReplayChecker::default(),
            channels,
            started: std::time::SystemTime::now(),
        }
    }

    /// Forgets datasets generated more than 5 s ago (housekeeping).
    pub(crate) fn expire(&mut self, now: Instant) {
        self.datasets
            .retain(|(t, _)| now.duration_since(*t) < std::time::Duration::from_secs(5));
    }
}

fn response(name: &Name, r: ControlResponse) -> Data {
    granary_packet::digest::sign_data(DataBuilder::new(name.clone()).content(r.encode()))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn persistency_code(p: Persistency) -> u64 {
    match p {
        Persistency::OnDemand => face_persistency::ON_DEMAND,
        Persistency::Persistent => face_persistency::PERSISTENT,
        Persistency::Permanent => face_persistency::PERMANENT,
    }
}

/// Why the VIP strategy and CS policy are refused on a sharded forwarder:
/// their counts and cache set are one node-wide view, which the shards
/// would each see a part of.
const VIP_NEEDS_ONE_SHARD: &str =
    "the vip strategy and CS policy need one forwarding shard (start the daemon with --shards 1)";

/// Handles management Interests. `Some(true)`: answered here.
pub(crate) fn handle<M: Managed>(
    fw: &mut M,
    face: FaceId,
    i: &Interest,
    link: &LinkFields,
    now: Instant,
) -> Option<bool> {
    let first2 = i.name.prefix(2).to_string();
    if first2 != granary_mgmt::LOCALHOST_NFD && first2 != granary_mgmt::LOCALHOP_NFD {
        return Some(false);
    }
    let prefix = i.name.prefix(2);
    let module = i
        .name
        .get(2)
        .map(|c| String::from_utf8_lossy(c.value).into_owned())
        .unwrap_or_default();
    let verb = i
        .name
        .get(3)
        .map(|c| String::from_utf8_lossy(c.value).into_owned())
        .unwrap_or_default();
    let reply = |fw: &M, d: Data| fw.reply(face, &d, link.pit_token.clone());

    let dataset = matches!(
        (module.as_str(), verb.as_str()),
        ("faces", "list")
            | ("faces", "query")
            | ("faces", "channels")
            | ("fib", "list")
            | ("rib", "list")
            | ("strategy-choice", "list")
            | ("cs", "info")
            | ("status", "general")
            | ("status", "forwarding")
    );
    if dataset {
        // faces/query carries its FaceQueryFilter as one more component:
        // the dataset is named after it (`…/query/<filter>/v=/seg=`).
        let query = (module.as_str(), verb.as_str()) == ("faces", "query");
        let base_len = if query && i.name.len() >= 5 && !is_version_or_segment(i.name.get(4)) {
            5
        } else {
            4
        };
        let base = i.name.prefix(base_len as isize);
        if i.name.len() > base_len {
            // A specific version/segment: from the cache, or not at all.
            let hit = fw
                .state()
                .datasets
                .iter()
                .flat_map(|(_, segs)| segs.iter())
                .find(|d| d.matches_name(&i.name, i.can_be_prefix))
                .cloned();
            if let Some(d) = hit {
                reply(fw, d);
            }
            return Some(true);
        }
        let filter = if base_len == 5 {
            match i
                .name
                .get(4)
                .map(|c| bytes::Bytes::copy_from_slice(c.value))
            {
                Some(b) => match granary_mgmt::FaceQueryFilter::decode(&b) {
                    Ok(f) => Some(f),
                    Err(e) => {
                        // NFD answers a malformed filter with a
                        // ControlResponse 400.
                        reply(
                            fw,
                            response(
                                &i.name,
                                ControlResponse::new(
                                    status::BAD_REQUEST,
                                    format!("malformed FaceQueryFilter: {e}"),
                                ),
                            ),
                        );
                        return Some(true);
                    }
                },
                None => None,
            }
        } else {
            None
        };
        let payload = match (module.as_str(), verb.as_str()) {
            ("faces", "query") => faces_payload(fw, filter.as_ref()),
            _ => dataset_payload(fw, &module, &verb),
        };
        let segs: Vec<Data> = segment_dataset(&base, now_ms(), &payload, MAX_DATASET_SEGMENT)
            .into_iter()
            .map(granary_packet::digest::sign_data)
            .collect();
        if let Some(first) = segs.first().cloned() {
            fw.state_mut().datasets.push((now, segs));
            reply(fw, first);
        }
        return Some(true);
    }

    let cmd = match parse_command(i, &prefix) {
        Ok(c) => c,
        Err(e) => {
            reply(
                fw,
                response(
                    &i.name,
                    ControlResponse::new(status::BAD_REQUEST, format!("malformed command: {e}")),
                ),
            );
            return Some(true);
        }
    };
    if fw.faces().get(&face).map(|f| f.info.scope) != Some(Scope::Local) {
        if let Err(why) = authorize(fw, &cmd, i) {
            tracing::warn!(
                face,
                "refused management command {}/{}: {why}",
                cmd.module,
                cmd.verb
            );
            reply(
                fw,
                response(&i.name, ControlResponse::new(status::FORBIDDEN, why)),
            );
            return Some(true);
        }
    }
    let r = command(fw, face, &cmd, i, link, now);
    fw.after_command();
    tracing::debug!(face, module = %cmd.module, verb = %cmd.verb, status = ?r.as_ref().map(|r| r.status_code), "management command");
    if let Some(r) = r {
        reply(fw, response(&i.name, r));
    }
    Some(true)
}

/// Checks a command from a non-local face against the trust anchors.
fn authorize<M: Managed>(fw: &mut M, cmd: &Command, i: &Interest) -> Result<(), String> {
    let granary_mgmt::SignedForm::V03(signed) = &cmd.signed else {
        return Err("commands from non-local faces must be signed Interests v0.3".into());
    };
    let locator = match &signed.sig_info.key_locator {
        Some(granary_packet::KeyLocator::Name(n)) => n.clone(),
        _ => return Err("the signature has no KeyLocator name".into()),
    };
    let anchor = fw
        .state()
        .trust
        .iter()
        .find(|c| c.key_name().is_prefix_of(&locator) || locator.is_prefix_of(&c.key_name()))
        .ok_or_else(|| format!("{locator} is not a trusted key"))?;
    let now_secs = (granary_security::now_ms() / 1000) as i64;
    if !anchor.is_valid_at(now_secs) {
        return Err(format!("certificate {} is not valid now", anchor.name()));
    }
    let v = anchor.verifier().map_err(|e| e.to_string())?;
    v.verify_interest(i).map_err(|e| e.to_string())?;
    fw.state_mut()
        .replay
        .check(i, granary_security::now_ms())
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn command<M: Managed>(
    fw: &mut M,
    face: FaceId,
    cmd: &Command,
    i: &Interest,
    link: &LinkFields,
    now: Instant,
) -> Option<ControlResponse> {
    let p = &cmd.params;
    let bad = |t: &str| Some(ControlResponse::new(status::BAD_REQUEST, t.to_string()));
    match (cmd.module.as_str(), cmd.verb.as_str()) {
        ("rib", "register") => {
            let Some(name) = p.name.clone() else {
                return bad("Name is required");
            };
            let face_id = p.face_id.filter(|f| *f != 0).unwrap_or(face);
            if !fw.faces().contains_key(&face_id) {
                return Some(ControlResponse::new(
                    status::GONE,
                    format!("face {face_id} does not exist"),
                ));
            }
            let origin = p.origin.unwrap_or(route_origin::APP);
            let cost = p.cost.unwrap_or(0);
            let flags = p.flags.unwrap_or(route_flags::CHILD_INHERIT);
            let expires = p
                .expiration_period
                .map(|ms| now + std::time::Duration::from_millis(ms));
            fw.tables_mut().register(
                name.clone(),
                Route {
                    face: face_id,
                    origin,
                    cost,
                    flags,
                    expires,
                },
            );
            tracing::info!(
                face = face_id,
                "route {name} registered (cost {cost}, origin {origin})"
            );
            let mut out = ControlParameters::new();
            out.name = Some(name);
            out.face_id = Some(face_id);
            out.origin = Some(origin);
            out.cost = Some(cost);
            out.flags = Some(flags);
            out.expiration_period = p.expiration_period;
            Some(ControlResponse::with_params(status::OK, "OK", &out))
        }
        ("rib", "unregister") => {
            let Some(name) = p.name.clone() else {
                return bad("Name is required");
            };
            let face_id = p.face_id.filter(|f| *f != 0).unwrap_or(face);
            let origin = p.origin.unwrap_or(route_origin::APP);
            fw.tables_mut().unregister(&name, face_id, origin);
            let mut out = ControlParameters::new();
            out.name = Some(name);
            out.face_id = Some(face_id);
            out.origin = Some(origin);
            Some(ControlResponse::with_params(status::OK, "OK", &out))
        }
        ("faces", "create") => faces_create(fw, face, p, i, link),
        ("faces", "update") => {
            // FaceId 0 or absent: the requesting face (as NFD).
            let id = p.face_id.filter(|f| *f != 0).unwrap_or(face);
            let Some(h) = fw.faces().get(&id) else {
                return Some(ControlResponse::new(
                    status::NOT_FOUND,
                    format!("no face {id}"),
                ));
            };
            // Marking is done by the stream faces' writer (Unix, TCP).
            let marking_bit = granary_mgmt::values::face_flags::CONGESTION_MARKING_ENABLED;
            if p.has_flag_bit(marking_bit)
                && p.flag_bit(marking_bit)
                && h.info.remote_uri.starts_with("udp")
            {
                return Some(ControlResponse::new(
                    status::NOT_ACCEPTABLE,
                    "congestion marking is available on stream faces (Unix, TCP) only",
                ));
            }
            apply_marking(&h.counters, p);
            if let Some(r) = apply_face_rate(fw, id, p) {
                return Some(r);
            }
            Some(ControlResponse::with_params(
                status::OK,
                "OK",
                &face_params(fw, id),
            ))
        }
        // Granary's own: every permanent face that is down is dialled now
        // (a node whose heartbeat returned is back; its faces need not
        // wait out their back-off). NFD has no such command.
        ("faces", "redial") => {
            let n = fw.redial_permanent();
            if n > 0 {
                tracing::info!("{n} permanent face(s) that were down dialled now");
            }
            Some(ControlResponse::new(
                status::OK,
                format!("{n} permanent face(s) that were down dialled now"),
            ))
        }
        ("faces", "destroy") => {
            let Some(id) = p.face_id else {
                return bad("FaceId is required");
            };
            if let Some(h) = fw.remove_face(id) {
                h.close();
            }
            let mut out = ControlParameters::new();
            out.face_id = Some(id);
            Some(ControlResponse::with_params(status::OK, "OK", &out))
        }
        ("strategy-choice", "set") => {
            let (Some(name), Some(sname)) = (p.name.clone(), p.strategy.clone()) else {
                return bad("Name and Strategy are required");
            };
            let Some(s) = Strategy::from_name(&sname) else {
                return Some(ControlResponse::new(
                    status::NOT_FOUND,
                    format!("unknown strategy {sname}"),
                ));
            };
            if s == Strategy::Vip && fw.sharded() {
                return Some(ControlResponse::new(
                    status::NOT_ACCEPTABLE,
                    VIP_NEEDS_ONE_SHARD,
                ));
            }
            fw.strategies_mut().set(name.clone(), s);
            let mut out = ControlParameters::new();
            out.name = Some(name);
            out.strategy = Some(s.name());
            Some(ControlResponse::with_params(status::OK, "OK", &out))
        }
        ("strategy-choice", "unset") => {
            let Some(name) = p.name.clone() else {
                return bad("Name is required");
            };
            if name.is_empty() {
                return bad("the root strategy cannot be unset");
            }
            fw.strategies_mut().unset(&name);
            let mut out = ControlParameters::new();
            out.name = Some(name);
            Some(ControlResponse::with_params(status::OK, "OK", &out))
        }
        ("cs", "erase") => {
            // NFD's cs/erase: Name, optional Count (limit); reports Count erased.
            let Some(name) = p.name.clone() else {
                return bad("Name is required");
            };
            let limit = p.count.map_or(usize::MAX, |c| c as usize);
            let n = fw.cs_erase(&name, limit);
            let mut out = ControlParameters::new();
            out.name = Some(name);
            out.count = Some(n as u64);
            Some(ControlResponse::with_params(status::OK, "OK", &out))
        }
        ("cs", "config") => {
            let mut cfg = fw.cs_config().clone();
            if let Some(c) = p.capacity {
                cfg.max_packets = c as usize;
            }
            let mask = p.mask.unwrap_or(0);
            let flags = p.flags.unwrap_or(0);
            if mask & cs_flags::ENABLE_ADMIT != 0 {
                cfg.admit = flags & cs_flags::ENABLE_ADMIT != 0;
            }
            if mask & cs_flags::ENABLE_SERVE != 0 {
                cfg.serve = flags & cs_flags::ENABLE_SERVE != 0;
            }
            // Granary extension: the replacement policy as the Strategy
            // element /localhost/granary/cs-policy/<policy>.
            let policy_prefix = Name::from_uri(crate::vip::CS_POLICY_PREFIX).unwrap_or_default();
            if let Some(s) = &p.strategy {
                let policy = (s.len() == policy_prefix.len() + 1
                    && s.prefix(policy_prefix.len() as isize) == policy_prefix)
                    .then(|| s.get(-1))
                    .flatten()
                    .map(|c| String::from_utf8_lossy(c.value).parse::<Policy>());
                match policy {
                    Some(Ok(Policy::Vip)) if fw.sharded() => {
                        return Some(ControlResponse::new(
                            status::NOT_ACCEPTABLE,
                            VIP_NEEDS_ONE_SHARD,
                        ))
                    }
                    Some(Ok(pol)) => cfg.policy = pol,
                    _ => return bad("the CS policy goes in /localhost/granary/cs-policy/<lru|lfu|fifo|random|vip>"),
                }
            }
            fw.set_cs_config(cfg.clone());
            let mut out = ControlParameters::new();
            out.strategy = p.strategy.is_some().then(|| {
                policy_prefix.append(&granary_packet::Component::generic(
                    cfg.policy.as_str().as_bytes(),
                ))
            });
            out.capacity = Some(cfg.max_packets as u64);
            out.flags = Some(cs_flag_bits(&cfg));
            Some(ControlResponse::with_params(status::OK, "OK", &out))
        }
        (m, v) => Some(ControlResponse::new(
            status::NOT_IMPLEMENTED,
            format!("unsupported command {m}/{v}"),
        )),
    }
}

fn cs_flag_bits(c: &CsConfig) -> u64 {
    (if c.admit { cs_flags::ENABLE_ADMIT } else { 0 })
        | (if c.serve { cs_flags::ENABLE_SERVE } else { 0 })
}

fn face_params<M: Managed>(fw: &M, id: FaceId) -> ControlParameters {
    let mut out = ControlParameters::new();
    if let Some(h) = fw.faces().get(&id) {
        out.face_id = Some(id);
        out.uri = Some(h.info.remote_uri.clone());
        out.local_uri = Some(h.info.local_uri.clone());
        out.face_persistency = Some(persistency_code(h.info.persistency));
        out.flags = Some(face_flag_bits(&h.counters));
        out.mtu = h.info.mtu.map(|m| m as u64);
        out.face_rate = fw.face_rate(id);
        let (iv, th) = marking_settings(&h.counters);
        out.base_congestion_marking_interval = Some(iv);
        out.default_congestion_threshold = Some(th);
    }
    out
}

/// FaceRate of faces/create (UDP and TCP) and faces/update: the face's Data rate
/// for VIP's capacity (0: measure it). Some(response) when refused.
fn apply_face_rate<M: Managed>(
    fw: &mut M,
    id: FaceId,
    p: &ControlParameters,
) -> Option<ControlResponse> {
    let rate = p.face_rate?;
    if fw.set_face_rate(id, (rate > 0).then_some(rate)) {
        None
    } else {
        Some(ControlResponse::new(
            status::NOT_ACCEPTABLE,
            format!("FaceRate: {VIP_NEEDS_ONE_SHARD}"),
        ))
    }
}

fn faces_create<M: Managed>(
    fw: &mut M,
    face: FaceId,
    p: &ControlParameters,
    i: &Interest,
    link: &LinkFields,
) -> Option<ControlResponse> {
    let Some(uri) = p.uri.clone() else {
        return Some(ControlResponse::new(status::BAD_REQUEST, "Uri is required"));
    };
    let (scheme, rest) = match uri.split_once("://") {
        Some(x) => x,
        None => {
            return Some(ControlResponse::new(
                status::BAD_REQUEST,
                format!("bad FaceUri {uri}"),
            ))
        }
    };
    let addr: SocketAddr = match rest.trim_end_matches('/').parse() {
        Ok(a) => a,
        Err(_) => {
            return Some(ControlResponse::new(
                status::BAD_REQUEST,
                format!("FaceUri {uri}: expected scheme://IP:port (names are not resolved)"),
            ))
        }
    };
    let canonical = match (scheme, addr) {
        ("tcp" | "tcp4", SocketAddr::V4(_)) => format!("tcp4://{addr}"),
        ("tcp" | "tcp6", SocketAddr::V6(_)) => format!("tcp6://{addr}"),
        ("udp" | "udp4", SocketAddr::V4(_)) => format!("udp4://{addr}"),
        ("udp" | "udp6", SocketAddr::V6(_)) => format!("udp6://{addr}"),
        _ => {
            return Some(ControlResponse::new(
                status::NOT_ACCEPTABLE,
                format!("unsupported FaceUri {uri}"),
            ))
        }
    };
    // NFD: Persistent by default; Permanent accepted (re-dialled when it
    // closes); OnDemand is for faces a channel accepts, not for create.
    let permanent = match p.face_persistency {
        None | Some(face_persistency::PERSISTENT) => false,
        Some(face_persistency::PERMANENT) => true,
        Some(other) => {
            return Some(ControlResponse::new(
                status::NOT_ACCEPTABLE,
                format!(
                "Persistency {other} is not supported by faces/create (persistent or permanent)"
            ),
            ))
        }
    };
    let persistency = if permanent {
        Persistency::Permanent
    } else {
        Persistency::Persistent
    };
    if let Some(existing) = fw
        .faces()
        .values()
        .find(|h| h.info.remote_uri == canonical)
        .map(|h| h.info.id)
    {
        return Some(ControlResponse::with_params(
            status::CONFLICT,
            "Face with remote URI already exists",
            &face_params(fw, existing),
        ));
    }
    if canonical.starts_with("udp") {
        let Some(ch) = fw.face_context().udp.clone() else {
            return Some(ControlResponse::new(
                status::NOT_ACCEPTABLE,
                "no UDP listener: start the daemon with --listen udp://…",
            ));
        };
        let bit = granary_mgmt::values::face_flags::LP_RELIABILITY_ENABLED;
        let reliable = (p.has_flag_bit(bit) || p.flag_bit(bit)).then(|| p.flag_bit(bit));
        let (h, new) = ch.connect_with(addr, persistency, reliable);
        let id = h.info.id;
        if new {
            if permanent {
                fw.make_permanent(id, crate::permanent::Target::Udp(addr), true);
            }
            fw.add_face(h);
        }
        if let Some(r) = apply_face_rate(fw, id, p) {
            return Some(r);
        }
        return Some(ControlResponse::with_params(
            status::OK,
            "OK",
            &face_params(fw, id),
        ));
    }
    // TCP: connect off the forwarder task; announce the face first, then
    // answer through the same event queue, so the forwarder knows the face
    // before the requester can name it in its next command.
    let ctx = fw.face_context().clone();
    let settings = p.clone();
    let requester = fw.faces().get(&face)?.info.id;
    let name = i.name.clone();
    let token = link.pit_token.clone();
    let id = ctx.ids.next();
    // The rate is VIP's, keyed by the face id: set before the face comes
    // up (VIP keeps it until then), refused at once when sharded.
    if let Some(r) = apply_face_rate(fw, id, p) {
        return Some(r);
    }
    if permanent {
        // Known before it connects: a failure below closes it (forgotten,
        // as it never came up), a later close re-dials it.
        fw.make_permanent(id, crate::permanent::Target::Tcp(addr), false);
    }
    tokio::spawn(async move {
        let r = match granary_face::stream::connect_tcp_as(
            addr,
            id,
            persistency,
            ctx.limits.clone(),
            ctx.events.clone(),
        )
        .await
        {
            Ok(h) => {
                apply_marking(&h.counters, &settings);
                let mut out = ControlParameters::new();
                out.face_id = Some(id);
                out.uri = Some(h.info.remote_uri.clone());
                out.local_uri = Some(h.info.local_uri.clone());
                out.face_persistency = Some(persistency_code(persistency));
                out.flags = Some(face_flag_bits(&h.counters));
                out.face_rate = settings.face_rate.filter(|r| *r > 0);
                let (iv, th) = marking_settings(&h.counters);
                out.base_congestion_marking_interval = Some(iv);
                out.default_congestion_threshold = Some(th);
                ControlResponse::with_params(status::OK, "OK", &out)
            }
            Err(e) => {
                if permanent {
                    let _ = ctx
                        .events
                        .send(granary_face::FaceEvent::Closed {
                            face: id,
                            reason: format!("cannot connect to {addr}: {e}"),
                        })
                        .await;
                }
                ControlResponse::new(
                    status::GATEWAY_TIMEOUT,
                    format!("cannot connect to {addr}: {e}"),
                )
            }
        };
        let d = response(&name, r);
        let packet = granary_face::OutPacket {
            wire: d.wire().clone(),
            kind: granary_face::OutKind::Data,
            pit_token: token,
            congestion_mark: None,
        };
        let _ = ctx
            .events
            .send(granary_face::FaceEvent::Send {
                face: requester,
                packet,
            })
            .await;
    });
    None
}

/// faces/list, or faces/query with a filter.
fn faces_payload<M: Managed>(fw: &M, filter: Option<&granary_mgmt::FaceQueryFilter>) -> Bytes {
    let mut v = face_statuses(fw);
    if let Some(f) = filter {
        v.retain(|s| f.matches(s));
    }
    encode_dataset(&v)
}

pub(crate) fn face_statuses<M: Managed>(fw: &M) -> Vec<FaceStatus> {
    let mut v: Vec<FaceStatus> = fw
        .faces()
        .values()
        .map(|h| {
            let c = &h.counters;
            FaceStatus {
                face_id: h.info.id,
                uri: h.info.remote_uri.clone(),
                local_uri: h.info.local_uri.clone(),
                expiration_period: None,
                face_scope: if h.info.scope == Scope::Local {
                    face_scope::LOCAL
                } else {
                    face_scope::NON_LOCAL
                },
                face_persistency: persistency_code(h.info.persistency),
                link_type: link_type::POINT_TO_POINT,
                base_congestion_marking_interval: Some(marking_settings(c).0),
                default_congestion_threshold: Some(marking_settings(c).1),
                mtu: h.info.mtu.map(|m| m as u64),
                n_in_interests: Counters::get(&c.in_interests),
                n_in_data: Counters::get(&c.in_data),
                n_in_nacks: Counters::get(&c.in_nacks),
                n_out_interests: Counters::get(&c.out_interests),
                n_out_data: Counters::get(&c.out_data),
                n_out_nacks: Counters::get(&c.out_nacks),
                n_in_bytes: Counters::get(&c.in_bytes),
                n_out_bytes: Counters::get(&c.out_bytes),
                flags: face_flag_bits(c),
                vip_capacity: fw.vip_face_capacity(h.info.id),
                // Absent while zero: the element stays NFD's, byte for byte.
                n_out_congestion_marks: Some(Counters::get(&c.out_marked)).filter(|&n| n > 0),
                n_out_queue_drops: Some(Counters::get(&c.out_dropped)).filter(|&n| n > 0),
            }
        })
        .collect();
    // A permanent face being re-dialled is still a face (NFD lists a down
    // permanent face too): no local URI, no counters, its routes kept.
    for p in fw.permanent_faces() {
        if !p.up && !fw.faces().contains_key(&p.id) {
            v.push(FaceStatus {
                face_id: p.id,
                uri: p.uri,
                local_uri: String::new(),
                expiration_period: None,
                face_scope: face_scope::NON_LOCAL,
                face_persistency: face_persistency::PERMANENT,
                link_type: link_type::POINT_TO_POINT,
                base_congestion_marking_interval: None,
                default_congestion_threshold: None,
                mtu: None,
                n_in_interests: 0,
                n_in_data: 0,
                n_in_nacks: 0,
                n_out_interests: 0,
                n_out_data: 0,
                n_out_nacks: 0,
                n_in_bytes: 0,
                n_out_bytes: 0,
                flags: 0,
                vip_capacity: None,
                n_out_congestion_marks: None,
                n_out_queue_drops: None,
            });
        }
    }
    v.sort_by_key(|f| f.face_id);
    v
}

fn dataset_payload<M: Managed>(fw: &M, module: &str, verb: &str) -> Bytes {
    match (module, verb) {
        ("faces", "list") => faces_payload(fw, None),
        ("faces", "channels") => {
            let v: Vec<granary_mgmt::ChannelStatus> = fw
                .state()
                .channels
                .iter()
                .map(|u| granary_mgmt::ChannelStatus {
                    local_uri: u.clone(),
                })
                .collect();
            encode_dataset(&v)
        }
        ("fib", "list") => {
            let mut v: Vec<FibEntry> = fw
                .tables()
                .fib()
                .map(|(n, hops)| FibEntry {
                    name: n.clone(),
                    next_hops: hops
                        .iter()
                        .map(|h| NextHopRecord {
                            face_id: h.face,
                            cost: h.cost,
                        })
                        .collect(),
                })
                .collect();
            v.sort_by(|a, b| a.name.cmp(&b.name));
            encode_dataset(&v)
        }
        ("rib", "list") => {
            let mut v: Vec<RibEntry> = fw
                .tables()
                .rib()
                .map(|(n, routes)| RibEntry {
                    name: n.clone(),
                    routes: routes
                        .iter()
                        .map(|r| granary_mgmt::Route {
                            face_id: r.face,
                            origin: r.origin,
                            cost: r.cost,
                            flags: r.flags,
                            expiration_period: r.expires.map(|e| {
                                e.saturating_duration_since(Instant::now()).as_millis() as u64
                            }),
                        })
                        .collect(),
                })
                .collect();
            v.sort_by(|a, b| a.name.cmp(&b.name));
            encode_dataset(&v)
        }
        ("strategy-choice", "list") => {
            let mut v: Vec<ScEntry> = fw
                .strategies()
                .iter()
                .map(|(n, s)| ScEntry {
                    name: n.clone(),
                    strategy: s.name(),
                })
                .collect();
            v.sort_by(|a, b| a.name.cmp(&b.name));
            encode_dataset(&v)
        }
        // Granary's own counters (not an NFD dataset): `name value` lines
        // of UTF-8 text, read by `granary status`.
        ("status", "forwarding") => {
            let t = fw.totals();
            let mut text = format!(
                "hinted_interests {}\nhint_stripped {}\nno_route_nacks {}\n",
                t.hinted, t.hint_stripped, t.no_route
            );
            // `permanent_face ID up|down FAILURES REDIALS URI [last error]`
            for p in fw.permanent_faces() {
                text.push_str(&format!(
                    "permanent_face {} {} {} {} {} {}\n",
                    p.id,
                    if p.up { "up" } else { "down" },
                    p.failures,
                    p.redials,
                    p.uri,
                    p.last_error.replace('\n', " ")
                ));
            }
            Bytes::from(text)
        }
        ("cs", "info") => {
            let t = fw.totals();
            CsInfo {
                capacity: fw.cs_config().max_packets as u64,
                flags: cs_flag_bits(fw.cs_config()),
                n_entries: t.cs_entries,
                n_hits: t.cs_hits,
                n_misses: t.cs_misses,
            }
            .encode()
        }
        _ => {
            let t = fw.totals();
            let faces = fw.faces();
            // Closed faces' packets still count (faces close on the control shard).
            let closed = fw.closed_faces();
            let start = fw
                .state()
                .started
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            GeneralStatus {
                nfd_version: format!("granary-{}", env!("CARGO_PKG_VERSION")),
                start_timestamp: start,
                current_timestamp: now_ms(),
                n_name_tree_entries: 0,
                n_fib_entries: fw.tables().fib().count() as u64,
                n_pit_entries: t.pit_entries,
                n_measurements_entries: 0,
                n_cs_entries: t.cs_entries,
                n_in_interests: face_total(faces, |c| &c.in_interests) + closed.in_interests,
                n_in_data: face_total(faces, |c| &c.in_data) + closed.in_data,
                n_in_nacks: face_total(faces, |c| &c.in_nacks) + closed.in_nacks,
                n_out_interests: face_total(faces, |c| &c.out_interests) + closed.out_interests,
                n_out_data: face_total(faces, |c| &c.out_data) + closed.out_data,
                n_out_nacks: face_total(faces, |c| &c.out_nacks) + closed.out_nacks,
                n_satisfied_interests: t.satisfied,
                n_unsatisfied_interests: t.unsatisfied,
            }
            .encode()
        }
    }
}
/// Sum of a counter over all faces.
fn face_total(faces: &FaceMap, f: impl Fn(&Counters) -> &std::sync::atomic::AtomicU64) -> u64 {
    faces.values().map(|h| Counters::get(f(&h.counters))).sum()
}

/// A face's Flags (faces/list, faces/create): LpReliabilityEnabled.
fn face_flag_bits(c: &Counters) -> u64 {
    use granary_mgmt::values::face_flags;
    use std::sync::atomic::Ordering::Relaxed;
    let mut f = 0;
    if c.lp_reliable.load(Relaxed) {
        f |= face_flags::LP_RELIABILITY_ENABLED;
    }
    if c.marking.load(Relaxed) {
        f |= face_flags::CONGESTION_MARKING_ENABLED;
    }
    f
}

/// A face's effective BaseCongestionMarkingInterval (ns) and
/// DefaultCongestionThreshold (bytes).
fn marking_settings(c: &Counters) -> (u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let iv = match c.marking_interval_ns.load(Relaxed) {
        0 => granary_face::DEFAULT_MARKING_INTERVAL_NS,
        v => v,
    };
    let th = match c.marking_threshold.load(Relaxed) {
        0 => granary_face::DEFAULT_MARKING_THRESHOLD,
        v => v,
    };
    (iv, th)
}

/// faces/create and faces/update: CongestionMarkingEnabled (Flags bit 2,
/// applied when Mask has it), BaseCongestionMarkingInterval,
/// DefaultCongestionThreshold.
fn apply_marking(c: &Counters, p: &ControlParameters) {
    use granary_mgmt::values::face_flags::CONGESTION_MARKING_ENABLED as BIT;
    use std::sync::atomic::Ordering::Relaxed;
    if p.has_flag_bit(BIT) {
        c.marking.store(p.flag_bit(BIT), Relaxed);
    }
    if let Some(v) = p.base_congestion_marking_interval.filter(|v| *v > 0) {
        c.marking_interval_ns.store(v, Relaxed);
    }
    if let Some(v) = p.default_congestion_threshold.filter(|v| *v > 0) {
        c.marking_threshold.store(v, Relaxed);
    }
}

/// True for a version or segment component (a dataset's own name parts).
fn is_version_or_segment(c: Option<granary_packet::ComponentRef<'_>>) -> bool {
    c.is_some_and(|c| {
        c.typ == granary_packet::types::COMP_VERSION || c.typ == granary_packet::types::COMP_SEGMENT
    })
}
