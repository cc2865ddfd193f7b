#![no_main]
//! Any manifest root content (and a block after it): refused or decoded and
//! re-encoded alike; the checker never panics nor sizes itself by the counts
//! the root claims.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| granary_manifest::fuzzing::root(data));
