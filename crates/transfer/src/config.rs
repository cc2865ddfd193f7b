//! Fetch parameters, named and defaulted as ndncatchunks / ndnget name them.

use std::time::Duration;

/// Window adaptation algorithm (`--pipeline-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineType {
    /// A fixed window of `pipeline_size` Interests.
    Fixed,
    /// Additive increase, multiplicative decrease.
    Aimd,
    /// CUBIC (RFC 8312 window growth), the default.
    Cubic,
}

impl std::str::FromStr for PipelineType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(PipelineType::Fixed),
            "aimd" => Ok(PipelineType::Aimd),
            "cubic" => Ok(PipelineType::Cubic),
            _ => Err(format!("unknown pipeline type {s:?} (fixed, aimd, cubic)")),
        }
    }
}

impl std::fmt::Display for PipelineType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PipelineType::Fixed => "fixed",
            PipelineType::Aimd => "aimd",
            PipelineType::Cubic => "cubic",
        })
    }
}

/// Engine parameters. `Default` gives ndncatchunks' defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--pipeline-type` (default cubic).
    pub pipeline_type: PipelineType,
    /// `--pipeline-size`: window of the fixed pipeline (default 1).
    pub pipeline_size: usize,
    /// `--init-cwnd` (default 2).
    pub init_cwnd: f64,
    /// `--init-ssthresh` (default: unlimited).
    pub init_ssthresh: f64,
    /// `--aimd-step`: additive increase per RTT (default 1).
    pub aimd_step: f64,
    /// `--aimd-beta`: multiplicative decrease factor (default 0.5).
    pub aimd_beta: f64,
    /// `--cubic-beta` (default 0.7).
    pub cubic_beta: f64,
    /// `--enable-fast-conv`: CUBIC fast convergence (default off).
    pub fast_conv: bool,
    /// `--reset-cwnd-to-init`: after a decrease, restart from `init_cwnd`.
    pub reset_cwnd_to_init: bool,
    /// `--ignore-marks`: do not react to congestion marks.
    pub ignore_marks: bool,
    /// `--disable-cwa`: decrease on every loss, not at most once per RTT.
    pub disable_cwa: bool,
    /// `--rto-alpha` (default 0.125).
    pub rto_alpha: f64,
    /// `--rto-beta` (default 0.25).
    pub rto_beta: f64,
    /// `--rto-k` (default 8).
    pub rto_k: f64,
    /// `--min-rto` (default 200 ms).
    pub min_rto: Duration,
    /// `--max-rto` (default 60 s).
    pub max_rto: Duration,
    /// `--lifetime`: InterestLifetime (default 4 s).
    pub lifetime: Duration,
    /// `--retries`: retransmissions per Interest before giving up (default 15).
    pub retries: u32,
    /// Upper bound on the window (memory guard; not an ndncatchunks flag).
    pub max_cwnd: f64,
    /// Leave slow start when RTT samples rise above the path's minimum by
    /// `clamp(min/8, 4 ms, 16 ms)` (HyStart's delay test, as Linux CUBIC
    /// does), instead of only on loss or a congestion mark; `--no-hystart`
    /// turns it off. Not an ndncatchunks flag.
    pub hystart: bool,
    /// ForwardingHint put on every Interest whose request has none
    /// (`--fwhint`, repeatable; ndnpeek's name), in the order given: a
    /// forwarder outside the producer's region forwards by the first name
    /// it has a route for. Not put on `/localhost` and `/localhop`
    /// Interests (this node's own store and its neighbours' hash indexes).
    pub forwarding_hint: Vec<granary_packet::Name>,
    /// Without `forwarding_hint`: asked which nodes hold an object when its
    /// Interests by name get a NoRoute Nack or go unanswered; the engine then
    /// sends them hinted to the first node, and fails over to the next one on
    /// a Nack or timeouts, keeping every verified segment ([`crate::locate`]).
    pub locator: Option<LocatorRef>,
    /// Timeouts in a row of one Interest (by name or under a hint) after which
    /// the engine looks for, or switches to, another location when it has a
    /// locator (default 2).
    pub failover_timeouts: u32,
    /// The caller reads the output file right back (a replica's ingest):
    /// written back to disk as it comes, but its pages are not dropped from
    /// the page cache (see `Recycler`), so the read costs no disk I/O.
    /// Default off: a download leaves the machine's cache alone.
    pub keep_output_cached: bool,
    /// Record the CRC-32 of every verified segment written to a file output
    /// here (a replica's ingest compares them with the bytes it reads, and
    /// so need not hash them again).
    pub segment_crcs: Option<SegmentCrcs>,
}

/// CRC-32s of the verified segments a fetch wrote, by segment number
/// ([`Config::segment_crcs`]).
#[derive(Debug, Clone, Default)]
pub struct SegmentCrcs(std::sync::Arc<std::sync::Mutex<Vec<Option<u32>>>>);

impl SegmentCrcs {
    /// Records segment `seg`'s bytes.
    pub fn record(&self, seg: u64, bytes: &[u8]) {
        self.set(seg, crc32fast::hash(bytes));
    }

    /// Records segment `seg`'s CRC-32.
    pub fn set(&self, seg: u64, crc: u32) {
        let Ok(mut v) = self.0.lock() else { return };
        let i = seg as usize;
        if v.len() <= i {
            v.resize(i + 1, None);
        }
        v[i] = Some(crc);
    }

    /// Segment `seg`'s CRC-32, if recorded.
    pub fn get(&self, seg: u64) -> Option<u32> {
        self.0.lock().ok()?.get(seg as usize).copied().flatten()
    }

    /// The CRC-32s of segments `0..count`, if every one was recorded.
    pub fn all(&self, count: u64) -> Option<Vec<u32>> {
        let v = self.0.lock().ok()?;
        (0..count as usize)
            .map(|i| v.get(i).copied().flatten())
            .collect()
    }
}

/// A shared [`crate::Locator`] (a newtype so that `Config` stays `Debug`).
#[derive(Clone)]
pub struct LocatorRef(pub std::sync::Arc<dyn crate::Locator>);

impl std::fmt::Debug for LocatorRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Locator")
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pipeline_type: PipelineType::Cubic,
            pipeline_size: 1,
            init_cwnd: 2.0,
            init_ssthresh: f64::MAX,
            aimd_step: 1.0,
            aimd_beta: 0.5,
            cubic_beta: 0.7,
            fast_conv: false,
            reset_cwnd_to_init: false,
            ignore_marks: false,
            disable_cwa: false,
            rto_alpha: 0.125,
            rto_beta: 0.25,
            rto_k: 8.0,
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            lifetime: Duration::from_secs(4),
            retries: 15,
            max_cwnd: 65_536.0,
            hystart: true,
            forwarding_hint: Vec::new(),
            locator: None,
            failover_timeouts: 2,
            keep_output_cached: false,
            segment_crcs: None,
        }
    }
}
