//! Storing manifests: build, sign and keep the manifest of a stored version
//! (`<file>.levels`, `<file>.manifest` beside it), and re-sign its root after
//! a rename. The format itself is `granary_manifest`.

use bytes::Bytes;
pub use granary_manifest::*;
use granary_packet::{Component, Data};
use granary_security::Signer;

/// The layout of a stored version's manifest (format 2 for variable-size
/// segments).
pub fn layout_of(e: &granary_store::Entry) -> Layout {
    let format = if e.meta.is_fixed() {
        FORMAT_FIXED
    } else {
        FORMAT_VARIABLE
    };
    Layout::with_format(e.meta.segments(), format)
}

/// Format-2 level-0 entries `first..first+count` of a stored version, from
/// its `.hashes` and `.offsets` files (one `pread` each).
pub fn level0_entries(
    store: &granary_store::Store,
    e: &granary_store::Entry,
    first: u64,
    count: u64,
) -> Result<Vec<u8>, String> {
    let hashes = store
        .read_extra_at(e, "hashes", first * 32, (count * 32) as usize)
        .map_err(|x| x.to_string())?;
    let offs = store
        .read_extra_at(e, "offsets", first * 8, ((count + 1) * 8) as usize)
        .map_err(|x| x.to_string())?;
    let at = |i: usize| u64::from_le_bytes(offs[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    let mut out = Vec::with_capacity(count as usize * ENTRY_V2);
    for i in 0..count as usize {
        let (start, end) = (at(i), at(i + 1));
        let len = end
            .checked_sub(start)
            .filter(|l| *l <= u32::MAX as u64)
            .ok_or("corrupt offsets file")?;
        let h: [u8; 32] = hashes[i * 32..i * 32 + 32]
            .try_into()
            .map_err(|_| "short hashes file")?;
        out.extend_from_slice(&encode_entry(&h, start, len as u32));
    }
    Ok(out)
}

/// The manifest of a stored version computed from its `.hashes` (and
/// `.offsets`): the upper levels (the `.levels` file) and the root.
pub fn compute_for(
    store: &granary_store::Store,
    e: &granary_store::Entry,
) -> Result<(Vec<u8>, Root), String> {
    let sha = match e.meta.sha256.as_deref() {
        Some(h) => Some(hex_to_32(h).ok_or("bad sha256 in metadata")?),
        None => None,
    };
    let (upper, mut root) = if e.meta.is_fixed() {
        let level0 = store
            .read_extra(e, "hashes")
            .ok_or("no segment hashes for this version")?;
        compute(&level0, e.meta.segment_size as u64, e.meta.size, sha)
    } else {
        let n = e.meta.segments();
        let max = e.meta.segment_size as u64;
        if n <= ROOT_HASHES {
            let level0 = level0_entries(store, e, 0, n)?;
            compute_variable(&level0, max, e.meta.size, sha)
        } else {
            // Level 0 streamed a block at a time (44 bytes per segment
            // would be 40 MiB for 4 GiB); only level 1 is kept.
            let mut level1 = Vec::with_capacity(n.div_ceil(LEAF_FANOUT_V2) as usize * 32);
            let mut first = 0;
            while first < n {
                let count = (n - first).min(LEAF_FANOUT_V2);
                let block = level0_entries(store, e, first, count)?;
                level1.extend_from_slice(&granary_packet::sha256(&block));
                first += count;
            }
            compute_variable_from_level1(level1, n, max, e.meta.size, sha)
        }
    };
    if !e.meta.is_fixed() {
        root.chunking = Some(e.meta.chunking.clone());
    }
    Ok((upper, root))
}

/// Checks a stored version's manifest files against its `.hashes`: the
/// root's hashes, counts and sizes and the `.levels` file must be what the
/// hashes give, and the root's digest what the metadata recorded. Returns
/// the problems found (none when it has no manifest).
pub fn check_stored(store: &granary_store::Store, e: &granary_store::Entry) -> Vec<String> {
    let Some(digest) = e.meta.manifest.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Some(wire) = store.read_extra(e, "manifest") else {
        return vec!["the manifest root file is missing".into()];
    };
    let Ok(root_data) = Data::decode(Bytes::from(wire)) else {
        return vec!["the manifest root file is not a Data packet".into()];
    };
    let have: String = hex::encode(root_data.implicit_digest());
    if have != digest {
        out.push(format!(
            "the manifest root's digest is {have}, {digest} when it was made"
        ));
    }
    let stored = match Root::decode(&Bytes::copy_from_slice(root_data.content())) {
        Ok(r) => r,
        Err(x) => {
            out.push(format!("the manifest root does not decode: {x}"));
            return out;
        }
    };
    match compute_for(store, e) {
        Err(x) => out.push(format!("the manifest cannot be recomputed: {x}")),
        Ok((upper, root)) => {
            if root.hashes != stored.hashes
                || root.segment_count != stored.segment_count
                || root.file_size != stored.file_size
            {
                out.push("the segment hashes (.hashes) do not match the signed manifest".into());
            }
            if !upper.is_empty() && store.read_extra(e, "levels").as_deref() != Some(&upper[..]) {
                out.push("the manifest levels (.levels) do not match the segment hashes".into());
            }
        }
    }
    out
}

/// Builds, signs and stores the manifest of a stored version; records its
/// digest, signer and policy in the metadata. Memory: the level-0 entries
/// (32 bytes per fixed segment, 44 per variable one).
pub fn publish(
    store: &granary_store::Store,
    e: &granary_store::Entry,
    signer: &Signer,
    policy: &str,
) -> Result<Data, String> {
    let (upper, root) = compute_for(store, e)?;
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
    m.manifest = Some(hex::encode(root_data.implicit_digest()));
    m.signer = match &root_data.sig_info().key_locator {
        Some(granary_packet::KeyLocator::Name(n)) => Some(n.to_string()),
        _ => None,
    };
    m.signing = Some(policy.to_string());
    store.set_meta(e, &m).map_err(|x| x.to_string())?;
    Ok(root_data)
}

/// Stores `root_data`, a manifest root received from the version's
/// publisher (its signature verified by the caller), as the manifest of the
/// stored version `e`, byte for byte: no re-signing, so the copy serves the
/// publisher's signature and consumers need trust only the publisher. It is
/// kept only if it is this version's: its name must be the version's
/// manifest root name, and its hashes, segment count and sizes what the
/// stored segments' hashes give. Records its digest and signer in the
/// metadata, with the policy `manifest` (segments are served covered by it)
/// and the tag `replica` = `true`.
pub fn adopt(
    store: &granary_store::Store,
    e: &granary_store::Entry,
    root_data: &Data,
) -> Result<(), String> {
    let versioned = e
        .meta
        .name()
        .map_err(|x| x.to_string())?
        .append(&Component::version(e.meta.version));
    let want = manifest_name(&versioned).append(&Component::segment(0));
    if root_data.name() != &want {
        return Err(format!(
            "the manifest root is named {}, not {want}",
            root_data.name()
        ));
    }
    let received = Root::decode(&Bytes::copy_from_slice(root_data.content()))
        .map_err(|x| format!("the manifest root does not decode: {x}"))?;
    let (upper, computed) = compute_for(store, e)?;
    if computed.hashes != received.hashes
        || computed.segment_count != received.segment_count
        || computed.file_size != received.file_size
        || computed.segment_size != received.segment_size
    {
        return Err("the stored segments' hashes do not give the publisher's manifest root".into());
    }
    store
        .write_extra(e, "levels", &upper)
        .map_err(|x| x.to_string())?;
    store
        .write_extra(e, "manifest", root_data.wire())
        .map_err(|x| x.to_string())?;
    let mut m = e.meta.clone();
    m.manifest = Some(hex::encode(root_data.implicit_digest()));
    m.signer = match &root_data.sig_info().key_locator {
        Some(granary_packet::KeyLocator::Name(n)) => Some(n.to_string()),
        _ => None,
    };
    m.signing = Some("manifest".to_string());
    m.tags.insert("replica".to_string(), "true".to_string());
    store.set_meta(e, &m).map_err(|x| x.to_string())?;
    Ok(())
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
    m.manifest = Some(hex::encode(d.implicit_digest()));
    store.set_meta(e, &m).map_err(|x| x.to_string())?;
    Ok(d)
}

fn hex_to_32(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}
