//! Storing manifests: build, sign and keep the manifest of a stored version
//! (`<file>.levels`, `<file>.manifest` beside it), and re-sign its root after
//! a rename. The format itself is `granary_manifest`.

use bytes::Bytes;
pub use granary_manifest::*;
use granary_packet::{Component, Data};
use granary_security::Signer;

/// Builds, signs and stores the manifest of a stored version; records its
/// digest, signer and policy in the metadata. Memory: the level-0 hashes
/// (32 bytes per 8 KiB segment, 16 MiB for 4 GiB).
pub fn publish(
    store: &granary_store::Store,
    e: &granary_store::Entry,
    signer: &Signer,
    policy: &str,
) -> Result<Data, String> {
    let level0 = store
        .read_extra(e, "hashes")
        .ok_or("no segment hashes for this version")?;
    let sha: [u8; 32] = hex_to_32(&e.meta.sha256).ok_or("bad sha256 in metadata")?;
    let (upper, root) = compute(&level0, e.meta.segment_size as u64, e.meta.size, sha);
    let versioned = e
        .meta
        .name()
        .map_err(|x| x.to_string())?
        .append(&Component::version(e.meta.version));
    let root_data = sign_root(&versioned, &root, signer).map_err(|x| x.to_string())?;
    store
        .write_extra(e, "levels", &upper)
        .map_err(|x| x.to_string())?;
    store
        .write_extra(e, "manifest", root_data.wire())
        .map_err(|x| x.to_string())?;
    let mut m = e.meta.clone();
    m.manifest = Some(
        root_data
            .implicit_digest()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    );
    m.signer = match &root_data.sig_info().key_locator {
        Some(granary_packet::KeyLocator::Name(n)) => Some(n.to_string()),
        _ => None,
    };
    m.signing = Some(policy.to_string());
    store.set_meta(e, &m).map_err(|x| x.to_string())?;
    Ok(root_data)
}

/// After a rename: the root Data under the new name, signed again — one
/// signature; no segment and no manifest block changes (their content does
/// not depend on the name).
pub fn rename_root(
    store: &granary_store::Store,
    e: &granary_store::Entry,
    signer: &Signer,
) -> Result<Data, String> {
    let wire = store
        .read_extra(e, "manifest")
        .ok_or("no manifest for this version")?;
    let old = Data::decode(Bytes::from(wire)).map_err(|x| x.to_string())?;
    let versioned = e
        .meta
        .name()
        .map_err(|x| x.to_string())?
        .append(&Component::version(e.meta.version));
    let mut b = old.to_builder();
    b.name = manifest_name(&versioned).append(&Component::segment(0));
    let d = signer.sign_data(b).map_err(|x| x.to_string())?;
    store
        .write_extra(e, "manifest", d.wire())
        .map_err(|x| x.to_string())?;
    let mut m = e.meta.clone();
    m.manifest = Some(
        d.implicit_digest()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    );
    store.set_meta(e, &m).map_err(|x| x.to_string())?;
    Ok(d)
}

fn hex_to_32(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}
