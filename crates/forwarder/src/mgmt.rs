//! NFD management on `/localhost/nfd` (and `/localhop/nfd`): commands and
//! status datasets, answered on the forwarder task with direct table access.
//!
//! Commands from local faces are accepted whether signed (either form) or
//! not, as NFD's default `localhost` policy does. Commands arriving on
//! non-local faces (`/localhop/nfd`) must be signed Interests v0.3 whose
//! KeyLocator names a key of a configured trust anchor, must verify, and
//! must pass the replay checker (SignatureTime window, nonce memory).

use std::net::SocketAddr;

use bytes::Bytes;
use granary_face::{Counters, FaceId, LinkFields, Persistency, Scope};
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

use crate::fib::Route;
use crate::forwarder::Forwarder;
use crate::strategy::Strategy;

/// Recently generated datasets, so later segments can be fetched.
#[derive(Default)]
pub struct MgmtState {
    datasets: Vec<(Instant, Vec<Data>)>,
}

impl MgmtState {
    pub(crate) fn expire(&mut self, now: Instant) {
        self.datasets
            .retain(|(t, _)| now.duration_since(*t) < std::time::Duration::from_secs(5));
    }
}

fn sign(b: DataBuilder) -> Data {
    b.sign_with(32, |m| {
        Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(&granary_packet::sha256(m)))
    })
    .unwrap_or_else(|never| match never {})
}

fn response(name: &Name, r: ControlResponse) -> Data {
    sign(DataBuilder::new(name.clone()).content(r.encode()))
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

impl Forwarder {
    /// Handles management Interests. `Some(true)`: answered here.
    pub(crate) fn handle_mgmt(
        &mut self,
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
        let reply = |fw: &Forwarder, d: Data| fw.send_data(face, &d, link.pit_token.clone(), None);

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
                let hit = self
                    .mgmt
                    .datasets
                    .iter()
                    .flat_map(|(_, segs)| segs.iter())
                    .find(|d| d.matches_name(&i.name, i.can_be_prefix))
                    .cloned();
                if let Some(d) = hit {
                    reply(self, d);
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
                                self,
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
                ("faces", "query") => self.faces_payload(filter.as_ref()),
                _ => self.dataset_payload(&module, &verb, now),
            };
            let segs: Vec<Data> = segment_dataset(&base, now_ms(), &payload, MAX_DATASET_SEGMENT)
                .into_iter()
                .map(sign)
                .collect();
            if let Some(first) = segs.first().cloned() {
                self.mgmt.datasets.push((now, segs));
                reply(self, first);
            }
            return Some(true);
        }

        let cmd = match parse_command(i, &prefix) {
            Ok(c) => c,
            Err(e) => {
                reply(
                    self,
                    response(
                        &i.name,
                        ControlResponse::new(
                            status::BAD_REQUEST,
                            format!("malformed command: {e}"),
                        ),
                    ),
                );
                return Some(true);
            }
        };
        if self.faces.get(&face).map(|f| f.info.scope) != Some(Scope::Local) {
            if let Err(why) = self.authorize(&cmd, i) {
                tracing::warn!(
                    face,
                    "refused management command {}/{}: {why}",
                    cmd.module,
                    cmd.verb
                );
                reply(
                    self,
                    response(&i.name, ControlResponse::new(status::FORBIDDEN, why)),
                );
                return Some(true);
            }
        }
        let r = self.command(face, &cmd, i, link, now);
        // Sharded: the data shards take the new face table, FIB, strategy
        // choice and CS settings before anything else is forwarded.
        self.sync_shards();
        tracing::debug!(face, module = %cmd.module, verb = %cmd.verb, status = ?r.as_ref().map(|r| r.status_code), "management command");
        if let Some(r) = r {
            reply(self, response(&i.name, r));
        }
        Some(true)
    }

    /// Checks a command from a non-local face against the trust anchors.
    fn authorize(&mut self, cmd: &Command, i: &Interest) -> Result<(), String> {
        let granary_mgmt::SignedForm::V03(signed) = &cmd.signed else {
            return Err("commands from non-local faces must be signed Interests v0.3".into());
        };
        let locator = match &signed.sig_info.key_locator {
            Some(granary_packet::KeyLocator::Name(n)) => n.clone(),
            _ => return Err("the signature has no KeyLocator name".into()),
        };
        let anchor = self
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
        self.replay
            .check(i, granary_security::now_ms())
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    fn command(
        &mut self,
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
                if !self.faces.contains_key(&face_id) {
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
                self.tables.register(
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
                self.tables.unregister(&name, face_id, origin);
                let mut out = ControlParameters::new();
                out.name = Some(name);
                out.face_id = Some(face_id);
                out.origin = Some(origin);
                Some(ControlResponse::with_params(status::OK, "OK", &out))
            }
            ("faces", "create") => self.faces_create(face, p, i, link),
            ("faces", "update") => {
                // FaceId 0 or absent: the requesting face (as NFD).
                let id = p.face_id.filter(|f| *f != 0).unwrap_or(face);
                let Some(h) = self.faces.get(&id) else {
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
                Some(ControlResponse::with_params(
                    status::OK,
                    "OK",
                    &self.face_params(id),
                ))
            }
            ("faces", "destroy") => {
                let Some(id) = p.face_id else {
                    return bad("FaceId is required");
                };
                if let Some(h) = self.faces.remove(&id) {
                    h.close();
                    self.tables.remove_face(id);
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
                if s == Strategy::Vip && self.sharded() {
                    return Some(ControlResponse::new(
                        status::NOT_ACCEPTABLE,
                        VIP_NEEDS_ONE_SHARD,
                    ));
                }
                self.strategies.set(name.clone(), s);
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
                self.strategies.unset(&name);
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
                let mut n = self.cs.erase_prefix(&name, limit);
                for s in &self.siblings {
                    n += s.lock().cs.erase_prefix(&name, limit - n);
                }
                let mut out = ControlParameters::new();
                out.name = Some(name);
                out.count = Some(n as u64);
                Some(ControlResponse::with_params(status::OK, "OK", &out))
            }
            ("cs", "config") => {
                let mut cfg = self.cs_config_whole().clone();
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
                let policy_prefix =
                    Name::from_uri(crate::vip::CS_POLICY_PREFIX).unwrap_or_default();
                if let Some(s) = &p.strategy {
                    let policy = (s.len() == policy_prefix.len() + 1
                        && s.prefix(policy_prefix.len() as isize) == policy_prefix)
                        .then(|| s.get(-1))
                        .flatten()
                        .map(|c| String::from_utf8_lossy(c.value).parse::<crate::cs::Policy>());
                    match policy {
                        Some(Ok(crate::cs::Policy::Vip)) if self.sharded() => {
                            return Some(ControlResponse::new(
                                status::NOT_ACCEPTABLE,
                                VIP_NEEDS_ONE_SHARD,
                            ))
                        }
                        Some(Ok(pol)) => cfg.policy = pol,
                        _ => return bad("the CS policy goes in /localhost/granary/cs-policy/<lru|lfu|fifo|random|vip>"),
                    }
                }
                self.set_cs_config_whole(cfg.clone());
                let mut out = ControlParameters::new();
                out.strategy = p.strategy.is_some().then(|| {
                    policy_prefix.append(&granary_packet::Component::generic(
                        cfg.policy.as_str().as_bytes(),
                    ))
                });
                out.capacity = Some(cfg.max_packets as u64);
                out.flags = Some(self.cs_flag_bits());
                Some(ControlResponse::with_params(status::OK, "OK", &out))
            }
            (m, v) => Some(ControlResponse::new(
                status::NOT_IMPLEMENTED,
                format!("unsupported command {m}/{v}"),
            )),
        }
    }

    fn cs_flag_bits(&self) -> u64 {
        let c = self.cs_config_whole();
        (if c.admit { cs_flags::ENABLE_ADMIT } else { 0 })
            | (if c.serve { cs_flags::ENABLE_SERVE } else { 0 })
    }

    fn face_params(&self, id: FaceId) -> ControlParameters {
        let mut out = ControlParameters::new();
        if let Some(h) = self.faces.get(&id) {
            out.face_id = Some(id);
            out.uri = Some(h.info.remote_uri.clone());
            out.local_uri = Some(h.info.local_uri.clone());
            out.face_persistency = Some(persistency_code(h.info.persistency));
            out.flags = Some(face_flag_bits(&h.counters));
            out.mtu = h.info.mtu.map(|m| m as u64);
            let (iv, th) = marking_settings(&h.counters);
            out.base_congestion_marking_interval = Some(iv);
            out.default_congestion_threshold = Some(th);
        }
        out
    }

    fn faces_create(
        &mut self,
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
        if let Some(existing) = self
            .faces
            .values()
            .find(|h| h.info.remote_uri == canonical)
            .map(|h| h.info.id)
        {
            return Some(ControlResponse::with_params(
                status::CONFLICT,
                "Face with remote URI already exists",
                &self.face_params(existing),
            ));
        }
        if canonical.starts_with("udp") {
            let Some(ch) = self.ctx.udp.clone() else {
                return Some(ControlResponse::new(
                    status::NOT_ACCEPTABLE,
                    "no UDP listener: start the daemon with --listen udp://…",
                ));
            };
            let bit = granary_mgmt::values::face_flags::LP_RELIABILITY_ENABLED;
            let reliable = (p.has_flag_bit(bit) || p.flag_bit(bit)).then(|| p.flag_bit(bit));
            let (h, new) = ch.connect_with(addr, Persistency::Persistent, reliable);
            let id = h.info.id;
            if new {
                self.add_face(h);
            }
            return Some(ControlResponse::with_params(
                status::OK,
                "OK",
                &self.face_params(id),
            ));
        }
        // TCP: connect off the forwarder task; announce the face first, then
        // answer through the same event queue, so the forwarder knows the face
        // before the requester can name it in its next command.
        let ctx = self.ctx.clone();
        let settings = p.clone();
        let requester = self.faces.get(&face)?.info.id;
        let name = i.name.clone();
        let token = link.pit_token.clone();
        tokio::spawn(async move {
            let id = ctx.ids.next();
            let r = match granary_face::stream::connect_tcp(
                addr,
                id,
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
                    out.face_persistency = Some(face_persistency::PERSISTENT);
                    out.flags = Some(face_flag_bits(&h.counters));
                    let (iv, th) = marking_settings(&h.counters);
                    out.base_congestion_marking_interval = Some(iv);
                    out.default_congestion_threshold = Some(th);
                    ControlResponse::with_params(status::OK, "OK", &out)
                }
                Err(e) => ControlResponse::new(
                    status::GATEWAY_TIMEOUT,
                    format!("cannot connect to {addr}: {e}"),
                ),
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
    fn faces_payload(&self, filter: Option<&granary_mgmt::FaceQueryFilter>) -> Bytes {
        let mut v = self.face_statuses();
        if let Some(f) = filter {
            v.retain(|s| f.matches(s));
        }
        encode_dataset(&v)
    }

    fn face_statuses(&self) -> Vec<FaceStatus> {
        let mut v: Vec<FaceStatus> = self
            .faces
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
                }
            })
            .collect();
        v.sort_by_key(|f| f.face_id);
        v
    }

    fn dataset_payload(&self, module: &str, verb: &str, _now: Instant) -> Bytes {
        match (module, verb) {
            ("faces", "list") => self.faces_payload(None),
            ("faces", "channels") => {
                let v: Vec<granary_mgmt::ChannelStatus> = self
                    .channels
                    .iter()
                    .map(|u| granary_mgmt::ChannelStatus {
                        local_uri: u.clone(),
                    })
                    .collect();
                encode_dataset(&v)
            }
            ("fib", "list") => {
                let mut v: Vec<FibEntry> = self
                    .tables
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
                let mut v: Vec<RibEntry> = self
                    .tables
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
                let mut v: Vec<ScEntry> = self
                    .strategies
                    .iter()
                    .map(|(n, s)| ScEntry {
                        name: n.clone(),
                        strategy: s.name(),
                    })
                    .collect();
                v.sort_by(|a, b| a.name.cmp(&b.name));
                encode_dataset(&v)
            }
            ("cs", "info") => CsInfo {
                capacity: self.cs_config_whole().max_packets as u64,
                flags: self.cs_flag_bits(),
                n_entries: self.shards_sum(|f| f.cs.len() as u64),
                n_hits: self.shards_sum(|f| f.cs.hits()),
                n_misses: self.shards_sum(|f| f.cs.misses()),
            }
            .encode(),
            _ => {
                let start = self
                    .started
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0);
                GeneralStatus {
                    nfd_version: format!("granary-{}", env!("CARGO_PKG_VERSION")),
                    start_timestamp: start,
                    current_timestamp: now_ms(),
                    n_name_tree_entries: 0,
                    n_fib_entries: self.tables.fib().count() as u64,
                    n_pit_entries: self.shards_sum(|f| f.pit.len() as u64),
                    n_measurements_entries: 0,
                    n_cs_entries: self.shards_sum(|f| f.cs.len() as u64),
                    n_in_interests: self.face_total(|c| &c.in_interests),
                    n_in_data: self.face_total(|c| &c.in_data),
                    n_in_nacks: self.face_total(|c| &c.in_nacks),
                    n_out_interests: self.face_total(|c| &c.out_interests),
                    n_out_data: self.face_total(|c| &c.out_data),
                    n_out_nacks: self.face_total(|c| &c.out_nacks),
                    n_satisfied_interests: self.shards_sum(|f| f.stats.satisfied),
                    n_unsatisfied_interests: self.shards_sum(|f| f.stats.unsatisfied),
                }
                .encode()
            }
        }
    }
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
