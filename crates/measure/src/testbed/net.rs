//! The experiment's network: namespaces and links from the file, a Granary
//! daemon in every node, faces and routes along shortest paths, and (for
//! TCP baselines) static IP routes.

use std::collections::{HashMap, VecDeque};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;
use granary_testbed::{HostId, LanId, LinkId, LinkSpec, Options, Testbed};

use super::experiment::{link_spec, Experiment};

/// A daemon in a node.
pub struct Node {
    pub dir: PathBuf,
    pub socket: PathBuf,
}

/// How two adjacent nodes are connected.
#[derive(Clone, Copy)]
enum Via {
    Link(LinkId),
    Lan(LanId),
}

/// The running network.
pub struct Net {
    pub tb: Testbed,
    pub g: PathBuf,
    pub hosts: HashMap<String, HostId>,
    pub nodes: HashMap<String, Node>,
    pub order: Vec<String>,
    adj: HashMap<String, Vec<(String, Via)>>,
    faces: HashMap<(String, String), String>,
}

impl Net {
    /// Builds namespaces, links and LANs and starts a daemon in each node
    /// with the file's flags plus `extra(node)`.
    pub fn build(
        e: &Experiment,
        work: &Path,
        tag: &str,
        extra: &dyn Fn(&str) -> Vec<String>,
    ) -> anyhow::Result<Net> {
        let g = std::env::current_exe().context("locating the granary binary")?;
        let mut opts = Options::new(&g);
        opts.seed = e.random_seed;
        let mut tb = Testbed::new(opts)?;
        let mut hosts = HashMap::new();
        for n in &e.node {
            hosts.insert(n.name.clone(), tb.add_host(&n.name)?);
        }
        let mut adj: HashMap<String, Vec<(String, Via)>> = HashMap::new();
        for l in &e.link {
            let spec = link_spec(l).map_err(|m| anyhow::anyhow!(m))?;
            let id = tb.link(hosts[&l.a], hosts[&l.b], spec)?;
            adj.entry(l.a.clone())
                .or_default()
                .push((l.b.clone(), Via::Link(id)));
            adj.entry(l.b.clone())
                .or_default()
                .push((l.a.clone(), Via::Link(id)));
        }
        for members in &e.lan {
            let ids: Vec<HostId> = members.iter().map(|m| hosts[m]).collect();
            let id = tb.lan(&ids, LinkSpec::clean())?;
            for a in members {
                for b in members {
                    if a != b {
                        adj.entry(a.clone())
                            .or_default()
                            .push((b.clone(), Via::Lan(id)));
                    }
                }
            }
        }
        let mut net = Net {
            tb,
            g,
            hosts,
            nodes: HashMap::new(),
            order: e.node.iter().map(|n| n.name.clone()).collect(),
            adj,
            faces: HashMap::new(),
        };
        for n in &e.node {
            let mut args = n.args.clone();
            args.extend(extra(&n.name));
            let node = net.start_node(&n.name, work, tag, &args)?;
            net.nodes.insert(n.name.clone(), node);
        }
        Ok(net)
    }

    fn start_node(
        &mut self,
        name: &str,
        work: &Path,
        tag: &str,
        extra: &[String],
    ) -> anyhow::Result<Node> {
        let dir = work.join(format!("{tag}-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("g.sock");
        let mut c = self.tb.command(self.hosts[name], &self.g);
        c.arg("--data-dir")
            .arg(&dir)
            .arg("--socket")
            .arg(&socket)
            .args(["daemon", "--listen", "udp://0.0.0.0:6363"])
            .args(extra)
            .env("GRANARY_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = c.spawn().context("starting a daemon")?;
        let out = child.stdout.take().context("daemon stdout")?;
        self.tb.adopt(child);
        let mut lines = std::io::BufReader::new(out).lines();
        let mut ready = false;
        for l in lines.by_ref() {
            if l? == "ready" {
                ready = true;
                break;
            }
        }
        if !ready {
            anyhow::bail!("the daemon in {name} exited before it was ready (flags {extra:?})");
        }
        std::thread::spawn(move || for _ in lines.by_ref() {});
        Ok(Node { dir, socket })
    }

    /// The CLI pointed at `node`'s daemon.
    pub fn cmd(&self, node: &str, args: &[&str]) -> Command {
        let n = &self.nodes[node];
        let mut c = Command::new(&self.g);
        c.arg("--data-dir")
            .arg(&n.dir)
            .arg("--socket")
            .arg(&n.socket)
            .args(args);
        c
    }

    /// Runs the CLI against `node`; an error carries its stderr.
    pub fn cli(&self, node: &str, args: &[&str]) -> anyhow::Result<String> {
        let o = self.cmd(node, args).output()?;
        if !o.status.success() {
            anyhow::bail!(
                "granary {} (on {node}): {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// A command run inside `node`'s namespace.
    pub fn in_node(&self, node: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.tb.command(self.hosts[node], program)
    }

    /// The face URI `from` dials to reach `to`'s daemon (over the link's
    /// emulation: a relay in relay mode). One per pair, reused.
    pub fn face_uri(&mut self, from: &str, to: &str) -> anyhow::Result<String> {
        if let Some(u) = self.faces.get(&(from.to_string(), to.to_string())) {
            return Ok(u.clone());
        }
        let via = self
            .adj
            .get(from)
            .and_then(|v| v.iter().find(|(n, _)| n == to))
            .map(|(_, v)| *v)
            .ok_or_else(|| anyhow::anyhow!("{from} and {to} are not neighbours"))?;
        let uri = match via {
            Via::Link(l) => format!("udp4://{}", self.tb.udp_path(l, self.hosts[from], 6363)?),
            Via::Lan(l) => format!("udp4://{}:6363", self.tb.lan_addr(l, self.hosts[to])?),
        };
        self.faces
            .insert((from.to_string(), to.to_string()), uri.clone());
        Ok(uri)
    }

    /// Configures every face made so far with its link's Data rate (the
    /// direction Data comes in: from the face's far end), which VIP turns
    /// into the face's capacity (`face update --rate`). LAN faces keep the
    /// measured rate.
    pub fn set_face_rates(&self, e: &Experiment) -> anyhow::Result<()> {
        let mut by_node: HashMap<&str, Vec<(&str, u64)>> = HashMap::new();
        for ((from, to), uri) in &self.faces {
            let Some(l) = e
                .link
                .iter()
                .find(|l| (l.a == *from && l.b == *to) || (l.a == *to && l.b == *from))
            else {
                continue;
            };
            let rate = if l.a == *to {
                l.rate.as_ref()
            } else {
                l.rate_back.as_ref().or(l.rate.as_ref())
            };
            let Some(rate) = rate else { continue };
            let bps = granary_testbed::relay::parse_rate(rate)
                .map_err(|m| anyhow::anyhow!("link {}-{}: {m}", l.a, l.b))?;
            by_node.entry(from).or_default().push((uri, bps));
        }
        for (node, faces) in by_node {
            let list = self.cli(node, &["face", "list"])?;
            for (uri, bps) in faces {
                let id = list
                    .lines()
                    .find(|l| {
                        l.split_whitespace()
                            .any(|w| w.strip_prefix("remote=") == Some(uri))
                    })
                    .and_then(|l| l.split_whitespace().next()?.strip_prefix("faceid="))
                    .ok_or_else(|| anyhow::anyhow!("{node}: no face to {uri}"))?;
                self.cli(node, &["face", "update", id, "--rate", &bps.to_string()])?;
            }
        }
        Ok(())
    }

    /// Hop counts from every node to the nearest of `origins`.
    pub fn distances(&self, origins: &[String]) -> HashMap<String, usize> {
        let mut d = HashMap::new();
        let mut q = VecDeque::new();
        for o in origins {
            d.insert(o.clone(), 0);
            q.push_back(o.clone());
        }
        while let Some(n) = q.pop_front() {
            let dn = d[&n];
            for (m, _) in self.adj.get(&n).into_iter().flatten() {
                if !d.contains_key(m) {
                    d.insert(m.clone(), dn + 1);
                    q.push_back(m.clone());
                }
            }
        }
        d
    }

    /// Routes `prefix` towards `origins` on every other node: via each
    /// neighbour that is strictly closer (loop-free, all shortest and
    /// downhill paths), cost = 1 + the neighbour's distance.
    pub fn route_to(&mut self, prefix: &str, origins: &[String]) -> anyhow::Result<()> {
        let d = self.distances(origins);
        for n in self.order.clone() {
            let Some(&dn) = d.get(&n) else { continue };
            if dn == 0 {
                continue;
            }
            let mut next: Vec<(String, usize)> = self.adj[&n]
                .iter()
                .filter_map(|(m, _)| d.get(m).filter(|dm| **dm < dn).map(|dm| (m.clone(), *dm)))
                .collect();
            next.sort();
            next.dedup();
            for (m, dm) in next {
                let uri = self.face_uri(&n, &m)?;
                self.cli(
                    &n,
                    &[
                        "route",
                        "add",
                        prefix,
                        &uri,
                        "--cost",
                        &(dm + 1).to_string(),
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// Static IP routes along shortest paths and forwarding in every
    /// namespace, so TCP baselines cross the same links as NDN.
    pub fn ip_routing(&mut self) -> anyhow::Result<()> {
        // Each link's subnet is 10.1.<id>.0/24; LANs 10.2.<id>.0/24.
        let mut subnets: Vec<(String, String, String)> = Vec::new(); // (subnet, end a, end b)
        for (a, list) in &self.adj {
            for (b, via) in list {
                if let Via::Link(l) = via {
                    let addr = self.tb.link_addr(*l, self.hosts[a])?;
                    let o = addr.octets();
                    let s = format!("{}.{}.{}.0/24", o[0], o[1], o[2]);
                    if !subnets.iter().any(|x| x.0 == s) {
                        subnets.push((s, a.clone(), b.clone()));
                    }
                }
            }
        }
        for n in self.order.clone() {
            let mut c = self.in_node(&n, "sysctl");
            c.args(["-q", "-w", "net.ipv4.ip_forward=1"]);
            granary_testbed::run(c)?;
            for (subnet, a, b) in &subnets {
                if *a == n || *b == n {
                    continue;
                }
                let d = self.distances(&[a.clone(), b.clone()]);
                let Some(&dn) = d.get(&n) else { continue };
                let Some((hop, via)) = self.adj[&n]
                    .iter()
                    .find(|(m, _)| d.get(m).is_some_and(|dm| *dm < dn))
                    .cloned()
                else {
                    continue;
                };
                let gw = match via {
                    Via::Link(l) => self.tb.link_addr(l, self.hosts[&hop])?,
                    Via::Lan(l) => self.tb.lan_addr(l, self.hosts[&hop])?,
                };
                let mut c = self.in_node(&n, "ip");
                c.args(["route", "add", subnet, "via", &gw.to_string()]);
                granary_testbed::run(c)?;
            }
        }
        Ok(())
    }

    /// A TCP path from `from` to the neighbour `to` (relay in relay mode)
    /// for `ports`; the address to connect to.
    pub fn tcp_path(
        &mut self,
        from: &str,
        to: &str,
        ports: &[u16],
    ) -> anyhow::Result<std::net::Ipv4Addr> {
        let via = self
            .adj
            .get(from)
            .and_then(|v| v.iter().find(|(n, _)| n == to))
            .map(|(_, v)| *v)
            .ok_or_else(|| anyhow::anyhow!("{from} and {to} are not neighbours"))?;
        match via {
            Via::Link(l) => Ok(self.tb.tcp_path(l, self.hosts[from], ports)?),
            Via::Lan(_) => anyhow::bail!("TCP paths are for links, not LANs"),
        }
    }

    /// Face counters of every node: (node, FaceStatus) for UDP faces.
    pub fn udp_faces(&self) -> anyhow::Result<Vec<(String, granary_mgmt::FaceStatus)>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut out = Vec::new();
        for n in &self.order {
            let sock = self.nodes[n].socket.clone();
            let faces = rt.block_on(async move {
                let mut c = granary_app::Client::connect(&sock).await?;
                let raw = c
                    .dataset(&granary_packet::Name::from_uri(
                        "/localhost/nfd/faces/list",
                    )?)
                    .await?;
                anyhow::Ok(granary_mgmt::decode_dataset::<granary_mgmt::FaceStatus>(
                    &raw,
                )?)
            })?;
            for f in faces {
                if f.uri.starts_with("udp") {
                    out.push((n.clone(), f));
                }
            }
        }
        Ok(out)
    }
}
