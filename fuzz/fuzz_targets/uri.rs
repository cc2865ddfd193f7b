#![no_main]
//! Decoder oracle for uri: never panics; what decodes re-encodes to the same fields.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| granary_packet::fuzzing::uri(data));
