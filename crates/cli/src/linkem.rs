//! `granary linkem`: the user-space link emulator (a UDP relay with delay,
//! loss, rate and a bounded queue per direction), for testbeds on kernels
//! without `sch_netem`. The logic lives in `granary_testbed::relay`.

use std::net::SocketAddr;

use clap::Args;
use granary_testbed::relay::{self, Impairment, Relay, RelayConfig};

/// `granary linkem` arguments.
#[derive(Args)]
#[command(after_help = "\
Clients send to --listen; each client gets its own socket towards --to, so the
far side sees one peer per client. \"Up\" is client -> --to, \"down\" the reverse.
--delay/--loss/--rate/--queue set both directions; --up-*/--down-* override one.

Per direction: a datagram is lost with probability LOSS (seeded), else queued
behind the ones before it at RATE (tail drop when QUEUE bytes are waiting), then
delivered DELAY later. Delays are exact on average, within +-0.5 ms each.

Run it inside a namespace on a link, e.g. for a 20 ms RTT, 0.5% loss path to a
node's UDP face on the router:
  ip netns exec router granary linkem --listen 10.1.0.2:6364 \\
      --to 127.0.0.1:6363 --delay 10ms --loss 0.5%
and on the consumer: granary route add /data udp4://10.1.0.2:6364

Prints `listening udp://ADDR` and `ready`; on SIGTERM/SIGINT prints its counters
as one JSON line and exits.")]
pub struct LinkemArgs {
    /// Address clients send to (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// Address datagrams are relayed to.
    #[arg(long, value_name = "ADDR")]
    to: SocketAddr,
    /// One-way delay, both directions (e.g. 10ms, 250us).
    #[arg(long, value_parser = relay::parse_duration)]
    delay: Option<std::time::Duration>,
    /// Loss, both directions (e.g. 0.5% or 0.005).
    #[arg(long, value_parser = relay::parse_loss)]
    loss: Option<f64>,
    /// Rate, both directions (e.g. 100mbit, 500kbit). Default: unlimited.
    #[arg(long, value_parser = relay::parse_rate)]
    rate: Option<u64>,
    /// Queue in front of the rate, bytes (e.g. 256k). Default: 50 ms at the
    /// rate, at least 16 KiB.
    #[arg(long, value_parser = relay::parse_size)]
    queue: Option<u64>,
    /// Client -> upstream delay.
    #[arg(long, value_parser = relay::parse_duration)]
    up_delay: Option<std::time::Duration>,
    /// Client -> upstream loss.
    #[arg(long, value_parser = relay::parse_loss)]
    up_loss: Option<f64>,
    /// Client -> upstream rate.
    #[arg(long, value_parser = relay::parse_rate)]
    up_rate: Option<u64>,
    /// Client -> upstream queue.
    #[arg(long, value_parser = relay::parse_size)]
    up_queue: Option<u64>,
    /// Upstream -> client delay.
    #[arg(long, value_parser = relay::parse_duration)]
    down_delay: Option<std::time::Duration>,
    /// Upstream -> client loss.
    #[arg(long, value_parser = relay::parse_loss)]
    down_loss: Option<f64>,
    /// Upstream -> client rate.
    #[arg(long, value_parser = relay::parse_rate)]
    down_rate: Option<u64>,
    /// Upstream -> client queue.
    #[arg(long, value_parser = relay::parse_size)]
    down_queue: Option<u64>,
    /// Seed of the loss RNG (same seed, same losses for the same arrivals).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Relay TCP instead of UDP: a proxy per connection with the delay and
    /// rate of each direction (no loss; see granary_testbed::tcprelay).
    #[arg(long)]
    tcp: bool,
    /// With --tcp: also relay this port (same port on --listen's and --to's
    /// address), e.g. FTP's passive data ports. Repeatable.
    #[arg(long, value_name = "PORT", requires = "tcp")]
    tcp_port: Vec<u16>,
}

fn dir(
    a: &LinkemArgs,
    delay: Option<std::time::Duration>,
    loss: Option<f64>,
    rate: Option<u64>,
    queue: Option<u64>,
) -> Impairment {
    Impairment {
        delay: delay.or(a.delay).unwrap_or_default(),
        loss: loss.or(a.loss).unwrap_or(0.0),
        rate_bps: rate.or(a.rate),
        queue_bytes: queue.or(a.queue),
    }
}

pub fn run(a: LinkemArgs) -> anyhow::Result<()> {
    let cfg = RelayConfig {
        listen: a.listen,
        upstream: a.to,
        up: dir(&a, a.up_delay, a.up_loss, a.up_rate, a.up_queue),
        down: dir(&a, a.down_delay, a.down_loss, a.down_rate, a.down_queue),
        seed: a.seed,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if a.tcp {
        if cfg.up.loss > 0.0 || cfg.down.loss > 0.0 {
            anyhow::bail!("--tcp relays do not drop (TCP would retransmit inside the relay)");
        }
        let mut pairs = vec![(a.listen, a.to)];
        for p in &a.tcp_port {
            let mut l = a.listen;
            let mut t = a.to;
            l.set_port(*p);
            t.set_port(*p);
            pairs.push((l, t));
        }
        return rt.block_on(async move {
            let bound = granary_testbed::tcprelay::start(&pairs, cfg.up, cfg.down)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", a.listen))?;
            for b in &bound {
                println!("listening tcp://{b}");
            }
            println!("ready");
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate())?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
            Ok(())
        });
    }
    rt.block_on(async move {
        let r = Relay::start(cfg)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", a.listen))?;
        println!("listening udp://{}", r.local_addr());
        println!("ready");
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
        println!("{}", r.stats().json());
        Ok(())
    })
}
