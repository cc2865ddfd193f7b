#![no_main]
//! NFD management: ControlParameters, ControlResponse, datasets,
//! ForwarderStatus, command Interests: never panic; what decodes re-encodes
//! to the same fields.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| granary_mgmt::fuzz_oracle(data));
