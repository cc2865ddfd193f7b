//! `granary testbed`: the arguments; the experiments are `granary_measure::testbed`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `granary testbed` arguments.
#[derive(Args)]
pub struct TestbedArgs {
    #[command(subcommand)]
    cmd: TestbedCmd,
}

#[derive(Subcommand)]
enum TestbedCmd {
    /// Run an experiment file: builds its namespaces and links, starts a
    /// node in each, runs the sweep with the baselines and writes
    /// DIR/report.md, DIR/*.csv, DIR/*.svg and DIR/*.png. Needs root.
    #[command(after_help = "\
Shipped experiments (experiments/*.toml):
  pipeline         window size x packet size over 100 Mbit/s, 20 ms RTT; fixed, AIMD, CUBIC
  caching-vs-http  4 consumers behind a gateway: NDN with the gateway's CS vs nginx (HTTP)
                   and vsftpd (FTP) over the same emulated path
  carepo           two similar files over a slow WAN: by name vs hash-based dedup fetch
  vip              VIP forwarding+caching vs best-route with LRU / LFU on 7 nodes, 2 origins

Everything (namespaces, daemons, relays, servers) is removed on exit and on Ctrl-C.")]
    Run {
        /// The experiment file.
        file: PathBuf,
        /// Output directory (created; files in it are replaced).
        #[arg(long)]
        out: PathBuf,
        /// Apply the file's [tiny] overrides: a run of a few seconds.
        #[arg(long)]
        tiny: bool,
    },
}

/// `granary testbed …`.
pub fn run(a: TestbedArgs) -> anyhow::Result<()> {
    match a.cmd {
        TestbedCmd::Run { file, out, tiny } => granary_measure::testbed::run(&file, &out, tiny),
    }
}
