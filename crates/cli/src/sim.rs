//! `granary sim`: the arguments; the simulator is `granary_measure::sim`.

use std::path::PathBuf;

use granary_measure::sim as m;

/// `granary sim …`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    #[command(subcommand)]
    cmd: SimCmd,
}

#[derive(clap::Subcommand, Debug)]
enum SimCmd {
    /// Cache-policy study: drive the forwarder's Content Store with Zipf
    /// (IRM) requests or a trace, sweep policies and parameters, write CSV
    /// and an SVG plot.
    ///
    /// Every list option (comma-separated) is swept: one run per
    /// combination. Examples (the climate seed's Fig. 7):
    ///
    ///   granary sim cache --cache 10,20,50,100,200,500,1000 --objects 2000,5000 --out fig7a
    ///
    ///   granary sim cache --chunks 1000 --objects 10,20,40 --consumers 10,20,30 --cache 4000 --x consumers --out fig7b
    Cache(CacheArgs),
    /// Network study of VIP (Yeh et al., ICN 2014): the forwarder's own VIP,
    /// Content Store and strategy choice on every node of a topology
    /// (abilene, geant, fattree, diamond, or a file), discrete events, one
    /// object per request; VIP against LRU, LFU, FIFO, UNIF, BIAS with
    /// shortest-path (+sp) or potential-based (+pb) forwarding. Writes the
    /// mean delay and cache-hit ratio against the arrival rate.
    ///
    ///   granary sim vip --topology abilene --rate 10,20,40,60,80,100 --out DIR
    Vip(VipArgs),
}

/// `granary sim vip` options (every list is swept).
#[derive(clap::Args, Debug, Clone)]
pub struct VipArgs {
    /// Topology: abilene (11 nodes), geant (22), fattree (20), diamond (4),
    /// or a file of `node N` / `link A B [capacity factor]` / `source N` /
    /// `consumer N` lines.
    #[arg(long, default_value = "abilene")]
    pub topology: String,
    /// Variants: vip, or lru|lfu|fifo|unif|bias with +sp (shortest path)
    /// or +pb (potential-based). For ablations the cache may be vip with
    /// a baseline's forwarding (vip+sp) and the forwarding vip with a
    /// baseline's cache (lfu+vip).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "vip,lru+sp,lfu+sp,fifo+sp,unif+sp,bias+sp,lru+pb,lfu+pb"
    )]
    pub variants: Vec<granary_measure::simvip::Variant>,
    /// Number of data objects.
    #[arg(long, value_delimiter = ',', default_value = "5000")]
    pub objects: Vec<usize>,
    /// Zipf exponent of object popularity.
    #[arg(long, value_delimiter = ',', default_value = "0.75")]
    pub alpha: Vec<f64>,
    /// Object size in MB.
    #[arg(long, default_value_t = 5.0)]
    pub object_mb: f64,
    /// Link capacity in Mb/s (per link, scaled by the topology file).
    #[arg(long, value_delimiter = ',', default_value = "500")]
    pub link_mbps: Vec<f64>,
    /// Cache size per node, in objects.
    #[arg(long, value_delimiter = ',', default_value = "5")]
    pub cache: Vec<usize>,
    /// Requests per second per requesting node (the x axis).
    #[arg(long, value_delimiter = ',', default_value = "10,20,30,40,50")]
    pub rate: Vec<f64>,
    /// Seconds of requests.
    #[arg(long, default_value_t = 100.0)]
    pub duration: f64,
    /// Seconds before requests are counted.
    #[arg(long, default_value_t = 20.0)]
    pub warmup: f64,
    /// VIP slot (exchange period), seconds.
    #[arg(long, default_value_t = 1.0)]
    pub slot: f64,
    /// VIPs a cached object drains per slot (the paper's r_n): node (what
    /// all the node's links carry together, in objects per slot), link
    /// (what its fastest link carries) or a number.
    #[arg(long, default_value = "node")]
    pub vip_drain: granary_measure::simvip::Drain,
    /// Which Data a VIP cache admits: replace (Yeh et al.'s stable
    /// caching, the forwarder's rule: cache while there is room, else
    /// replace the lowest-scored cached object if the new one scores
    /// higher) or set (only objects of the VIP cache set; those leaving it
    /// are erased: the rule before decision 0099).
    #[arg(long, default_value = "replace")]
    pub vip_admit: granary_measure::simvip::Admission,
    /// How many objects' VIPs a link carries per slot: one (the object
    /// with the largest backpressure differential, the paper's rule) or
    /// fill (objects by differential until the link's capacity is used).
    #[arg(long, default_value = "one", value_parser = ["one", "fill"])]
    pub vip_links: String,
    /// How VIP cache scores forget: K per second, the exponentially
    /// decaying sum of Yeh et al.'s NFD implementation (each slot, the score
    /// times e^(−K·slot), plus the slot's VIP inflow; their kDecayParam:
    /// 0.01, later 0.001; the forwarder's default, decision 0104), or ewma:
    /// weight 0.2 per slot (a memory of about five slots, the rule before
    /// decision 0104).
    #[arg(long, value_name = "K|ewma", default_value = "0.01")]
    pub vip_score_decay: granary_measure::simvip::ScoreDecay,
    /// Seed (sources, requests, random replacement).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write DIR/vip.csv and TOPOLOGY-delay.{svg,png}, TOPOLOGY-hits.{svg,png}
    /// (a -N suffix per parameter group). Without it the CSV goes to
    /// standard output.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `granary sim cache` options.
#[derive(clap::Args, Debug, Clone)]
pub struct CacheArgs {
    /// Replacement policies (lru, lfu, fifo, random, vip: admission and
    /// eviction by the forwarder's VIP cache scores, a period every 100
    /// requests, the source as the one upstream).
    #[arg(long, value_delimiter = ',', default_value = "lru,lfu,fifo,random")]
    pub policy: Vec<granary_forwarder::cs::Policy>,
    /// Zipf skew α (popularity of rank i ∝ 1/i^α).
    #[arg(long, value_delimiter = ',', default_value = "1.15")]
    pub alpha: Vec<f64>,
    /// Catalog size: number of objects.
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    pub objects: Vec<usize>,
    /// Chunks per object (a consumer fetches a drawn object's chunks in
    /// order). 1 = pure IRM over objects.
    #[arg(long, default_value_t = 1)]
    pub chunks: usize,
    /// Cache sizes, in packets.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10,20,50,100,200,500,1000"
    )]
    pub cache: Vec<usize>,
    /// Requests issued by each consumer.
    #[arg(long, default_value_t = 1_000_000)]
    pub requests: u64,
    /// Number of consumers (interleaved one request at a time).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub consumers: Vec<usize>,
    /// Fraction of the requests run before hits are counted.
    #[arg(long, default_value_t = 0.1)]
    pub warmup: f64,
    /// Replay this trace (one name per line) instead of Zipf requests;
    /// --alpha, --objects, --chunks and --consumers are then ignored.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Seed of the request generator and of the Random policy.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Parameter on the plot's x axis (default: the swept one with the most
    /// values).
    #[arg(long, value_enum)]
    pub x: Option<Axis>,
    /// Write DIR/cache.csv, DIR/cache.svg and DIR/cache.png (created if needed). Without
    /// it the CSV goes to standard output.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// A swept parameter.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Cache,
    Alpha,
    Objects,
    Consumers,
}

/// `granary sim …`.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let a = match args.cmd {
        SimCmd::Cache(a) => a,
        SimCmd::Vip(v) => {
            return granary_measure::simvip::vip(granary_measure::simvip::VipParams {
                topology: v.topology,
                variants: v.variants,
                objects: v.objects,
                alpha: v.alpha,
                object_mb: v.object_mb,
                link_mbps: v.link_mbps,
                cache: v.cache,
                rate: v.rate,
                duration: v.duration,
                warmup: v.warmup,
                slot: v.slot,
                vip_drain: v.vip_drain,
                vip_admit: v.vip_admit,
                vip_fill_links: v.vip_links == "fill",
                vip_score_decay: v.vip_score_decay,
                seed: v.seed,
                out: v.out,
            })
        }
    };
    m::cache(m::CacheParams {
        policy: a.policy,
        alpha: a.alpha,
        objects: a.objects,
        chunks: a.chunks,
        cache: a.cache,
        requests: a.requests,
        consumers: a.consumers,
        warmup: a.warmup,
        trace: a.trace,
        seed: a.seed,
        x: a.x.map(|x| match x {
            Axis::Cache => m::Axis::Cache,
            Axis::Alpha => m::Axis::Alpha,
            Axis::Objects => m::Axis::Objects,
            Axis::Consumers => m::Axis::Consumers,
        }),
        out: a.out,
    })
}
