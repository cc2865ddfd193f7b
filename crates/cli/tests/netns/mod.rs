//! Shared set-up for the network-namespace tests: they need root and
//! iproute2. Missing either is a failure with the reason; only an explicit
//! `GRANARY_SKIP_NETNS=1` skips them, loudly.
#![allow(dead_code)]

use granary_testbed::{Options, Testbed};

/// A testbed, or None when the user asked to skip netns tests.
pub fn testbed(opts: impl FnOnce(&mut Options)) -> Option<Testbed> {
    if std::env::var("GRANARY_SKIP_NETNS").as_deref() == Ok("1") {
        eprintln!(
            "\n!!!!!!!! SKIPPED: netns test (GRANARY_SKIP_NETNS=1); nothing was tested !!!!!!!!\n"
        );
        return None;
    }
    let mut o = Options::new(env!("CARGO_BIN_EXE_granary"));
    opts(&mut o);
    match Testbed::new(o) {
        Ok(t) => Some(t),
        Err(e) => panic!(
            "{e}\nThe netns tests need root and iproute2 (CI runs as root). \
             Set GRANARY_SKIP_NETNS=1 to skip them explicitly."
        ),
    }
}
