//! Emulated testbeds for Granary: hosts are Linux network namespaces, links
//! are veth pairs (point-to-point) or a bridge (a LAN), and links are
//! impaired with a rate, a one-way delay and random loss per direction.
//!
//! **How a link is impaired.** When the kernel has `sch_netem` (probed once
//! per process, [`netem_available`]), each side's egress gets a netem qdisc
//! (`delay`, `loss`, `rate`, `limit`) and every kind of traffic is impaired.
//! Without netem (no delay or loss in any other qdisc), the rate is done by
//! `tbf` on each veth's egress in the kernel, and delay and loss by a
//! user-space UDP relay ([`relay`], run as `granary linkem` inside the far
//! side's namespace) that the near side's UDP face dials instead of the far
//! side itself: [`Testbed::udp_path`] returns the address to dial either
//! way. Only UDP through such a path is delayed and lossy in relay mode;
//! other traffic on the link sees only the rate. [`RateBy::Relay`] moves the
//! rate into the relay too (a virtual-time bottleneck with a tail-drop
//! queue), for kernels where tbf misbehaves.
//!
//! Everything a [`Testbed`] makes — namespaces (and with them veths and
//! bridges), processes started in them — is removed when it is dropped.
//! Names carry the process id and a counter, so tests run in parallel;
//! namespaces left by a process that no longer exists are removed when the
//! next testbed starts.
#![forbid(unsafe_code)]

pub mod probe;
pub mod relay;
pub mod tcprelay;
pub mod topology;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use relay::Impairment;

/// Testbed errors: what failed and the command's own message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not root, or `ip`/`tc` missing.
    #[error("netns testbed needs {0}")]
    Requirement(String),
    /// A command failed.
    #[error("`{cmd}` failed: {msg}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its standard error (or the spawn error).
        msg: String,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

fn cmd_line(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs a command to completion; an error carries its stderr.
pub fn run(mut c: Command) -> Result<String> {
    let line = cmd_line(&c);
    let out = c.output().map_err(|e| Error::Command {
        cmd: line.clone(),
        msg: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Error::Command {
            cmd: line,
            msg: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> Result<String> {
    let mut c = Command::new("ip");
    c.args(args);
    run(c)
}

/// Checks what a testbed needs: root, `ip` and `tc`. The error says what is
/// missing.
pub fn check_requirements() -> Result<()> {
    let mut id = Command::new("id");
    id.arg("-u");
    let uid = run(id).map_err(|e| Error::Requirement(e.to_string()))?;
    if uid.trim() != "0" {
        return Err(Error::Requirement(format!(
            "root (network namespaces, veth, qdiscs); running as uid {}",
            uid.trim()
        )));
    }
    for tool in ["ip", "tc"] {
        let mut c = Command::new(tool);
        c.arg("-V");
        run(c).map_err(|e| {
            Error::Requirement(format!(
                "`{tool}` from iproute2 (apt-get install iproute2): {e}"
            ))
        })?;
    }
    Ok(())
}

/// Whether the kernel has `sch_netem` (probed once per process in a
/// throw-away namespace).
pub fn netem_available() -> bool {
    static NETEM: OnceLock<bool> = OnceLock::new();
    *NETEM.get_or_init(|| {
        let name = format!(
            "gtb{}probe{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        if ip(&["netns", "add", &name]).is_err() {
            return false;
        }
        let ok = ip(&[
            "netns", "exec", &name, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
            "1ms",
        ])
        .is_ok();
        let _ = ip(&["netns", "del", &name]);
        ok
    })
}

/// How links are emulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emulation {
    /// `tc netem` on each veth egress.
    Netem,
    /// tbf in the kernel (rate) plus the user-space relay (delay, loss).
    Relay,
}

/// Where the rate is enforced in relay mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateBy {
    /// `tbf` on the veth egress.
    Tbf,
    /// The relay's own bottleneck model.
    Relay,
}

/// A link's impairments, per direction (`a → b` and `b → a`).
#[derive(Clone, Debug, Default)]
pub struct LinkSpec {
    /// From the first host to the second.
    pub ab: Impairment,
    /// From the second host to the first.
    pub ba: Impairment,
    /// Device MTU of the veths (default 1500), e.g. 9000 for jumbo frames.
    pub mtu: Option<u32>,
}

impl LinkSpec {
    /// The same in both directions: `rate` (bits/s), one-way `delay`, `loss`.
    pub fn symmetric(rate_bps: Option<u64>, delay: Duration, loss: f64) -> LinkSpec {
        let i = Impairment {
            delay,
            loss,
            rate_bps,
            queue_bytes: None,
        };
        LinkSpec {
            ab: i.clone(),
            ba: i,
            mtu: None,
        }
    }
    /// No impairment at all (a fast LAN cable).
    pub fn clean() -> LinkSpec {
        LinkSpec::default()
    }
}

/// Testbed options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `granary` binary (runs `granary linkem` for relays).
    pub granary: PathBuf,
    /// Force an emulation (default: netem when available, else relay).
    /// `GRANARY_TESTBED_EMULATION=relay|netem` also sets it.
    pub emulation: Option<Emulation>,
    /// Where the rate goes in relay mode (default: tbf).
    pub rate_by: RateBy,
    /// Base seed of the relays' loss RNGs.
    pub seed: u64,
}

impl Options {
    /// Defaults with this `granary` binary.
    pub fn new(granary: impl Into<PathBuf>) -> Options {
        Options {
            granary: granary.into(),
            emulation: None,
            rate_by: RateBy::Relay,
            seed: 1,
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A host (a namespace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostId(usize);

/// A point-to-point link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkId(usize);

/// A LAN (bridge).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LanId(usize);

struct Host {
    name: String,
    ns: String,
}

struct Link {
    a: HostId,
    b: HostId,
    addr_a: Ipv4Addr,
    addr_b: Ipv4Addr,
    spec: LinkSpec,
}

struct Lan {
    members: Vec<(HostId, Ipv4Addr)>,
}

/// A running relay process.
struct RelayProc {
    child: Child,
    /// Where it listens (what [`Testbed::udp_path`] returned).
    addr: SocketAddr,
    /// Its `granary linkem …` arguments.
    args: Vec<String>,
}

/// Netns testbed: hosts, links, LANs, relays and processes, all removed on
/// drop.
pub struct Testbed {
    opts: Options,
    emulation: Emulation,
    prefix: String,
    hosts: Vec<Host>,
    links: Vec<Link>,
    lans: Vec<Lan>,
    switches: Vec<String>,
    relays: Vec<RelayProc>,
    children: Vec<Child>,
    seeds: u64,
}

/// The root qdisc (`tc qdisc add … root <this>`) for one direction's
/// kernel part, or None when the kernel has nothing to do.
fn qdisc_args(emulation: Emulation, rate_by: RateBy, imp: &Impairment) -> Option<Vec<String>> {
    match emulation {
        Emulation::Netem => {
            if imp.delay.is_zero() && imp.loss == 0.0 && imp.rate_bps.is_none() {
                return None;
            }
            let mut a = vec![
                "netem".to_string(),
                "delay".into(),
                format!("{}us", imp.delay.as_micros()),
            ];
            if imp.loss > 0.0 {
                a.push("loss".into());
                a.push(format!("{}%", imp.loss * 100.0));
            }
            if let Some(r) = imp.rate_bps {
                a.push("rate".into());
                a.push(format!("{r}bit"));
            }
            // netem's limit is in packets (of up to ~1500 bytes): the queue
            // plus what is in flight on the delay line.
            let inflight = imp
                .rate_bps
                .map(|r| r as f64 / 8.0 * imp.delay.as_secs_f64() / 1000.0)
                .unwrap_or(10_000.0);
            let q = imp.effective_queue().min(64 << 20) as f64 / 1000.0;
            a.push("limit".into());
            a.push(format!("{}", (q + inflight).ceil() as u64 + 10));
            Some(a)
        }
        Emulation::Relay => {
            let r = imp.rate_bps.filter(|_| rate_by == RateBy::Tbf)?;
            // burst: at least 4 ms of traffic (timer slack) and 3 MTUs.
            let burst = (r / 8 / 250).max(4500);
            Some(vec![
                "tbf".into(),
                "rate".into(),
                format!("{r}bit"),
                "burst".into(),
                burst.to_string(),
                "limit".into(),
                imp.effective_queue().to_string(),
            ])
        }
    }
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The creating pid when `name` follows this crate's scheme
/// (`gtb<pid>x<n>-<host>`, `gtb<pid>x<n>-sw<k>`, `gtb<pid>probe<n>`).
fn our_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("gtb")?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let pid = digits.parse::<u32>().ok()?;
    let after = &rest[digits.len()..];
    let n = after.strip_prefix("probe").or_else(|| {
        after
            .strip_prefix('x')
            .map(|a| a.split('-').next().unwrap_or(""))
    })?;
    (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit())).then_some(pid)
}

/// Removes namespaces made by testbeds of processes that no longer exist.
fn reap_stale() {
    let Ok(list) = ip(&["netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if our_pid(name).is_some_and(|p| !pid_alive(p)) {
            delete_ns(name);
        }
    }
}

/// Removes every namespace testbeds of this process made, killing what runs
/// in them: for a signal handler (a Ctrl-C does not run `Drop`).
pub fn cleanup_process() {
    let Ok(list) = ip(&["netns", "list"]) else {
        return;
    };
    let me = std::process::id();
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if our_pid(name) == Some(me) {
            delete_ns(name);
        }
    }
}

/// Kills what still runs in a namespace this crate made, then deletes it.
fn delete_ns(ns: &str) {
    if let Ok(pids) = ip(&["netns", "pids", ns]) {
        for p in pids.split_whitespace() {
            let _ = Command::new("kill").args(["-9", p]).status();
        }
    }
    let _ = ip(&["netns", "del", ns]);
}

impl Testbed {
    /// A new, empty testbed. Fails with a clear message when not root or
    /// `ip`/`tc` are missing.
    pub fn new(opts: Options) -> Result<Testbed> {
        check_requirements()?;
        if !opts.granary.exists() {
            return Err(Error::Requirement(format!(
                "the granary binary at {}",
                opts.granary.display()
            )));
        }
        reap_stale();
        let emulation = match std::env::var("GRANARY_TESTBED_EMULATION").as_deref() {
            Ok("relay") => Emulation::Relay,
            Ok("netem") => Emulation::Netem,
            _ => opts.emulation.unwrap_or_else(|| {
                if netem_available() {
                    Emulation::Netem
                } else {
                    Emulation::Relay
                }
            }),
        };
        if emulation == Emulation::Netem && !netem_available() {
            return Err(Error::Requirement(
                "sch_netem in the kernel (asked for netem emulation)".into(),
            ));
        }
        let prefix = format!(
            "gtb{}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let seeds = opts.seed;
        Ok(Testbed {
            opts,
            emulation,
            prefix,
            hosts: vec![],
            links: vec![],
            lans: vec![],
            switches: vec![],
            relays: vec![],
            children: vec![],
            seeds,
        })
    }

    /// The emulation in use.
    pub fn emulation(&self) -> Emulation {
        self.emulation
    }

    /// Where the rate goes in relay mode.
    pub fn rate_by(&self) -> RateBy {
        self.opts.rate_by
    }

    /// Adds a host (a namespace with `lo` up). `name` is a short label.
    pub fn add_host(&mut self, name: &str) -> Result<HostId> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(Error::Other(format!(
                "host name {name:?}: use letters and digits"
            )));
        }
        let ns = format!("{}-{name}", self.prefix);
        ip(&["netns", "add", &ns])?;
        // Registered before anything else can fail, so drop deletes it.
        self.hosts.push(Host {
            name: name.into(),
            ns: ns.clone(),
        });
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        Ok(HostId(self.hosts.len() - 1))
    }

    /// The namespace name of a host.
    pub fn netns(&self, h: HostId) -> &str {
        &self.hosts[h.0].ns
    }

    /// A host's label.
    pub fn host_name(&self, h: HostId) -> &str {
        &self.hosts[h.0].name
    }

    /// Connects two hosts by a veth pair with addresses 10.1.<n>.1 (a) and
    /// 10.1.<n>.2 (b), /24, impaired per `spec`: under netem for all traffic;
    /// in relay mode only for UDP sent through [`Testbed::udp_path`] (the
    /// addresses themselves reach the far side unimpaired).
    pub fn link(&mut self, a: HostId, b: HostId, spec: LinkSpec) -> Result<LinkId> {
        let n = self.links.len();
        if n >= 250 {
            return Err(Error::Other("at most 250 links".into()));
        }
        let (na, nb) = (self.hosts[a.0].ns.clone(), self.hosts[b.0].ns.clone());
        let dev = format!("l{n}");
        // Created directly inside the namespaces: nothing is ever left in
        // the root namespace, and names only need be unique per host.
        ip(&[
            "link", "add", &dev, "netns", &na, "type", "veth", "peer", "name", &dev, "netns", &nb,
        ])?;
        let addr_a = Ipv4Addr::new(10, 1, n as u8, 1);
        let addr_b = Ipv4Addr::new(10, 1, n as u8, 2);
        for (ns, addr) in [(&na, addr_a), (&nb, addr_b)] {
            if let Some(m) = spec.mtu {
                ip(&["-n", ns, "link", "set", &dev, "mtu", &m.to_string()])?;
            }
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", &dev])?;
            ip(&["-n", ns, "link", "set", &dev, "up"])?;
        }
        self.shape(&na, &dev, &spec.ab)?;
        self.shape(&nb, &dev, &spec.ba)?;
        self.links.push(Link {
            a,
            b,
            addr_a,
            addr_b,
            spec,
        });
        Ok(LinkId(n))
    }

    /// Puts hosts on one LAN: a bridge in its own namespace, one veth per
    /// member (addresses 10.2.<lan>.<i+1>/24). `spec` impairs each member's
    /// port (`ab` member → LAN, `ba` LAN → member) under netem only; in relay
    /// mode a LAN must be clean (an error otherwise: impair point-to-point
    /// links, reached through [`Testbed::udp_path`]).
    pub fn lan(&mut self, members: &[HostId], spec: LinkSpec) -> Result<LanId> {
        let clean = |i: &Impairment| i.delay.is_zero() && i.loss == 0.0 && i.rate_bps.is_none();
        if self.emulation == Emulation::Relay && !(clean(&spec.ab) && clean(&spec.ba)) {
            return Err(Error::Other(
                "LAN impairments need netem; in relay mode impair a point-to-point link and \
                 reach it with udp_path"
                    .into(),
            ));
        }
        let n = self.lans.len();
        if n >= 250 || members.len() >= 250 {
            return Err(Error::Other("at most 250 LANs of at most 249 hosts".into()));
        }
        let sw = format!("{}-sw{n}", self.prefix);
        ip(&["netns", "add", &sw])?;
        self.switches.push(sw.clone());
        ip(&["-n", &sw, "link", "set", "lo", "up"])?;
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        let dev = format!("n{n}");
        let mut lan = Lan { members: vec![] };
        for (i, h) in members.iter().enumerate() {
            let ns = self.hosts[h.0].ns.clone();
            let port = format!("p{i}");
            ip(&[
                "link", "add", &dev, "netns", &ns, "type", "veth", "peer", "name", &port, "netns",
                &sw,
            ])?;
            let addr = Ipv4Addr::new(10, 2, n as u8, i as u8 + 1);
            if let Some(m) = spec.mtu {
                ip(&["-n", &ns, "link", "set", &dev, "mtu", &m.to_string()])?;
                ip(&["-n", &sw, "link", "set", &port, "mtu", &m.to_string()])?;
            }
            ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", &dev])?;
            ip(&["-n", &ns, "link", "set", &dev, "up"])?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &sw, "link", "set", &port, "up"])?;
            self.shape(&ns, &dev, &spec.ab)?;
            self.shape(&sw, &port, &spec.ba)?;
            lan.members.push((*h, addr));
        }
        self.lans.push(lan);
        Ok(LanId(n))
    }

    /// Installs the kernel part of an impairment on a device's egress.
    fn shape(&self, ns: &str, dev: &str, imp: &Impairment) -> Result<()> {
        let Some(q) = qdisc_args(self.emulation, self.opts.rate_by, imp) else {
            return Ok(());
        };
        let mut c = Command::new("ip");
        c.args([
            "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
        ]);
        c.args(&q);
        run(c).map(|_| ())
    }

    /// The address of `host` on `link`.
    pub fn link_addr(&self, link: LinkId, host: HostId) -> Result<Ipv4Addr> {
        let l = &self.links[link.0];
        if host == l.a {
            Ok(l.addr_a)
        } else if host == l.b {
            Ok(l.addr_b)
        } else {
            Err(Error::Other(format!(
                "host {} is not on link {}",
                self.hosts[host.0].name, link.0
            )))
        }
    }

    /// The address of `host` on `lan`.
    pub fn lan_addr(&self, lan: LanId, host: HostId) -> Result<Ipv4Addr> {
        self.lans[lan.0]
            .members
            .iter()
            .find(|(h, _)| *h == host)
            .map(|(_, a)| *a)
            .ok_or_else(|| {
                Error::Other(format!(
                    "host {} is not on LAN {}",
                    self.hosts[host.0].name, lan.0
                ))
            })
    }

    /// The UDP address `from` dials to reach UDP port `port` of the other
    /// end of `link`, with the link's delay and loss applied both ways:
    /// the far side itself under netem, else a relay started in the far
    /// side's namespace (forwarding to its 127.0.0.1:`port`). In relay mode
    /// each call starts its own relay, i.e. its own emulated link: two paths
    /// over one link do not share its rate or queue (one path per link and
    /// direction of use is what the tests and benchmarks need).
    pub fn udp_path(&mut self, link: LinkId, from: HostId, port: u16) -> Result<SocketAddr> {
        let l = &self.links[link.0];
        let (to, to_addr, fwd, back) = if from == l.a {
            (l.b, l.addr_b, l.spec.ab.clone(), l.spec.ba.clone())
        } else if from == l.b {
            (l.a, l.addr_a, l.spec.ba.clone(), l.spec.ab.clone())
        } else {
            return Err(Error::Other("udp_path: host not on link".into()));
        };
        if self.emulation == Emulation::Netem {
            return Ok(SocketAddr::new(IpAddr::V4(to_addr), port));
        }
        let ns = self.hosts[to.0].ns.clone();
        self.relay(
            &ns,
            SocketAddr::new(IpAddr::V4(to_addr), 0),
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            &fwd,
            &back,
        )
    }

    /// TCP through `link` as `from` sees it: starts a TCP relay
    /// ([`tcprelay`], `granary linkem --tcp`) in the far side's namespace,
    /// listening on its link address at each of `ports` and forwarding to
    /// its `127.0.0.1` at the same port, with the link's delay and rate each
    /// way. Returns the address to connect to. (Under netem the far side
    /// itself, which must then listen on its link address.)
    pub fn tcp_path(&mut self, link: LinkId, from: HostId, ports: &[u16]) -> Result<Ipv4Addr> {
        let l = &self.links[link.0];
        let (to, to_addr, fwd, back) = if from == l.a {
            (l.b, l.addr_b, l.spec.ab.clone(), l.spec.ba.clone())
        } else if from == l.b {
            (l.a, l.addr_a, l.spec.ba.clone(), l.spec.ab.clone())
        } else {
            return Err(Error::Other("tcp_path: host not on link".into()));
        };
        if self.emulation == Emulation::Netem {
            return Ok(to_addr);
        }
        // TCP retransmits what is lost inside the proxy's own connections,
        // so the TCP relay does not drop (said in tcprelay's docs).
        let (mut fwd, mut back) = (fwd, back);
        fwd.loss = 0.0;
        back.loss = 0.0;
        let Some((&first, rest)) = ports.split_first() else {
            return Err(Error::Other("tcp_path: no ports".into()));
        };
        let ns = self.hosts[to.0].ns.clone();
        let mut extra = vec!["--tcp".to_string()];
        for p in rest {
            extra.push("--tcp-port".into());
            extra.push(p.to_string());
        }
        self.relay_with(
            &ns,
            SocketAddr::new(IpAddr::V4(to_addr), first),
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), first),
            &fwd,
            &back,
            &extra,
        )?;
        Ok(to_addr)
    }

    /// Starts `granary linkem` in namespace `ns`; returns its listen address.
    fn relay(
        &mut self,
        ns: &str,
        listen: SocketAddr,
        to: SocketAddr,
        up: &Impairment,
        down: &Impairment,
    ) -> Result<SocketAddr> {
        self.relay_with(ns, listen, to, up, down, &[])
    }

    fn relay_with(
        &mut self,
        ns: &str,
        listen: SocketAddr,
        to: SocketAddr,
        up: &Impairment,
        down: &Impairment,
        extra: &[String],
    ) -> Result<SocketAddr> {
        use std::io::BufRead;
        // TCP through the relay has no kernel rate (tbf would throttle the
        // relay's own writes), so the relay rates it.
        let rate_in_relay = self.opts.rate_by == RateBy::Relay || !extra.is_empty();
        let mut args: Vec<String> = vec![
            "linkem".into(),
            "--listen".into(),
            listen.to_string(),
            "--to".into(),
            to.to_string(),
            "--seed".into(),
            self.seeds.to_string(),
        ];
        self.seeds += 1;
        args.extend(extra.iter().cloned());
        for (dir, imp) in [("up", up), ("down", down)] {
            args.push(format!("--{dir}-delay"));
            args.push(format!("{}us", imp.delay.as_micros()));
            args.push(format!("--{dir}-loss"));
            args.push(format!("{}", imp.loss));
            if rate_in_relay {
                if let Some(r) = imp.rate_bps {
                    args.push(format!("--{dir}-rate"));
                    args.push(format!("{r}bit"));
                    args.push(format!("--{dir}-queue"));
                    args.push(imp.effective_queue().to_string());
                }
            }
        }
        // Raised priority (we are root): the relay's timing is the link's
        // delay, and tests and benchmarks share the CPU with busy nodes.
        let mut c = self.command_in(ns, "nice");
        c.args(["-n", "-10"]).arg(&self.opts.granary);
        c.args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let line = cmd_line(&c);
        let mut child = c.spawn().map_err(|e| Error::Command {
            cmd: line.clone(),
            msg: e.to_string(),
        })?;
        let out = child.stdout.take().expect("piped");
        let mut lines = std::io::BufReader::new(out).lines();
        let mut addr = None;
        for l in lines.by_ref() {
            let l = l.map_err(|e| Error::Other(e.to_string()))?;
            if let Some(a) = l
                .strip_prefix("listening udp://")
                .or_else(|| l.strip_prefix("listening tcp://"))
            {
                addr = a.parse().ok();
            }
            if l == "ready" {
                break;
            }
        }
        let addr = match addr {
            Some(a) => a,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Command {
                    cmd: line,
                    msg: "linkem did not report its address".into(),
                });
            }
        };
        // Keep draining stdout so linkem never blocks; its stop-time
        // counters go to stderr (test output, bench logs).
        let tag = format!("linkem {addr:?} in {ns}");
        std::thread::spawn(move || {
            for l in lines.map_while(|l| l.ok()) {
                eprintln!("{tag}: {l}");
            }
        });
        self.relays.push(RelayProc { child, addr, args });
        Ok(addr)
    }

    /// The `granary linkem` arguments of the relay listening at `addr` (an
    /// address [`Testbed::udp_path`] or [`Testbed::tcp_path`] returned in
    /// relay mode): what that emulated path was told to do, for tests that
    /// check the emulation's set-up rather than time it.
    pub fn relay_args(&self, addr: SocketAddr) -> Option<&[String]> {
        self.relays
            .iter()
            .find(|r| r.addr == addr)
            .map(|r| r.args.as_slice())
    }

    /// The qdiscs the kernel holds on `host`'s end of `link` (`tc qdisc
    /// show` of its veth, as tc prints them).
    pub fn link_qdiscs(&self, link: LinkId, host: HostId) -> Result<String> {
        self.link_addr(link, host)?;
        let mut c = self.command(host, "tc");
        c.args(["qdisc", "show", "dev", &format!("l{}", link.0)]);
        run(c)
    }

    /// A `Command` that runs `program` inside `host`'s namespace.
    pub fn command(&self, host: HostId, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.command_in(&self.hosts[host.0].ns, program)
    }

    fn command_in(&self, ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).arg(program);
        c
    }

    /// Spawns a command (from [`Testbed::command`]) and keeps it: it is
    /// stopped (SIGTERM, then SIGKILL after 3 s) when the testbed drops.
    /// Returns its pid.
    pub fn spawn(&mut self, mut c: Command) -> Result<u32> {
        let line = cmd_line(&c);
        let child = c.spawn().map_err(|e| Error::Command {
            cmd: line,
            msg: e.to_string(),
        })?;
        let pid = child.id();
        self.children.push(child);
        Ok(pid)
    }

    /// UDP counters of a host's kernel (`/proc/net/snmp`): InErrors,
    /// RcvbufErrors, SndbufErrors — datagrams the kernel dropped, which the
    /// emulator did not.
    pub fn udp_kernel_drops(&self, host: HostId) -> Result<(u64, u64, u64)> {
        let mut c = self.command(host, "cat");
        c.arg("/proc/net/snmp");
        let s = run(c)?;
        let mut udp = s.lines().filter(|l| l.starts_with("Udp:"));
        let (Some(h), Some(v)) = (udp.next(), udp.next()) else {
            return Err(Error::Other("no Udp lines in /proc/net/snmp".into()));
        };
        let get = |k: &str| {
            h.split_whitespace()
                .position(|x| x == k)
                .and_then(|i| v.split_whitespace().nth(i))
                .and_then(|x| x.parse().ok())
                .unwrap_or(0)
        };
        Ok((get("InErrors"), get("RcvbufErrors"), get("SndbufErrors")))
    }

    /// Keeps a child started from [`Testbed::command`] (e.g. one whose
    /// output the caller reads first): it is stopped when the testbed drops.
    pub fn adopt(&mut self, child: Child) {
        self.children.push(child);
    }

    /// A UDP socket bound to `bind` inside `host`'s namespace, with 4 MiB
    /// buffers (a socket
    /// stays in the namespace it was made in, so the caller can use it from
    /// any thread). Made on a short-lived thread that enters the namespace.
    pub fn udp_socket(&self, host: HostId, bind: SocketAddr) -> Result<std::net::UdpSocket> {
        let path = PathBuf::from("/var/run/netns").join(&self.hosts[host.0].ns);
        std::thread::spawn(move || -> Result<std::net::UdpSocket> {
            let f = std::fs::File::open(&path)
                .map_err(|e| Error::Other(format!("{}: {e}", path.display())))?;
            nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| Error::Other(format!("setns {}: {e}", path.display())))?;
            let s = std::net::UdpSocket::bind(bind)
                .map_err(|e| Error::Other(format!("bind {bind}: {e}")))?;
            // Probes must not lose what the link delivered when the machine
            // is busy (capped by net.core.rmem_max).
            let sr = socket2::SockRef::from(&s);
            let _ = sr.set_recv_buffer_size(4 << 20);
            let _ = sr.set_send_buffer_size(4 << 20);
            Ok(s)
        })
        .join()
        .map_err(|_| Error::Other("namespace thread panicked".into()))?
    }
}

fn stop(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let _ = Command::new("kill")
        .arg(child.id().to_string())
        .stderr(Stdio::null())
        .status();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            stop(c);
        }
        for r in self.relays.iter_mut() {
            stop(&mut r.child);
        }
        for s in self.switches.iter().chain(self.hosts.iter().map(|h| &h.ns)) {
            delete_ns(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A qdisc's arguments as (kind, option → value), in tc's syntax.
    fn parse(args: &[String]) -> (String, HashMap<String, String>) {
        assert_eq!(
            args.len() % 2,
            1,
            "{args:?}: a kind, then option/value pairs"
        );
        let opts = args[1..]
            .chunks(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect();
        (args[0].clone(), opts)
    }

    fn number(v: &str, unit: &str) -> f64 {
        v.strip_suffix(unit)
            .unwrap_or_else(|| panic!("{v}: no unit {unit}"))
            .parse()
            .unwrap()
    }

    /// The queue an impairment asks for, as its documentation states it:
    /// the given bytes, else 50 ms at the rate and at least 16 KiB.
    fn queue_of(imp: &Impairment) -> f64 {
        match (imp.queue_bytes, imp.rate_bps) {
            (Some(q), _) => q as f64,
            (None, Some(r)) => (r as f64 / 8.0 * 0.050).max(16384.0),
            (None, None) => unreachable!("every case here has a rate"),
        }
    }

    /// The qdiscs are checked against what the impairment asks for, in
    /// tc's units (tc-netem(8): delay in µs, loss in %, rate in bit/s,
    /// limit in packets; tc-tbf(8): rate in bit/s, burst and limit in
    /// bytes): values derived here from the inputs, not copied from a run.
    #[test]
    fn qdiscs_for_each_emulation() {
        let cases = [
            Impairment {
                delay: Duration::from_millis(10),
                loss: 0.005,
                rate_bps: Some(100_000_000),
                queue_bytes: None,
            },
            Impairment {
                delay: Duration::from_micros(2_500),
                loss: 0.2,
                rate_bps: Some(500_000),
                queue_bytes: None,
            },
            Impairment {
                delay: Duration::from_millis(40),
                loss: 0.0,
                rate_bps: Some(20_000_000),
                queue_bytes: Some(250_000),
            },
        ];
        for imp in &cases {
            let rate = imp.rate_bps.unwrap();
            // netem: every impairment in the kernel.
            let (kind, o) = parse(&qdisc_args(Emulation::Netem, RateBy::Relay, imp).unwrap());
            assert_eq!(kind, "netem");
            assert_eq!(number(&o["delay"], "us"), imp.delay.as_micros() as f64);
            match o.get("loss") {
                Some(l) => assert!((number(l, "%") / 100.0 - imp.loss).abs() < 1e-12, "{l}"),
                None => assert_eq!(imp.loss, 0.0, "loss left out only when there is none"),
            }
            assert_eq!(number(&o["rate"], "bit"), rate as f64);
            // The limit holds the queue plus what is in flight on the delay
            // line, in packets of 1000 bytes, with 10 packets to spare.
            let bytes = queue_of(imp) + rate as f64 / 8.0 * imp.delay.as_secs_f64();
            let limit: f64 = o["limit"].parse().unwrap();
            assert_eq!(limit, (bytes / 1000.0).ceil() + 10.0, "{imp:?}");
            assert_eq!(o.len(), if imp.loss > 0.0 { 4 } else { 3 }, "{o:?}");

            // Relay mode: the kernel only rates, and only with RateBy::Tbf.
            assert_eq!(qdisc_args(Emulation::Relay, RateBy::Relay, imp), None);
            let (kind, o) = parse(&qdisc_args(Emulation::Relay, RateBy::Tbf, imp).unwrap());
            assert_eq!(kind, "tbf");
            assert_eq!(number(&o["rate"], "bit"), rate as f64);
            // burst: 4 ms of traffic (timer slack), at least 3 MTUs.
            let burst: f64 = o["burst"].parse().unwrap();
            assert_eq!(burst, (rate as f64 / 8.0 * 0.004).floor().max(3.0 * 1500.0));
            assert_eq!(o["limit"].parse::<f64>().unwrap(), queue_of(imp).floor());
            assert_eq!(o.len(), 3, "{o:?}");
        }
        // Nothing to impair: no qdisc.
        assert_eq!(
            qdisc_args(Emulation::Netem, RateBy::Relay, &Impairment::default()),
            None
        );
        assert_eq!(
            qdisc_args(Emulation::Relay, RateBy::Tbf, &Impairment::default()),
            None
        );
    }

    #[test]
    fn stale_names_are_recognised_only_in_our_scheme() {
        assert_eq!(our_pid("gtb123x4-router"), Some(123));
        assert_eq!(our_pid("gtb123x4-sw0"), Some(123));
        assert_eq!(our_pid("gtb77probe3"), Some(77));
        assert_eq!(our_pid("gtb123-router"), None);
        assert_eq!(our_pid("gtbx4-a"), None);
        assert_eq!(our_pid("myns"), None);
        assert_eq!(our_pid("gtb12xy-a"), None);
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(u32::MAX));
    }
}
