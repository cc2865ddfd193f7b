#![no_main]
//! ndn-python-repo command parameters, responses and notifications: never
//! panic; what decodes re-encodes to the same fields.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| granary_repo::command::fuzz_oracle(data));
