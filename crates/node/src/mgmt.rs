//! The management commands the binary sends a running daemon (`status`,
//! `face`, `route`, `strategy`, `cs`) as NFD management requests, and the
//! small apps `peek` (one Interest) and `serve` (a synthetic producer). Each
//! returns what the daemon answered; the binary prints it.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_app::{Client, Reply};
use granary_mgmt::{
    decode_dataset, ControlParameters, CsInfo, FaceStatus, FibEntry, GeneralStatus, RibEntry,
    StrategyChoice, TlvElement,
};
use granary_packet::{InterestFields, Name};

use crate::control::{create_face_with, dataset, nfd};

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Runs `f` with a client of the daemon at `socket`.
fn with_client<T>(
    socket: &Path,
    f: impl AsyncFnOnce(&mut Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let mut c = Client::connect(socket).await?;
            f(&mut c).await
        })
}

/// Granary's forwarding counters (`status/forwarding`, `key value` lines),
/// `None` from an NFD, which answers no such dataset.
async fn forwarding(c: &mut Client) -> Option<String> {
    let b = dataset(c, "/localhost/nfd/status/forwarding").await.ok()?;
    Some(String::from_utf8_lossy(&b).into_owned())
}

/// `status/general` and Granary's forwarding counters.
pub fn status(socket: &Path) -> anyhow::Result<(GeneralStatus, Option<String>)> {
    with_client(socket, async |c| {
        let g = GeneralStatus::decode(&dataset(c, "/localhost/nfd/status/general").await?)?;
        Ok((g, forwarding(c).await))
    })
}

/// The faces (or face `id`, from faces/query), each with why it is down
/// when it is a permanent face being re-dialled.
pub fn faces(socket: &Path, id: Option<u64>) -> anyhow::Result<Vec<(FaceStatus, Option<String>)>> {
    with_client(socket, async |c| {
        let uri = match id {
            Some(id) => {
                let f = granary_mgmt::FaceQueryFilter {
                    face_id: Some(id),
                    ..Default::default()
                };
                name("/localhost/nfd/faces/query")?
                    .append(&granary_packet::Component::generic(&f.encode()))
            }
            None => name("/localhost/nfd/faces/list")?,
        };
        let faces = decode_dataset::<FaceStatus>(&c.dataset(&uri).await?)?;
        // Permanent faces' state (an NFD has none: every listed face is up).
        let down: Vec<(u64, String)> = forwarding(c)
            .await
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut w = l.splitn(7, ' ');
                (w.next()? == "permanent_face").then_some(())?;
                let id = w.next()?.parse().ok()?;
                (w.next()? == "down").then_some(())?;
                let failures = w.next()?;
                let _redials = w.next()?;
                let _uri = w.next()?;
                let err = w.next().unwrap_or("");
                Some((id, format!("{failures} failed attempts; last: {err}")))
            })
            .collect();
        Ok(faces
            .into_iter()
            .map(|f| {
                let why = down.iter().find(|(id, _)| *id == f.face_id);
                let why = why.map(|(_, w)| w.clone());
                (f, why)
            })
            .collect())
    })
}

/// The listeners (faces/channels).
pub fn channels(socket: &Path) -> anyhow::Result<Vec<String>> {
    with_client(socket, async |c| {
        let chans = decode_dataset::<granary_mgmt::ChannelStatus>(
            &dataset(c, "/localhost/nfd/faces/channels").await?,
        )?;
        Ok(chans.into_iter().map(|ch| ch.local_uri).collect())
    })
}

/// faces/update: congestion marking on or off, its interval and threshold,
/// the face's Data rate (0: measure).
pub fn face_update(
    socket: &Path,
    id: u64,
    marking: Option<bool>,
    interval_ms: Option<u64>,
    threshold: Option<u64>,
    rate: Option<u64>,
) -> anyhow::Result<()> {
    let mut p = ControlParameters::new();
    p.face_id = Some(id);
    p.face_rate = rate;
    if let Some(m) = marking {
        p.set_flag_bit(
            granary_mgmt::values::face_flags::CONGESTION_MARKING_ENABLED,
            m,
            true,
        );
    }
    p.base_congestion_marking_interval = interval_ms.map(|ms| ms * 1_000_000);
    p.default_congestion_threshold = threshold;
    with_client(socket, async |c| {
        c.command(&nfd(), "faces", "update", &p).await?;
        Ok(())
    })
}

/// Creates a face to `uri` (and sets its Data rate); its id.
pub fn face_create(
    socket: &Path,
    uri: &str,
    reliable: bool,
    permanent: bool,
    rate: Option<u64>,
) -> anyhow::Result<u64> {
    with_client(socket, async |c| {
        let id = create_face_with(c, uri, reliable, permanent).await?;
        if let Some(r) = rate {
            let mut p = ControlParameters::new();
            p.face_id = Some(id);
            p.face_rate = Some(r);
            c.command(&nfd(), "faces", "update", &p).await?;
        }
        Ok(id)
    })
}

/// faces/destroy.
pub fn face_destroy(socket: &Path, id: u64) -> anyhow::Result<()> {
    let mut p = ControlParameters::new();
    p.face_id = Some(id);
    with_client(socket, async |c| {
        c.command(&nfd(), "faces", "destroy", &p).await?;
        Ok(())
    })
}

/// The RIB and the FIB.
pub fn routes(socket: &Path) -> anyhow::Result<(Vec<RibEntry>, Vec<FibEntry>)> {
    with_client(socket, async |c| {
        let rib = decode_dataset::<RibEntry>(&dataset(c, "/localhost/nfd/rib/list").await?)?;
        let fib = decode_dataset::<FibEntry>(&dataset(c, "/localhost/nfd/fib/list").await?)?;
        Ok((rib, fib))
    })
}

/// rib/register of `prefix` via `face` (a face id, or a FaceUri whose face
/// is created first); the face id and cost the daemon answered.
pub fn route_add(
    socket: &Path,
    prefix: &str,
    face: &str,
    cost: u64,
    origin: u64,
    reliable: bool,
    permanent: bool,
) -> anyhow::Result<(u64, u64)> {
    with_client(socket, async |c| {
        let face_id = match face.parse::<u64>() {
            Ok(id) => id,
            Err(_) => create_face_with(c, face, reliable, permanent).await?,
        };
        let mut p = ControlParameters::new();
        p.name = Some(name(prefix)?);
        p.face_id = Some(face_id);
        p.cost = Some(cost);
        p.origin = Some(origin);
        let r = c.command(&nfd(), "rib", "register", &p).await?;
        Ok((r.face_id.unwrap_or(face_id), r.cost.unwrap_or(cost)))
    })
}

/// rib/unregister.
pub fn route_remove(socket: &Path, prefix: &str, face: u64, origin: u64) -> anyhow::Result<()> {
    let mut p = ControlParameters::new();
    p.name = Some(name(prefix)?);
    p.face_id = Some(face);
    p.origin = Some(origin);
    with_client(socket, async |c| {
        c.command(&nfd(), "rib", "unregister", &p).await?;
        Ok(())
    })
}

/// strategy-choice/set (`strategy` a name, or NFD's short form) when given,
/// then the strategy choices: the strategy set (as answered) and the list.
pub fn strategy(
    socket: &Path,
    set: Option<(&str, &str)>,
) -> anyhow::Result<(Option<String>, Vec<StrategyChoice>)> {
    with_client(socket, async |c| {
        let mut chosen = None;
        if let Some((prefix, s)) = set {
            let full = if s.starts_with('/') {
                s.to_string()
            } else {
                format!("/localhost/nfd/strategy/{s}")
            };
            let mut p = ControlParameters::new();
            p.name = Some(name(prefix)?);
            p.strategy = Some(name(&full)?);
            let r = c.command(&nfd(), "strategy-choice", "set", &p).await?;
            chosen = Some(r.strategy.map(|s| s.to_string()).unwrap_or(full));
        }
        let list = decode_dataset::<StrategyChoice>(
            &dataset(c, "/localhost/nfd/strategy-choice/list").await?,
        )?;
        Ok((chosen, list))
    })
}

/// cs/erase under `prefix` (at most `count`): how many were erased.
pub fn cs_erase(socket: &Path, prefix: &str, count: Option<u64>) -> anyhow::Result<u64> {
    let mut p = ControlParameters::new();
    p.name = Some(name(prefix)?);
    p.count = count;
    with_client(socket, async |c| {
        let r = c.command(&nfd(), "cs", "erase", &p).await?;
        Ok(r.count.unwrap_or(0))
    })
}

/// cs/config when anything is to change (capacity, admit, serve, the
/// replacement policy, a Granary extension), then cs/info: the policy the
/// daemon answered and the Content Store's state.
pub fn cs(
    socket: &Path,
    capacity: Option<u64>,
    admit: Option<bool>,
    serve: Option<bool>,
    policy: Option<&str>,
    config: bool,
) -> anyhow::Result<(Option<String>, CsInfo)> {
    with_client(socket, async |c| {
        let mut set = None;
        if config {
            let mut p = ControlParameters::new();
            p.capacity = capacity;
            if let Some(pol) = policy {
                p.strategy = Some(name(&format!(
                    "{}/{pol}",
                    granary_forwarder::vip::CS_POLICY_PREFIX
                ))?);
            }
            let (mut flags, mut mask) = (0, 0);
            if let Some(a) = admit {
                mask |= 1;
                flags |= a as u64;
            }
            if let Some(s) = serve {
                mask |= 2;
                flags |= (s as u64) << 1;
            }
            if mask != 0 {
                p.flags = Some(flags);
                p.mask = Some(mask);
            }
            let r = c.command(&nfd(), "cs", "config", &p).await?;
            set = r
                .strategy
                .map(|s| s.to_string().rsplit('/').next().unwrap_or("").to_string());
        }
        let i = CsInfo::decode(&dataset(c, "/localhost/nfd/cs/info").await?)?;
        Ok((set, i))
    })
}

/// One Interest through the daemon: what came back, and after how long.
pub fn peek(socket: &Path, f: InterestFields) -> anyhow::Result<(Reply, Duration)> {
    with_client(socket, async |c| {
        let t = Instant::now();
        let r = c.express(f).await?;
        Ok((r, t.elapsed()))
    })
}

/// Content of `size` bytes derived from a name (SHA-256 of its URI, repeated).
pub fn synthetic_content(name: &Name, size: usize) -> Vec<u8> {
    let seed = granary_packet::sha256(name.to_string().as_bytes());
    seed.iter().copied().cycle().take(size).collect()
}

/// `granary serve`: registers `prefix` and answers every Interest under it
/// with [`synthetic_content`] of `size` bytes (DigestSha256, `freshness`
/// ms), after `delay_ms`; `ready` once registered, `served` per answer.
pub fn serve(
    socket: &Path,
    prefix: &Name,
    size: usize,
    freshness: u64,
    delay_ms: u64,
    ready: impl FnOnce(),
    mut served: impl FnMut(&Name),
) -> anyhow::Result<()> {
    with_client(socket, async |c| {
        c.register(prefix).await?;
        ready();
        c.serve(|i| {
            if delay_ms > 0 {
                std::thread::sleep(Duration::from_millis(delay_ms));
            }
            served(&i.name);
            let b = granary_packet::DataBuilder::new(i.name.clone())
                .content(synthetic_content(&i.name, size))
                .freshness_period(freshness);
            b.sign_with(32, |m| {
                Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(&granary_packet::sha256(
                    m,
                )))
            })
            .ok()
        })
        .await?;
        Ok(())
    })
}

/// `granary status`'s text: the general status and, from a Granary daemon,
/// its forwarding counters (`fwd`, `key value` lines).
pub fn status_text(g: &GeneralStatus, fwd: Option<&str>) -> String {
    let up = (g.current_timestamp.saturating_sub(g.start_timestamp)) / 1000;
    let mut out = format!(
        "version          {}\nuptime           {up} s\nfib entries      {}\npit entries      {}\ncs entries       {}\n",
        g.nfd_version, g.n_fib_entries, g.n_pit_entries, g.n_cs_entries
    );
    out += &format!(
        "interests        in {}  out {}\ndata             in {}  out {}\nnacks            in {}  out {}\n",
        g.n_in_interests, g.n_out_interests, g.n_in_data, g.n_out_data, g.n_in_nacks, g.n_out_nacks
    );
    out += &format!(
        "satisfied        {}  unsatisfied {}\n",
        g.n_satisfied_interests, g.n_unsatisfied_interests
    );
    if let Some(text) = fwd {
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(' '))
                .unwrap_or("?")
                .to_string()
        };
        out += &format!(
            "hinted           forwarded {}  stripped in region {}\nno-route nacks   {}\n",
            get("hinted_interests"),
            get("hint_stripped"),
            get("no_route_nacks")
        );
    }
    out
}

/// `granary face list`'s line for a face (`down`: why a permanent face is
/// down).
pub fn face_line(f: &FaceStatus, down: Option<&str>) -> String {
    use granary_mgmt::values::{face_flags, face_persistency};
    let persistency = match f.face_persistency {
        face_persistency::ON_DEMAND => "on-demand",
        face_persistency::PERSISTENT => "persistent",
        face_persistency::PERMANENT => "permanent",
        _ => "?",
    };
    let state = match down {
        Some(why) => format!("down ({why})"),
        None => "up".to_string(),
    };
    let flag = |bit: u64, word: &'static str| if f.flags & bit != 0 { word } else { "" };
    format!(
        "faceid={} remote={} local={} scope={} persistency={} state={} in={}i/{}d/{}n out={}i/{}d/{}n bytes={}/{}{}{}{}{}",
        f.face_id,
        f.uri,
        f.local_uri,
        if f.face_scope == 1 { "local" } else { "non-local" },
        persistency,
        state,
        f.n_in_interests,
        f.n_in_data,
        f.n_in_nacks,
        f.n_out_interests,
        f.n_out_data,
        f.n_out_nacks,
        f.n_in_bytes,
        f.n_out_bytes,
        flag(face_flags::LP_RELIABILITY_ENABLED, " reliable"),
        flag(face_flags::CONGESTION_MARKING_ENABLED, " congestion-marking"),
        f.n_out_congestion_marks
            .map(|n| format!(" marked={n}"))
            .unwrap_or_default(),
        f.vip_capacity
            .map(|v| format!(" vip-capacity={v}/period"))
            .unwrap_or_default()
    )
}

/// `granary route list`'s text: every RIB route, then every FIB entry.
pub fn routes_text(rib: &[RibEntry], fib: &[FibEntry]) -> String {
    let mut out = String::new();
    for r in rib {
        for rt in &r.routes {
            out += &format!(
                "route {} face={} origin={} cost={} flags={}\n",
                r.name, rt.face_id, rt.origin, rt.cost, rt.flags
            );
        }
    }
    for f in fib {
        let hops: Vec<String> = f
            .next_hops
            .iter()
            .map(|h| format!("{}({})", h.face_id, h.cost))
            .collect();
        out += &format!("fib {} nexthops={}\n", f.name, hops.join(","));
    }
    out
}
