#![no_main]
//! A publisher's whole manifest tree over any level 0: the checker takes the
//! blocks in order or refuses one, and places what it takes inside the file.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| granary_manifest::fuzzing::tree(data));
