#![no_main]
//! Any byte string: the TLV reader and dissection tree never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| granary_packet::fuzzing::tlv(data));
