#![no_main]
//! Certificate decoding and public-key parsing never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let wire = bytes::Bytes::copy_from_slice(data);
    if let Ok(c) = granary_security::Certificate::decode(wire) {
        if let Ok(v) = c.verifier() {
            let _ = v.verify_data(c.data());
        }
        let _ = c.key_name();
        let _ = c.validity().not_after.format();
    }
    let _ = granary_security::keychain::decode_binary_or_base64(data);
});
