//! Network insert, delete and check: the command protocol of
//! ndn-python-repo 0.3 (`docs/repo-protocol.md`), so that its stock
//! `PutfileClient`, `DeleteClient` and `CommandChecker` work with Granary.
//!
//! The repository is a consumer here as well as a producer: it fetches the
//! client's command message and the object's segments through the same
//! in-process face it serves on (`consumer.rs`; the segments are fetched by
//! the granary-transfer engine, whose link receives what comes back under
//! the object's name through a `Consumer::subscribe` subscription).
//!
//! Everything is bounded: notify handlers ([`ServeConfig::max_notifies`]),
//! running and queued inserts, Interests in flight per insert
//! ([`ServeConfig::window`], like the reference server's 10), process
//! records ([`ServeConfig::max_records`]). An insert streams its segments,
//! in order, through a small channel into [`granary_store::Store::put`]
//! (running on a blocking thread), so its memory is constant whatever the
//! object's size; the version appears only when complete and durable.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use granary_face::{LinkFields, NetPacket};
use granary_packet::types::{
    nack_reason, sig_type, COMP_GENERIC, COMP_PARAMS_DIGEST, COMP_SEGMENT,
};
use granary_packet::{Component, Data, DataBuilder, Interest, InterestFields, Name};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

use crate::command::{status, CommandParameter, CommandResponse, NotifyParam, Verb};
use crate::consumer::{Consumer, Fetched, Outbox};
use crate::Repo;

/// Settings of the network service.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Repo names registered (origin app, child-inherit) for the commands.
    pub repo_names: Vec<Name>,
    /// Also answer commands sent to any other repo name that reaches the
    /// repository (through its `/` route): `<any>/insert/notify/<digest>`,
    /// `<any>/insert check/<param>` and the delete forms.
    pub any_prefix: bool,
    /// Notify Interests handled at once (more get Nack Congestion).
    pub max_notifies: usize,
    /// Inserts fetching at once.
    pub max_inserts: usize,
    /// Inserts waiting for a slot (more are answered 400).
    pub max_queued_inserts: usize,
    /// Segment Interests in flight per insert.
    pub window: usize,
    /// Lifetime of a segment Interest.
    pub segment_lifetime_ms: u64,
    /// Tries per segment (timeouts or Nacks).
    pub segment_tries: u32,
    /// Lifetime of the command-message Interest (capped by what is left of
    /// the notify Interest's lifetime).
    pub msg_lifetime_ms: u64,
    /// Tries for the command message.
    pub msg_tries: u32,
    /// How long a finished process is remembered for checks.
    pub record_ttl: Duration,
    /// Process records kept (insert and delete tables each).
    pub max_records: usize,
    /// Most segments one insert may ask for.
    pub max_segments: u64,
    /// FreshnessPeriod of check answers (≤ the clients' 1 s poll interval).
    pub check_freshness_ms: u64,
}

/// The default repo name.
pub const DEFAULT_REPO_NAME: &str = "/granary/repo";

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            repo_names: Name::from_uri(DEFAULT_REPO_NAME).into_iter().collect(),
            any_prefix: true,
            max_notifies: 32,
            max_inserts: 4,
            max_queued_inserts: 64,
            window: 10,
            segment_lifetime_ms: 1000,
            segment_tries: 3,
            msg_lifetime_ms: 4000,
            msg_tries: 3,
            record_ttl: Duration::from_secs(60),
            max_records: 4096,
            max_segments: 1 << 26,
            check_freshness_ms: 500,
        }
    }
}

/// One insert or delete, as checks report it.
#[derive(Debug, Clone)]
struct Record {
    status: u64,
    num: u64,
    done: Option<Instant>,
}

#[derive(Default)]
struct Table {
    map: HashMap<Bytes, Record>,
}

impl Table {
    fn purge(&mut self, now: Instant, ttl: Duration) {
        self.map
            .retain(|_, r| r.done.is_none_or(|d| now.duration_since(d) < ttl));
    }
}

/// What the serve loop does with an Interest.
#[allow(clippy::large_enum_variant)] // one per Interest, moved straight to the face
pub(crate) enum Handled {
    /// Send this at once.
    Reply(NetPacket),
    /// A task took it over (it answers later).
    Taken,
    /// Not a command: answer from the store.
    NotMine,
}

/// The command service.
pub(crate) struct CommandService {
    repo: Arc<Repo>,
    cfg: ServeConfig,
    pub(crate) consumer: Consumer,
    out: Outbox,
    inserts: Mutex<Table>,
    deletes: Mutex<Table>,
    notify_slots: Arc<Semaphore>,
    insert_slots: Arc<Semaphore>,
    queued: AtomicUsize,
}

/// A validated insert.
#[derive(Debug)]
struct Plan {
    name: Name,
    end: Option<u64>,
    hint: Option<Name>,
}

fn generic(c: Option<granary_packet::ComponentRef<'_>>, word: &[u8]) -> bool {
    c.is_some_and(|c| c.typ == COMP_GENERIC && c.value == word)
}

fn digest_ok(signed: &[u8], value: &[u8]) -> bool {
    granary_packet::sha256(signed).as_slice() == value
}

/// DigestSha256 signatures are checked (python-ndn's clients check them
/// too); other types are accepted unverified, as by the reference server.
fn data_digest_ok(d: &Data) -> bool {
    d.sig_info().sig_type != sig_type::DIGEST_SHA256 || digest_ok(d.signed_portion(), d.sig_value())
}

fn overlaps(a: &Name, b: &Name) -> bool {
    a.is_prefix_of(b) || b.is_prefix_of(a)
}

/// Chunks waiting for the store beyond the writer channel's own capacity.
const READY_MAX: usize = 64;

/// One insert's segments as a fetch-engine job: in-order hand-off to the
/// store through a bounded queue, the object's end from the command's
/// EndBlockId, a FinalBlockId, or (with neither) the first segment that
/// cannot be fetched.
struct InsertJob {
    service: Arc<CommandService>,
    pid: Bytes,
    plan_name: Name,
    hint: Option<Name>,
    window: u64,
    end: Option<u64>,
    next_send: u64,
    next_write: u64,
    reorder: BTreeMap<u64, Bytes>,
    ready: std::collections::VecDeque<Bytes>,
    writer: Option<Writer>,
    failure: Option<String>,
    /// Nacks per segment: like a timeout, a Nack uses one of the tries.
    nacks: HashMap<u64, u32>,
}

impl InsertJob {
    fn request(&self, seg: u64) -> granary_transfer::Request {
        let mut r = granary_transfer::Request::new(self.plan_name.append(&Component::segment(seg)));
        r.must_be_fresh = true;
        r.forwarding_hint = self.hint.clone().into_iter().collect();
        r
    }

    /// Moves queued chunks into the store's channel while it has room.
    fn pump(&mut self) {
        let Some(w) = &self.writer else { return };
        while let Some(c) = self.ready.pop_front() {
            match w.tx.try_send(Chunk::Data(c)) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(Chunk::Data(c))) => {
                    self.ready.push_front(c);
                    return;
                }
                Err(_) => {
                    self.failure = Some("the store stopped reading".into());
                    return;
                }
            }
        }
    }
}

impl granary_transfer::Job for InsertJob {
    fn next_request(&mut self) -> Option<(u64, granary_transfer::Request)> {
        self.pump();
        let seg = self.next_send;
        if self.failure.is_some()
            || self.end.is_some_and(|e| seg > e)
            || seg >= self.service.cfg.max_segments
            || seg >= self.next_write + self.window
            || self.ready.len() >= READY_MAX
        {
            return None;
        }
        self.next_send += 1;
        Some((seg, self.request(seg)))
    }

    fn on_data(&mut self, seg: u64, d: Data) -> granary_transfer::Verdict {
        use granary_transfer::Verdict;
        if !data_digest_ok(&d) {
            return Verdict::Again(format!("{}: bad DigestSha256 signature", d.name()));
        }
        let fb = d
            .final_block_id()
            .filter(|c| c.as_ref().typ == COMP_SEGMENT)
            .and_then(|c| c.as_ref().as_number());
        if let Some(fb) = fb {
            // As the reference server: the FinalBlockId is the end.
            if fb >= self.service.cfg.max_segments {
                return Verdict::Fatal(format!("FinalBlockId {fb} is above the limit"));
            }
            self.end = Some(fb);
        }
        if self.end.is_some_and(|e| seg > e) {
            return Verdict::Done(0);
        }
        let content = d
            .content_bytes()
            .cloned()
            .unwrap_or_else(|| Bytes::copy_from_slice(d.content()));
        let n = content.len() as u64;
        self.reorder.insert(seg, content);
        while let Some(c) = self.reorder.remove(&self.next_write) {
            if self.writer.is_none() {
                self.writer = Some(self.service.writer(
                    &self.plan_name,
                    c.len(),
                    self.end == Some(0),
                ));
            }
            self.ready.push_back(c);
            self.next_write += 1;
            self.service.set_record(
                Verb::Insert,
                &self.pid,
                status::IN_PROGRESS,
                self.next_write,
                false,
            );
        }
        self.pump();
        Verdict::Done(n)
    }

    fn on_failure(
        &mut self,
        seg: u64,
        why: &granary_transfer::Failure,
    ) -> granary_transfer::Recovery {
        if self.end.is_some_and(|e| seg > e) {
            return granary_transfer::Recovery::GiveUp;
        }
        if let granary_transfer::Failure::Nack(r) = why {
            tracing::debug!("{}: Nack {}", self.plan_name, nack_reason::name(*r));
            let n = self.nacks.entry(seg).or_default();
            *n += 1;
            if *n < self.service.cfg.segment_tries {
                return granary_transfer::Recovery::Instead(self.request(seg));
            }
        }
        if self.end.is_none() && seg > 0 {
            // No EndBlockId: the object ends before the first segment that
            // cannot be fetched.
            self.end = Some(seg - 1);
            return granary_transfer::Recovery::GiveUp;
        }
        granary_transfer::Recovery::Fail
    }

    fn state(&self) -> granary_transfer::JobState {
        match &self.failure {
            Some(e) => granary_transfer::JobState::Failed(e.clone()),
            None if self.end.is_some_and(|e| self.next_write > e) => {
                granary_transfer::JobState::Done
            }
            None => granary_transfer::JobState::Running,
        }
    }

    fn fail(&mut self, error: String) {
        self.failure = Some(error);
    }

    fn blocked(&self) -> bool {
        !self.ready.is_empty()
    }
}

impl CommandService {
    pub(crate) fn new(repo: Arc<Repo>, cfg: ServeConfig, out: Outbox) -> Self {
        CommandService {
            repo,
            consumer: Consumer::new(out.clone()),
            out,
            inserts: Mutex::new(Table::default()),
            deletes: Mutex::new(Table::default()),
            notify_slots: Arc::new(Semaphore::new(cfg.max_notifies.max(1))),
            insert_slots: Arc::new(Semaphore::new(cfg.max_inserts.max(1))),
            queued: AtomicUsize::new(0),
            cfg,
        }
    }

    fn table(&self, v: Verb) -> &Mutex<Table> {
        match v {
            Verb::Insert => &self.inserts,
            Verb::Delete => &self.deletes,
        }
    }

    fn is_repo(&self, repo: &Name) -> bool {
        self.cfg.any_prefix || self.cfg.repo_names.contains(repo)
    }

    /// Registers the repo names (rib/register on the in-process face).
    pub(crate) async fn register(&self) {
        for n in self.cfg.repo_names.clone() {
            let mut p = granary_mgmt::ControlParameters::new();
            p.name = Some(n.clone());
            p.flags = Some(granary_mgmt::values::route_flags::CHILD_INHERIT);
            p.cost = Some(0);
            p.origin = Some(granary_mgmt::values::route_origin::APP);
            let ok = self.mgmt("rib", "register", &p).await;
            if ok {
                tracing::info!("repository commands under {n}");
            } else {
                tracing::warn!("could not register the repo name {n}");
            }
        }
    }

    /// Sends a management command to the local forwarder; true on success.
    async fn mgmt(&self, module: &str, verb: &str, p: &granary_mgmt::ControlParameters) -> bool {
        let Ok(nfd) = Name::from_uri(granary_mgmt::LOCALHOST_NFD) else {
            return false;
        };
        let mut f = granary_mgmt::make_command(&nfd, module, verb, p);
        f.lifetime = Some(4000);
        match self.consumer.express(f).await {
            Fetched::Data(d) => {
                use granary_mgmt::TlvElement;
                match granary_mgmt::ControlResponse::decode(&Bytes::copy_from_slice(d.content())) {
                    Ok(r) if r.is_success() => true,
                    Ok(r) => {
                        tracing::debug!("{module}/{verb}: {} {}", r.status_code, r.status_text);
                        false
                    }
                    Err(_) => false,
                }
            }
            _ => false,
        }
    }

    /// Asks the forwarder to drop cached Data under `name` (NFD's
    /// `cs/erase`), so that a deleted or replaced object is not served from
    /// its Content Store. Best effort (logged when refused).
    async fn cs_erase(&self, name: &Name) {
        let mut p = granary_mgmt::ControlParameters::new();
        p.name = Some(name.clone());
        if !self.mgmt("cs", "erase", &p).await {
            tracing::debug!("cs/erase {name} not done by the forwarder");
        }
    }

    /// Dispatches an Interest: a notify or check under a repo name, or not ours.
    pub(crate) fn on_interest(self: &Arc<Self>, i: &Interest, link: &LinkFields) -> Handled {
        let n = &i.name;
        // <repo>/insert check/<param> | <repo>/delete check/<param>
        for v in [Verb::Insert, Verb::Delete] {
            if n.len() >= 2 && generic(n.get(-2), v.check_word()) && self.is_repo(&n.prefix(-2)) {
                return Handled::Reply(NetPacket::Data(self.check(i, v)));
            }
        }
        // <repo>/insert/notify/<params-sha256> | <repo>/delete/notify/<…>
        if n.len() >= 3
            && n.last().is_some_and(|c| c.typ == COMP_PARAMS_DIGEST)
            && generic(n.get(-2), b"notify")
        {
            let verb = if generic(n.get(-3), b"insert") {
                Verb::Insert
            } else if generic(n.get(-3), b"delete") {
                Verb::Delete
            } else {
                return Handled::NotMine;
            };
            let repo = n.prefix(-3);
            if !self.is_repo(&repo) {
                return Handled::NotMine;
            }
            let Ok(permit) = self.notify_slots.clone().try_acquire_owned() else {
                tracing::warn!("too many repo commands at once; Nack Congestion to {n}");
                return Handled::Reply(NetPacket::Nack(i.clone(), nack_reason::CONGESTION));
            };
            let me = self.clone();
            let i = i.clone();
            let token = link.pit_token.clone();
            tokio::spawn(async move {
                if me.notify(&i, verb, repo).await {
                    let ack = granary_packet::digest::sign_data(
                        DataBuilder::new(i.name.clone()).content_type(0),
                    );
                    let back = LinkFields {
                        pit_token: token,
                        ..Default::default()
                    };
                    let _ = me.out.send((NetPacket::Data(ack), back)).await;
                }
                drop(permit);
            });
            return Handled::Taken;
        }
        Handled::NotMine
    }

    /// Answers a check from the process table.
    fn check(&self, i: &Interest, v: Verb) -> Data {
        let param = i
            .name
            .last()
            .and_then(|c| CommandParameter::decode(&Bytes::copy_from_slice(c.value)).ok())
            .and_then(|p| p.process_id);
        let resp = match param {
            None => CommandResponse::status(status::MALFORMED),
            Some(pid) => {
                let now = Instant::now();
                let rec = self.table(v).lock().ok().and_then(|t| {
                    t.map
                        .get(&pid)
                        .filter(|r| {
                            r.done
                                .is_none_or(|d| now.duration_since(d) < self.cfg.record_ttl)
                        })
                        .cloned()
                });
                match rec {
                    None => CommandResponse::status(status::NOT_FOUND),
                    Some(r) => CommandResponse {
                        process_id: Some(pid),
                        status_code: r.status,
                        num: Some((v, r.num)),
                    },
                }
            }
        };
        granary_packet::digest::sign_data(
            DataBuilder::new(i.name.clone())
                .content_type(0)
                .freshness_period(self.cfg.check_freshness_ms)
                .content(resp.encode()),
        )
    }

    /// Handles a notify: fetches the command message, records the process,
    /// starts the work. True when the notify is to be acknowledged.
    async fn notify(self: &Arc<Self>, i: &Interest, verb: Verb, repo: Name) -> bool {
        if !i.params_digest_ok() {
            tracing::debug!("notify {}: bad parameters digest", i.name);
            return false;
        }
        if i.sig_info.as_ref().map(|s| s.sig_type) == Some(sig_type::DIGEST_SHA256) {
            let ok = match (i.signed_portion(), i.sig_value.as_ref()) {
                (Some(s), Some(v)) => digest_ok(&s, v),
                _ => false,
            };
            if !ok {
                tracing::debug!("notify {}: bad DigestSha256 signature", i.name);
                return false;
            }
        }
        let Some(params) = i.app_params.clone() else {
            return false;
        };
        let np = match NotifyParam::decode(&params) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!("notify {}: {e}", i.name);
                return false;
            }
        };
        // The message: <publisher>/msg/<repo…>/<verb>/<N>.
        let mut msg = np.publisher.append(&Component::generic(b"msg")).join(&repo);
        msg = msg
            .append(&Component::generic(verb.word()))
            .append(&Component::generic(&np.nonce));
        let deadline = Instant::now() + Duration::from_millis(i.lifetime_ms().clamp(1000, 10_000));
        let Some(d) = self
            .fetch(
                &msg,
                np.forwarding_hint.as_ref(),
                false,
                self.cfg.msg_lifetime_ms,
                self.cfg.msg_tries,
                Some(deadline),
            )
            .await
        else {
            tracing::info!("repo command message {msg} not fetched");
            return false;
        };
        let cmd = match CommandParameter::decode(&Bytes::copy_from_slice(d.content())) {
            Ok(c) => c,
            Err(e) => {
                tracing::info!("repo command {msg} undecodable: {e}");
                return false;
            }
        };
        match verb {
            Verb::Insert => self.start_insert(cmd, &repo),
            Verb::Delete => self.delete(cmd).await,
        }
    }

    /// Fetches one Data: `tries` Interests (a short pause after a Nack),
    /// none after `deadline`.
    async fn fetch(
        &self,
        name: &Name,
        hint: Option<&Name>,
        must_be_fresh: bool,
        lifetime_ms: u64,
        tries: u32,
        deadline: Option<Instant>,
    ) -> Option<Data> {
        for _ in 0..tries.max(1) {
            let mut lifetime = lifetime_ms;
            if let Some(dl) = deadline {
                let left = dl.saturating_duration_since(Instant::now()).as_millis() as u64;
                if left < 50 {
                    return None;
                }
                lifetime = lifetime.min(left);
            }
            let mut f = InterestFields::new(name.clone());
            f.must_be_fresh = must_be_fresh;
            f.lifetime = Some(lifetime);
            f.forwarding_hint = hint.cloned().into_iter().collect();
            match self.consumer.express(f).await {
                Fetched::Data(d) if data_digest_ok(&d) => return Some(d),
                Fetched::Data(d) => {
                    tracing::debug!("{}: bad DigestSha256 signature, retrying", d.name())
                }
                Fetched::Nack(r) => {
                    tracing::debug!("{name}: Nack {}", nack_reason::name(r));
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Fetched::Timeout => {}
            }
        }
        None
    }

    fn new_record(&self, v: Verb, pid: &Bytes, rec: Record) -> Result<(), bool> {
        let mut t = self.table(v).lock().map_err(|_| false)?;
        t.purge(Instant::now(), self.cfg.record_ttl);
        if t.map.contains_key(pid) {
            // The same command again (a retried notify): acknowledge again.
            return Err(true);
        }
        if t.map.len() >= self.cfg.max_records {
            tracing::warn!("too many repo processes remembered; command dropped");
            return Err(false);
        }
        t.map.insert(pid.clone(), rec);
        Ok(())
    }

    fn set_record(&self, v: Verb, pid: &Bytes, status: u64, num: u64, done: bool) {
        if let Ok(mut t) = self.table(v).lock() {
            t.map.insert(
                pid.clone(),
                Record {
                    status,
                    num,
                    done: done.then(Instant::now),
                },
            );
        }
    }

    fn plan(&self, cmd: &CommandParameter, repo: &Name) -> Result<Plan, String> {
        let name = cmd.name.clone().ok_or("no Name in the command")?;
        granary_store::path::check(&name).map_err(|e| e.to_string())?;
        if overlaps(&name, repo) || self.cfg.repo_names.iter().any(|r| overlaps(&name, r)) {
            return Err(format!("{name} overlaps the repo name"));
        }
        let first = name.get(0).map(|c| c.value);
        if first == Some(b"localhost") || first == Some(b"localhop") {
            return Err(format!("{name} is a local-scope name"));
        }
        if cmd.start_block_id.unwrap_or(0) != 0 {
            return Err("StartBlockId other than 0: Granary stores whole objects".into());
        }
        if let Some(e) = cmd.end_block_id {
            if e >= self.cfg.max_segments {
                return Err(format!("{} segments is above the limit", e as u128 + 1));
            }
        }
        Ok(Plan {
            name,
            end: cmd.end_block_id,
            hint: cmd.forwarding_hint.clone(),
        })
    }

    /// Records an insert (status 300, or 400 when refused) and starts it.
    fn start_insert(self: &Arc<Self>, cmd: CommandParameter, repo: &Name) -> bool {
        let Some(pid) = cmd.process_id.clone() else {
            tracing::info!("insert command without ProcessId ignored");
            return false;
        };
        let plan = self.plan(&cmd, repo);
        let busy = self.queued.load(Ordering::Relaxed) >= self.cfg.max_queued_inserts;
        let rec = |status| Record {
            status,
            num: 0,
            done: (status != status::IN_PROGRESS).then(Instant::now),
        };
        let first = match (&plan, busy) {
            (Ok(_), false) => rec(status::IN_PROGRESS),
            _ => rec(status::FAILED),
        };
        if let Err(ack) = self.new_record(Verb::Insert, &pid, first) {
            return ack;
        }
        let plan = match (plan, busy) {
            (Err(why), _) => {
                tracing::info!("insert refused: {why}");
                return true;
            }
            (Ok(_), true) => {
                tracing::warn!("insert refused: too many inserts waiting");
                return true;
            }
            (Ok(p), false) => p,
        };
        self.queued.fetch_add(1, Ordering::Relaxed);
        let me = self.clone();
        tokio::spawn(async move {
            let slot = me.insert_slots.clone().acquire_owned().await;
            me.queued.fetch_sub(1, Ordering::Relaxed);
            let Ok(_slot) = slot else { return };
            let name = plan.name.clone();
            let t = std::time::Instant::now();
            match me.ingest(&plan, &pid).await {
                Ok((n, e)) => {
                    tracing::info!(
                        "inserted {name}/v={} from the network: {} bytes, {n} segments in {:.1} s",
                        e.meta.version,
                        e.meta.size,
                        t.elapsed().as_secs_f64()
                    );
                    // Cached packets of the name (an older version, the
                    // client's own segments) go before the client hears 200.
                    me.cs_erase(&name).await;
                    me.set_record(Verb::Insert, &pid, status::OK, n, true);
                }
                Err(why) => {
                    tracing::warn!("insert of {name} failed: {why}");
                    me.set_record(Verb::Insert, &pid, status::FAILED, 0, true);
                }
            }
        });
        true
    }

    /// Fetches the segments in order into the store; returns the segment
    /// count and the published version.
    async fn ingest(
        self: &Arc<Self>,
        plan: &Plan,
        pid: &Bytes,
    ) -> Result<(u64, granary_store::Entry), String> {
        // The fetch engine (granary-transfer) over this face: a fixed
        // window of `window` Interests (as the reference server), RFC 6298
        // retransmission timers, `segment_tries` transmissions per segment.
        let window = self.cfg.window.max(1);
        let (in_tx, in_rx) = mpsc::channel(window.max(64) * 4);
        let _sub = self.consumer.subscribe(&plan.name, in_tx);
        let mut link = granary_transfer::ChannelLink {
            tx: self.consumer.out.clone(),
            rx: in_rx,
        };
        let mut engine = granary_transfer::Engine::new(granary_transfer::Config {
            pipeline_type: granary_transfer::PipelineType::Fixed,
            pipeline_size: window,
            lifetime: Duration::from_millis(self.cfg.segment_lifetime_ms.max(1)),
            retries: self.cfg.segment_tries.max(1) - 1,
            ..Default::default()
        });
        let mut job = InsertJob {
            service: self.clone(),
            pid: pid.clone(),
            plan_name: plan.name.clone(),
            hint: plan.hint.clone(),
            window: window as u64,
            end: plan.end,
            next_send: 0,
            next_write: 0,
            reorder: BTreeMap::new(),
            ready: std::collections::VecDeque::new(),
            writer: None,
            failure: None,
            nacks: HashMap::new(),
        };
        let run = engine.run(&mut link, &mut [&mut job]).await;
        let mut failure = match (run, granary_transfer::Job::state(&job)) {
            (Err(e), _) => Some(e.to_string()),
            (Ok(_), granary_transfer::JobState::Failed(e)) => Some(e),
            _ => None,
        };
        // Hand what is still queued to the store.
        if failure.is_none() {
            if let Some(w) = &job.writer {
                while let Some(c) = job.ready.pop_front() {
                    if w.tx.send(Chunk::Data(c)).await.is_err() {
                        failure = Some("the store stopped reading".into());
                        break;
                    }
                }
            }
        }
        let next_write = job.next_write;
        let end = job.end;
        let complete = failure.is_none() && end.is_some_and(|e| next_write == e + 1);
        let Some(w) = job.writer.take() else {
            return Err(failure.unwrap_or_else(|| "no segment fetched".into()));
        };
        let _ =
            w.tx.send(if complete { Chunk::End } else { Chunk::Abort })
                .await;
        drop(w.tx);
        let stored = w.done.await.map_err(|e| format!("store task: {e}"))?;
        if !complete {
            return Err(failure
                .unwrap_or_else(|| format!("{next_write} segments fetched, object incomplete")));
        }
        let e = stored.map_err(|e| format!("store: {e}"))?;
        let repo = self.repo.clone();
        let published = tokio::task::spawn_blocking(move || {
            if let Err(x) = crate::manifest::publish(
                &repo.store,
                &e,
                &granary_security::Signer::Digest,
                "digest",
            ) {
                // Nothing half-made is ever visible.
                repo.store.discard(&e);
                return Err(x);
            }
            let e = repo
                .store
                .commit(vec![e], true)
                .pop()
                .unwrap_or_else(|| Err(granary_store::Error::Corrupt("nothing committed".into())))
                .map_err(|x| x.to_string())?;
            // The observer logs a change it only queued or could not record.
            let _ = repo.notify_published(&e);
            Ok(e)
        })
        .await
        .map_err(|e| format!("manifest task: {e}"))?
        .map_err(|e| format!("manifest: {e}"))?;
        Ok((next_write, published))
    }

    /// Starts the store's ingest on a blocking thread, fed by a channel.
    /// The segment size is the first segment's (so the object is served in
    /// the same segments it was inserted in), or the store's default for a
    /// one-segment object.
    fn writer(&self, name: &Name, first_len: usize, single: bool) -> Writer {
        let default = granary_store::DEFAULT_SEGMENT_SIZE as usize;
        let segment_size = if single || first_len == 0 {
            first_len.max(default)
        } else {
            first_len
        };
        let (tx, rx) = mpsc::channel(16);
        let repo = self.repo.clone();
        let name = name.clone();
        let done = tokio::task::spawn_blocking(move || {
            // Staged: the version appears with its manifest, or not at all
            // (committed in `finish_insert` once the manifest is made).
            let opts = granary_store::PutOptions {
                segment_size: segment_size.min(u32::MAX as usize) as u32,
                staged: true,
                ..Default::default()
            };
            let reader = ChunkReader {
                rx,
                cur: Bytes::new(),
            };
            repo.store.put(&name, reader, &opts, |_| {})
        });
        Writer { tx, done }
    }

    /// Deletes every version of the named object; records 200 and the
    /// number of segments removed. True when to acknowledge.
    async fn delete(self: &Arc<Self>, cmd: CommandParameter) -> bool {
        let Some(pid) = cmd.process_id.clone() else {
            tracing::info!("delete command without ProcessId ignored");
            return false;
        };
        let in_progress = Record {
            status: status::IN_PROGRESS,
            num: 0,
            done: None,
        };
        if let Err(ack) = self.new_record(Verb::Delete, &pid, in_progress) {
            return ack;
        }
        let Some(name) = cmd.name.clone() else {
            self.set_record(Verb::Delete, &pid, status::FAILED, 0, true);
            return true;
        };
        let repo = self.repo.clone();
        let (start, end) = (cmd.start_block_id, cmd.end_block_id);
        let n2 = name.clone();
        let r = tokio::task::spawn_blocking(move || -> Result<u64, String> {
            let store = &repo.store;
            let versions = store.versions(&n2).map_err(|e| e.to_string())?;
            let mut segments = 0u64;
            for v in &versions {
                let Ok(e) = store.get(&n2, Some(*v)) else {
                    continue;
                };
                let last = e.meta.segments().saturating_sub(1);
                if start.unwrap_or(0) != 0 || end.is_some_and(|x| x < last) {
                    return Err(format!(
                        "segments {}..{} of {n2}: Granary deletes whole objects",
                        start.unwrap_or(0),
                        end.map_or("".into(), |x| x.to_string())
                    ));
                }
                segments += e.meta.segments();
            }
            let removed = store.remove(&n2, None);
            if removed.is_ok() {
                let _ = repo.notify_removed(&n2, None);
            }
            // A copy of it being kept in the background (`granary get`)
            // must not land after this: marked, it is dropped when it does;
            // one that landed since the removal goes now.
            let (_, landed) = repo.keeps.mark_removed(&n2, None);
            for v in landed {
                crate::keeps::drop_kept(&repo, &n2, v);
            }
            match removed {
                Ok(_) | Err(granary_store::Error::NotFound(_)) => Ok(segments),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        match r {
            Ok(n) => {
                tracing::info!("deleted {name} ({n} segments) on a network command");
                if n > 0 {
                    self.cs_erase(&name).await;
                }
                self.set_record(Verb::Delete, &pid, status::OK, n, true);
            }
            Err(why) => {
                tracing::info!("delete of {name} refused: {why}");
                self.set_record(Verb::Delete, &pid, status::FAILED, 0, true);
            }
        }
        true
    }
}

enum Chunk {
    Data(Bytes),
    End,
    Abort,
}

struct Writer {
    tx: mpsc::Sender<Chunk>,
    done: tokio::task::JoinHandle<granary_store::Result<granary_store::Entry>>,
}

/// A blocking `Read` over the chunks an insert fetches; EOF only on an
/// explicit end (a closed channel is an error, so a failed or cancelled
/// fetch never publishes a truncated object).
struct ChunkReader {
    rx: mpsc::Receiver<Chunk>,
    cur: Bytes,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(Chunk::Data(b)) => self.cur = b,
                Some(Chunk::End) => return Ok(0),
                Some(Chunk::Abort) | None => {
                    return Err(std::io::Error::other("network insert aborted"))
                }
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        bytes::Buf::advance(&mut self.cur, n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_face::{FaceEvent, FaceHandle, FaceLimits, OutKind, OutPacket};
    use granary_packet::SignatureInfo;

    fn hex(s: &str) -> Bytes {
        Bytes::from(::hex::decode(s.split_whitespace().collect::<String>()).unwrap())
    }

    fn name(s: &str) -> Name {
        Name::from_uri(s).unwrap()
    }

    /// docs/repo-protocol.md §12.1 and §12.2: PutfileClient's notify and
    /// command message for /data/f20k (3 segments, ProcessId 03359b70).
    const NOTIFY: &str = "0590073c0808746573747265706f0806696e7365727408066e6f74696679022038be8144e48aa67cd1fc6bc0981281582c282212d9809b04e4ed06d40a60c0ce0a04e31dd7b70c020fa0241f0717080b7265706f5f636c69656e7408083738366136636663800485410d002c031b01002e20dba3cc4c10df530f321fc7821ac0bf28b23957e05eb778ca4ee83e926390936c";
    const MSG: &str = "069d0734080b7265706f5f636c69656e740808373836613663666308036d73670808746573747265706f0806696e73657274080485410d0014031801001539070c08046461746108046632306bd300cc0100cd0102ce0403359b70d400d5190717080b7265706f5f636c69656e740808373836613663666316031b01001720edfcf65daa5af5356aedf9c9f4de6ccfa6c421d22effc90c99214dc93f3ed238";
    /// §12.5: the insert check for that ProcessId.
    const CHECK: &str = "052e07200808746573747265706f080c696e7365727420636865636b0806ce0403359b7012000a04f31324410c0203e8";

    /// A stand-in forwarder on the other end of the repo's in-process face;
    /// management commands are answered 200 and remembered.
    struct Fwd {
        events: mpsc::Receiver<FaceEvent>,
        handle: FaceHandle,
        mgmt: Vec<Name>,
        _dir: tempfile::TempDir,
        repo: Arc<Repo>,
    }

    fn digest_data(b: DataBuilder) -> Data {
        granary_packet::digest::sign_data(b)
    }

    impl Fwd {
        fn start(cfg: ServeConfig) -> Fwd {
            let dir = tempfile::tempdir().unwrap();
            let store = granary_store::Store::open(dir.path()).unwrap();
            let repo = Arc::new(Repo::new(store, None));
            let (tx, events) = mpsc::channel(1024);
            let (handle, app) =
                granary_face::internal::pair(300, "repo", &FaceLimits::default(), tx);
            tokio::spawn(crate::serve_with(repo.clone(), app, cfg));
            Fwd {
                events,
                handle,
                mgmt: Vec::new(),
                _dir: dir,
                repo,
            }
        }

        fn send(&self, wire: Bytes, kind: OutKind, token: Option<&[u8]>) {
            assert!(self.handle.send(OutPacket {
                wire,
                kind,
                pit_token: token.map(Bytes::copy_from_slice),
                congestion_mark: None,
            }));
        }

        /// A network delete of `obj` with ProcessId `pid` (hex), carried
        /// through to its end; the delete check's answer.
        async fn delete(&mut self, obj: &Name, pid: &str, nonce: &[u8]) -> Data {
            let cmd = CommandParameter {
                name: Some(obj.clone()),
                process_id: Some(hex(pid)),
                check_prefix: Some(name("/client")),
                ..Default::default()
            };
            let (i, msg) = notify("/granary/repo", Verb::Delete, nonce, &cmd);
            self.interest(&i, b"n");
            let _ = self.expect_interest().await;
            self.data(&msg);
            assert!(matches!(self.recv().await.0, NetPacket::Data(_)));
            self.check(&check_interest("/granary/repo", Verb::Delete, &hex(pid)))
                .await
        }

        fn interest(&self, i: &Interest, token: &[u8]) {
            self.send(i.wire().clone(), OutKind::Interest, Some(token));
        }

        fn data(&self, d: &Data) {
            self.send(d.wire().clone(), OutKind::Data, None);
        }

        fn nack(&self, i: &Interest, reason: u64) {
            self.send(i.wire().clone(), OutKind::Nack(reason), None);
        }

        /// The next packet from the repo (management commands answered).
        async fn recv(&mut self) -> (NetPacket, LinkFields) {
            self.try_recv(Duration::from_secs(10))
                .await
                .expect("the repo sent nothing")
        }

        async fn try_recv(&mut self, wait: Duration) -> Option<(NetPacket, LinkFields)> {
            loop {
                let ev = tokio::time::timeout(wait, self.events.recv())
                    .await
                    .ok()??;
                let FaceEvent::Packet { packet, link, .. } = ev else {
                    continue;
                };
                if let NetPacket::Interest(i) = &packet {
                    if name("/localhost/nfd").is_prefix_of(&i.name) {
                        self.mgmt.push(i.name.prefix(4));
                        use granary_mgmt::TlvElement;
                        let r = granary_mgmt::ControlResponse::new(200, "OK").encode();
                        self.data(&digest_data(DataBuilder::new(i.name.clone()).content(r)));
                        continue;
                    }
                }
                return Some((packet, link));
            }
        }

        async fn expect_interest(&mut self) -> Interest {
            match self.recv().await.0 {
                NetPacket::Interest(i) => i,
                other => panic!("expected an Interest, got {other:?}"),
            }
        }

        async fn check(&mut self, check: &Interest) -> Data {
            self.interest(check, b"chk");
            loop {
                if let (NetPacket::Data(d), link) = self.recv().await {
                    if d.name() == &check.name {
                        assert_eq!(link.pit_token.as_deref(), Some(&b"chk"[..]));
                        return d;
                    }
                }
            }
        }
    }

    fn interest(h: &str) -> Interest {
        Interest::decode(hex(h)).unwrap()
    }

    fn segment(obj: &Name, i: u64, content: Vec<u8>, last: u64) -> Data {
        digest_data(
            DataBuilder::new(obj.append(&Component::segment(i)))
                .content(content)
                .freshness_period(0)
                .final_block_id(Component::segment(last)),
        )
    }

    /// A notify as PutfileClient/DeleteClient send it, with the command
    /// message Data that answers the repo's fetch of it.
    fn notify(repo: &str, verb: Verb, nonce: &[u8], cmd: &CommandParameter) -> (Interest, Data) {
        let np = NotifyParam {
            publisher: name("/client"),
            nonce: Bytes::copy_from_slice(nonce),
            forwarding_hint: None,
        };
        let mut f = InterestFields::new(
            name(repo)
                .append(&Component::generic(verb.word()))
                .append(&Component::generic(b"notify")),
        );
        f.app_params = Some(np.encode());
        f.lifetime = Some(4000);
        f.nonce = Some(7);
        f.sig_info = Some(SignatureInfo::new(sig_type::DIGEST_SHA256));
        let i = granary_packet::digest::sign_interest(f);
        let msg = name("/client/msg")
            .join(&name(repo))
            .append(&Component::generic(verb.word()))
            .append(&Component::generic(nonce));
        let d = digest_data(
            DataBuilder::new(msg)
                .content_type(0)
                .content(cmd.encode_as_client()),
        );
        (i, d)
    }

    fn check_interest(repo: &str, verb: Verb, pid: &[u8]) -> Interest {
        let p = CommandParameter {
            process_id: Some(Bytes::copy_from_slice(pid)),
            ..Default::default()
        };
        let mut f = InterestFields::new(
            name(repo)
                .append(&Component::generic(verb.check_word()))
                .append(&Component::generic(&p.encode())),
        );
        f.must_be_fresh = true;
        f.lifetime = Some(1000);
        f.encode()
    }

    #[tokio::test]
    async fn captured_insert_runs_end_to_end() {
        let mut fwd = Fwd::start(ServeConfig::default());
        let notify = interest(NOTIFY);
        fwd.interest(&notify, b"n1");
        // 1. The repo fetches the command message from the client.
        let msg_i = fwd.expect_interest().await;
        assert_eq!(
            msg_i.name.to_string(),
            "/repo_client/786a6cfc/msg/testrepo/insert/%85A%0D%00"
        );
        assert!(!msg_i.can_be_prefix && !msg_i.must_be_fresh);
        assert!(msg_i.lifetime_ms() <= 4000);
        fwd.data(&Data::decode(hex(MSG)).unwrap());
        // 2. It acknowledges the notify (no Content) and fetches segments
        //    0..2 with MustBeFresh and a 1 s lifetime.
        let obj = name("/data/f20k");
        let (mut acked, mut segs) = (false, Vec::new());
        while !acked || segs.len() < 3 {
            match fwd.recv().await {
                (NetPacket::Data(d), link) => {
                    assert_eq!(d.name(), &notify.name);
                    assert!(d.content_bytes().is_none(), "the ack has no Content");
                    assert_eq!(link.pit_token.as_deref(), Some(&b"n1"[..]));
                    acked = true;
                }
                (NetPacket::Interest(i), _) => {
                    assert!(obj.is_prefix_of(&i.name) && i.name.len() == 3, "{}", i.name);
                    assert!(i.must_be_fresh && i.lifetime_ms() == 1000);
                    segs.push(i);
                }
                (p, _) => panic!("unexpected {p:?}"),
            }
        }
        // 3. While the segments are outstanding the check says 300, 0 — in
        //    exactly the reference encoding, fresh for at most 1 s.
        let check = interest(CHECK);
        let d = fwd.check(&check).await;
        assert_eq!(d.content(), &hex("ce0403359b70 d002012c d10100")[..]);
        assert!(d.freshness_period() <= 1000);
        // A retried notify (same name) is acknowledged again; no second insert.
        fwd.interest(&notify, b"n2");
        let again = fwd.expect_interest().await;
        assert_eq!(again.name, msg_i.name);
        fwd.data(&Data::decode(hex(MSG)).unwrap());
        match fwd.recv().await {
            (NetPacket::Data(d), link) => {
                assert_eq!(d.name(), &notify.name);
                assert_eq!(link.pit_token.as_deref(), Some(&b"n2"[..]));
            }
            (p, _) => panic!("expected the second ack, got {p:?}"),
        }
        // 4. The client answers; the insert completes with 200, 3.
        let body: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
        for i in segs.iter().rev() {
            let n = i.name.last().unwrap().as_number().unwrap();
            let s = (n * 8000) as usize;
            let chunk = body[s..(s + 8000).min(body.len())].to_vec();
            fwd.data(&segment(&obj, n, chunk, 2));
        }
        let mut done = None;
        for _ in 0..100 {
            let d = fwd.check(&check).await;
            let r = CommandResponse::decode(&Bytes::copy_from_slice(d.content())).unwrap();
            if r.status_code != status::IN_PROGRESS {
                done = Some(d);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let d = done.expect("insert finished");
        assert_eq!(d.content(), &hex("ce0403359b70 d001c8 d10103")[..]);
        // Stored as one version with the client's segment size and a manifest.
        let e = fwd.repo.store.get(&obj, None).unwrap();
        assert_eq!((e.meta.size, e.meta.segment_size), (20_000, 8000));
        assert_eq!(std::fs::read(&e.path).unwrap(), body);
        assert!(e.meta.manifest.is_some());
        assert_eq!(e.meta.signing.as_deref(), Some("digest"));
        assert!(
            fwd.mgmt
                .iter()
                .any(|n| n == &name("/localhost/nfd/cs/erase")),
            "cached packets of the name are erased: {:?}",
            fwd.mgmt
        );
        assert!(fwd.mgmt.contains(&name("/localhost/nfd/rib/register")));
        // Served as GetfileClient asks: NAME/seg=i, Nack past the end.
        let net_get = |n: u64| {
            let mut f = InterestFields::new(obj.append(&Component::segment(n)));
            f.lifetime = Some(1000);
            f.encode()
        };
        fwd.interest(&net_get(2), b"g");
        match fwd.recv().await.0 {
            NetPacket::Data(d) => {
                assert_eq!(d.content(), &body[16_000..]);
                assert_eq!(d.final_block_id(), Some(&Component::segment(2)));
            }
            p => panic!("{p:?}"),
        }
        fwd.interest(&net_get(3), b"g");
        assert!(matches!(
            fwd.recv().await.0,
            NetPacket::Nack(_, nack_reason::NO_ROUTE)
        ));
    }

    #[tokio::test]
    async fn checks_answer_403_and_404() {
        let mut fwd = Fwd::start(ServeConfig::default());
        let bad = InterestFields::new(
            name("/granary/repo")
                .append(&Component::generic(b"insert check"))
                .append(&Component::generic(b"\x07")),
        )
        .encode();
        assert_eq!(fwd.check(&bad).await.content(), &hex("d0020193")[..]);
        let unknown = check_interest("/granary/repo", Verb::Delete, b"abcd");
        assert_eq!(fwd.check(&unknown).await.content(), &hex("d0020194")[..]);
        // Only the configured name when any_prefix is off.
        let mut fwd = Fwd::start(ServeConfig {
            any_prefix: false,
            ..Default::default()
        });
        fwd.interest(&check_interest("/other", Verb::Insert, b"abcd"), b"x");
        assert!(matches!(fwd.recv().await.0, NetPacket::Nack(..)));
    }

    /// A mark on an Interest (the node's queue towards the repo stayed
    /// long) goes back on the answer, so the consumer whose window fills
    /// that queue sees it; an unmarked Interest gets an unmarked answer.
    #[tokio::test]
    async fn the_answer_carries_the_interests_congestion_mark() {
        let mut fwd = Fwd::start(ServeConfig::default());
        let unknown = check_interest("/granary/repo", Verb::Delete, b"abcd");
        for mark in [Some(1), None] {
            assert!(fwd.handle.send(OutPacket {
                wire: unknown.wire().clone(),
                kind: OutKind::Interest,
                pit_token: Some(Bytes::from_static(b"t")),
                congestion_mark: mark,
            }));
            let (p, link) = fwd.recv().await;
            assert!(matches!(p, NetPacket::Data(_)));
            assert_eq!(link.congestion_mark, mark);
        }
    }

    #[tokio::test]
    async fn window_is_bounded_and_a_missing_segment_fails_the_insert() {
        let mut fwd = Fwd::start(ServeConfig {
            segment_tries: 2,
            ..Default::default()
        });
        let cmd = CommandParameter {
            name: Some(name("/big/obj")),
            forwarding_hint: Some(name("/producer/site")),
            start_block_id: Some(0),
            end_block_id: Some(99),
            process_id: Some(hex("01020304")),
            ..Default::default()
        };
        let (n, msg) = notify("/granary/repo", Verb::Insert, b"N001", &cmd);
        fwd.interest(&n, b"n");
        let _ = fwd.expect_interest().await;
        fwd.data(&msg);
        let mut segs = Vec::new();
        while let Some((p, _)) = fwd.try_recv(Duration::from_millis(300)).await {
            if let NetPacket::Interest(i) = p {
                segs.push(i);
            }
        }
        assert_eq!(segs.len(), 10, "at most 10 segment Interests in flight");
        for i in &segs {
            assert_eq!(
                i.forwarding_hint,
                vec![name("/producer/site")],
                "hint honoured"
            );
        }
        // Answer 0..4 (out of order), Nack 5 twice: the window moves on,
        // then the insert fails.
        let obj = name("/big/obj");
        for k in [3u64, 1, 0, 4, 2] {
            fwd.data(&segment(&obj, k, vec![k as u8; 100], 99));
        }
        fwd.nack(&segs[5], nack_reason::NO_ROUTE);
        let mut nacks = 1;
        while nacks < 2 {
            if let (NetPacket::Interest(i), _) = fwd.recv().await {
                if i.name.last().unwrap().as_number() == Some(5) {
                    fwd.nack(&i, nack_reason::NO_ROUTE);
                    nacks += 1;
                }
            }
        }
        let check = check_interest("/granary/repo", Verb::Insert, &hex("01020304"));
        let mut status = 0;
        for _ in 0..200 {
            let d = fwd.check(&check).await;
            status = CommandResponse::decode(&Bytes::copy_from_slice(d.content()))
                .unwrap()
                .status_code;
            if status != 300 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(status, 400);
        assert!(fwd.repo.store.get(&obj, None).is_err(), "nothing visible");
        let tmp = fwd.repo.store.root().join("tmp");
        assert_eq!(std::fs::read_dir(tmp).unwrap().count(), 0, "no leftovers");
        // The pending table is cleared of the aborted fetches.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test]
    async fn refused_inserts_answer_400() {
        let mut fwd = Fwd::start(ServeConfig::default());
        for (k, (n, start)) in [("/granary/repo/x", 0), ("/localhost/x", 0), ("/ok/x", 5)]
            .into_iter()
            .enumerate()
        {
            let pid = [9, 9, 9, k as u8];
            let cmd = CommandParameter {
                name: Some(name(n)),
                start_block_id: Some(start),
                end_block_id: Some(9),
                process_id: Some(Bytes::copy_from_slice(&pid)),
                ..Default::default()
            };
            let (i, msg) = notify("/granary/repo", Verb::Insert, &[1, 2, 3, k as u8], &cmd);
            fwd.interest(&i, b"n");
            let _ = fwd.expect_interest().await;
            fwd.data(&msg);
            assert!(
                matches!(fwd.recv().await.0, NetPacket::Data(_)),
                "acknowledged"
            );
            let d = fwd
                .check(&check_interest("/granary/repo", Verb::Insert, &pid))
                .await;
            let r = CommandResponse::decode(&Bytes::copy_from_slice(d.content())).unwrap();
            assert_eq!(r.status_code, 400, "{n}");
        }
    }

    #[tokio::test]
    async fn delete_removes_every_version() {
        let mut fwd = Fwd::start(ServeConfig::default());
        let obj = name("/del/obj");
        let opts = granary_store::PutOptions::default();
        fwd.repo
            .store
            .put(&obj, &vec![1u8; 20_000][..], &opts, |_| {})
            .unwrap();
        fwd.repo
            .store
            .put(&obj, &vec![2u8; 100][..], &opts, |_| {})
            .unwrap();
        let d = fwd.delete(&obj, "0a0b0c0d", b"DDDD").await;
        // 3 + 1 segments; ProcessId, StatusCode, DeleteNum in that order.
        assert_eq!(d.content(), &hex("ce040a0b0c0d d001c8 d20104")[..]);
        assert!(fwd.repo.store.versions(&obj).unwrap().is_empty());
        // An insert check for the delete's id: separate tables.
        let d = fwd
            .check(&check_interest(
                "/granary/repo",
                Verb::Insert,
                &hex("0a0b0c0d"),
            ))
            .await;
        assert_eq!(d.content(), &hex("d0020194")[..]);
    }

    /// A network delete overtakes a copy of the name still being kept in
    /// the background (a detached put from `granary get`): told when it
    /// lands, the keep drops it, as after a `granary rm`.
    #[tokio::test]
    async fn delete_overtakes_a_copy_being_kept() {
        let mut fwd = Fwd::start(ServeConfig::default());
        let obj = name("/del/kept");
        fwd.repo.keeps.begin(&obj, None);
        let other = name("/del/other");
        fwd.repo.keeps.begin(&other, None);
        let d = fwd.delete(&obj, "01020304", b"EEEE").await;
        // Nothing stored yet: OK, 0 segments.
        assert_eq!(d.content(), &hex("ce0401020304 d001c8 d20100")[..]);
        assert!(
            fwd.repo.keeps.finish(&obj, Some(1)),
            "the copy in flight learns it was removed meanwhile"
        );
        assert!(
            !fwd.repo.keeps.finish(&other, Some(1)),
            "another name's copy is kept"
        );
    }

    #[test]
    fn chunk_reader_needs_an_explicit_end() {
        let (tx, rx) = mpsc::channel(4);
        tx.try_send(Chunk::Data(Bytes::from_static(b"abc")))
            .unwrap();
        tx.try_send(Chunk::Data(Bytes::from_static(b"de"))).unwrap();
        tx.try_send(Chunk::End).unwrap();
        let mut r = ChunkReader {
            rx,
            cur: Bytes::new(),
        };
        let mut s = Vec::new();
        r.read_to_end(&mut s).unwrap();
        assert_eq!(s, b"abcde");
        let (tx, rx) = mpsc::channel(4);
        tx.try_send(Chunk::Data(Bytes::from_static(b"abc")))
            .unwrap();
        drop(tx);
        let mut r = ChunkReader {
            rx,
            cur: Bytes::new(),
        };
        assert!(r.read_to_end(&mut Vec::new()).is_err(), "closed early");
    }
}
