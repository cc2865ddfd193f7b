//! `granary selfcheck`: a quick end-to-end check of this build (the checks
//! are `granary_node::selfcheck`).

pub fn run() -> anyhow::Result<()> {
    println!("granary {} self-check", env!("CARGO_PKG_VERSION"));
    let r = granary_node::selfcheck::run()?;
    for a in &r.algorithms {
        println!(
            "  {:<8} sign+verify {}  tamper {}  signed-interest {}  replay {}  ~{:.0} signs/s (8 KiB Data)",
            a.name,
            if a.sign_verify { "ok" } else { "FAIL" },
            if a.tamper_caught { "caught" } else { "MISSED" },
            if a.signed_interest { "ok" } else { "FAIL" },
            if a.replay_caught { "caught" } else { "MISSED" },
            a.signs_per_s
        );
    }
    println!(
        "  digest   sign+verify {}  8 KiB Data decode ~{:.2} M/s",
        if r.digest { "ok" } else { "FAIL" },
        r.decodes_per_s / 1e6
    );
    let failures = r.failures();
    anyhow::ensure!(failures == 0, "{failures} check(s) failed");
    println!("all checks passed");
    Ok(())
}
