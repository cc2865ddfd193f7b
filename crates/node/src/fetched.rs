//! What `granary get` does with the local repository and the neighbours:
//! the local copy of a version it fetches, whether hash requests have
//! neighbours to go to, and keeping a fetched file in the repository.

use std::path::Path;

use granary_packet::Name;
use granary_transfer::{dedup_possible, ObjectInfo};

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{s}: {e}"))
}

/// The file of the version `info` names in the local repository, if it
/// holds it (its bytes are checked against the manifest when copied).
pub fn local_source(
    store: Option<&granary_store::Store>,
    info: &ObjectInfo,
) -> Option<std::path::PathBuf> {
    if !info.has_manifest() || !dedup_possible(info) {
        return None;
    }
    let version = info.versioned.last()?.as_version()?;
    let e = store?.get(&info.versioned.prefix(-1), Some(version)).ok()?;
    (Some(e.meta.size) == info.map.file_size()).then_some(e.path)
}

/// The data file of the version `info` names, from the node at `socket`
/// (its repository holds it) over the node's file socket
/// ([`crate::local_files`]), with what to call it in reports. Only for
/// objects whose manifest gives every segment's hash: the copy checks each
/// one. `None` when the node does not hold it or cannot pass it.
pub fn node_source(
    socket: &Path,
    info: &ObjectInfo,
) -> Option<(std::fs::File, std::path::PathBuf)> {
    if !info.has_manifest() || !dedup_possible(info) {
        return None;
    }
    let version = info.versioned.last()?.as_version()?;
    let (file, size) =
        crate::local_files::request(socket, &info.versioned.prefix(-1), version).ok()?;
    (Some(size) == info.map.file_size()).then(|| (file, crate::local_files::files_socket(socket)))
}

/// [`node_source`] for the mount: a version the node at `socket` holds is
/// read from the node's file (each segment checked against the manifest).
pub fn local_files(socket: &Path) -> granary_mount::LocalFiles {
    let socket = socket.to_path_buf();
    std::sync::Arc::new(move |info: &ObjectInfo| node_source(&socket, info).map(|(f, _)| f))
}

/// The node's FIB and which of its faces are local (the repository, apps),
/// read once through the management socket: what `granary get` decides its
/// sources by.
pub struct Routes {
    fib: Vec<granary_mgmt::FibEntry>,
    local: std::collections::HashSet<u64>,
}

impl Routes {
    /// Reads the FIB and the face list; `None` when the node cannot tell
    /// (the caller then takes the choice that is always correct).
    pub async fn read(socket: &Path) -> Option<Routes> {
        use granary_mgmt::{decode_dataset, FaceStatus, FibEntry};
        let mut c = granary_app::Client::connect(socket).await.ok()?;
        let fib = crate::control::dataset(&mut c, "/localhost/nfd/fib/list")
            .await
            .ok()?;
        let faces = crate::control::dataset(&mut c, "/localhost/nfd/faces/list")
            .await
            .ok()?;
        let fib = decode_dataset::<FibEntry>(&fib).ok()?;
        let faces = decode_dataset::<FaceStatus>(&faces).ok()?;
        let local = faces
            .iter()
            .filter(|f| f.face_scope == granary_mgmt::values::face_scope::LOCAL)
            .map(|f| f.face_id)
            .collect();
        Some(Routes { fib, local })
    }

    /// Next hops of the longest FIB entry that is a prefix of `n`.
    fn hops(&self, n: &Name) -> Vec<u64> {
        self.fib
            .iter()
            .filter(|e| e.name.is_prefix_of(n))
            .max_by_key(|e| e.name.len())
            .map(|e| e.next_hops.iter().map(|h| h.face_id).collect())
            .unwrap_or_default()
    }

    /// The cost of reaching `n`: the lowest next-hop cost of the longest FIB
    /// entry that is a prefix of `n` and has next hops; `None` without one.
    pub fn cost(&self, n: &Name) -> Option<u64> {
        self.fib
            .iter()
            .filter(|e| !e.next_hops.is_empty() && e.name.is_prefix_of(n))
            .max_by_key(|e| e.name.len())
            .and_then(|e| e.next_hops.iter().map(|h| h.cost).min())
    }

    /// True when hash requests (`/localhop/granary/sha256/…`) have a next
    /// hop that is neither a local face (the node's own repository, apps)
    /// nor a next hop of the objects' own names (asking the producer's path
    /// by hash is asking the producer).
    pub fn has_neighbours(&self, names: &[Name]) -> bool {
        let Ok(probe) = name(granary_repo::HASH_PREFIX)
            .map(|n| n.append(&granary_packet::Component::generic(&[0u8; 32])))
        else {
            return false;
        };
        let producer: std::collections::HashSet<u64> =
            names.iter().flat_map(|n| self.hops(n)).collect();
        self.hops(&probe)
            .into_iter()
            .any(|f| !self.local.contains(&f) && !producer.contains(&f))
    }
}

/// The versions among `versioned` that the node's repository holds (`holds`
/// local commands through `socket`, one connection): those are served from
/// here, so an application on the node fetches them by name, not chunk by
/// chunk from the same store, and does not keep them again. A version the
/// node cannot answer for counts as not held.
pub async fn node_holds(socket: &Path, versioned: &[Name]) -> std::collections::HashSet<Name> {
    let mut held = std::collections::HashSet::new();
    let (Ok(mut c), Ok(cmd)) = (
        granary_app::Client::connect(socket).await,
        name(granary_repo::local_commands::PREFIX),
    ) else {
        return held;
    };
    let verb = cmd.append(&granary_packet::Component::generic(b"holds"));
    for n in versioned {
        let Some(version) = n.last().and_then(|c| c.as_version()) else {
            continue;
        };
        let mut f = granary_packet::InterestFields::new(verb.clone());
        let params = serde_json::json!({ "name": n.prefix(-1).to_string(), "version": version });
        f.app_params = Some(bytes::Bytes::from(params.to_string()));
        f.lifetime = Some(2_000);
        if let Ok(granary_app::Reply::Data(d)) = c.express(f).await {
            let v = serde_json::from_slice::<serde_json::Value>(d.content()).ok();
            if v.and_then(|v| v["holds"].as_bool()) == Some(true) {
                held.insert(n.clone());
            }
        }
    }
    held
}

/// True when hash requests have neighbours to go to ([`Routes::has_neighbours`]).
/// Any failure to tell says "no neighbours": the objects then come by name,
/// which is always correct.
pub async fn has_neighbours(socket: &Path, names: &[Name]) -> bool {
    Routes::read(socket)
        .await
        .is_some_and(|r| r.has_neighbours(names))
}

/// What [`keep_fetched`] did with a fetched file.
pub enum Kept {
    /// Nothing to keep (not a regular file, not manifest-checked, or a
    /// segment hash missing): nothing to say.
    Skipped,
    /// The versioned name has no version component.
    NoVersion,
    /// The local repository holds this version already.
    AlreadyHere,
    /// The daemon is keeping it; the message says how.
    Keeping(String),
    /// It could not be kept (the file itself is complete).
    Failed(anyhow::Error),
}

/// Keeps a fetched file in the local repository under its versioned name,
/// with the chunking that reproduces the manifest's segments (so its chunk
/// hashes are the manifest's and neighbours can ask for them). The daemon
/// ingests it in the background (`granary get` does not wait) and publishes
/// it only if its segment hashes are still exactly the manifest's: a file
/// changed meanwhile is never published under the fetched name.
///
/// With `root` (the publisher's signed manifest root as the fetch received
/// and verified it), the copy keeps it byte for byte: it is served with the
/// publisher's signature, not re-signed with this node's key.
pub fn keep_fetched(
    data_dir: &Path,
    socket: &Path,
    info: &ObjectInfo,
    p: &Path,
    root: Option<&granary_packet::Data>,
) -> Kept {
    // Only a regular file can be published (a FIFO's bytes are gone, a
    // device is no copy of them); dedup outputs are regular, but be sure.
    if !std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
        return Kept::Skipped;
    }
    let (Some(version), prefix) = (
        info.versioned.last().and_then(|c| c.as_version()),
        info.versioned.prefix(-1),
    ) else {
        return Kept::NoVersion;
    };
    let granary_transfer::object::Check::Manifest(ck) = &info.check else {
        return Kept::Skipped;
    };
    // Integrity-only content is kept as integrity only (a DigestSha256
    // manifest): signed with this node's key, it would be vouched for
    // although nobody authenticated it.
    let sign = if info.integrity_only() {
        "digest"
    } else {
        "manifest"
    };
    let count = info.map.count();
    let lengths: Vec<u64> = (0..count).map(|s| info.map.len(s).unwrap_or(0)).collect();
    let mut all = Vec::with_capacity(count as usize * 32);
    for s in 0..count {
        match ck.segment_hash(s) {
            Some(h) => all.extend_from_slice(&h),
            None => return Kept::Skipped,
        }
    }
    let expect = hex::encode(granary_packet::sha256(&all));
    let run = || -> anyhow::Result<String> {
        crate::control::may_command(socket)?;
        let declared = ck.root.chunking.as_deref().and_then(|c| c.parse().ok());
        let Some(chunking) =
            guess_chunking(data_dir, p, &lengths, declared, ck.root.is_variable())?
        else {
            anyhow::bail!("no known chunking reproduces the manifest's segments");
        };
        let path = std::fs::canonicalize(p)?;
        let mut params = serde_json::json!({
            "path": path.to_str().ok_or_else(|| anyhow::anyhow!("path is not UTF-8"))?,
            "name": prefix.to_string(),
            "version": version,
            "sign": sign,
            "chunking": chunking.to_string(),
            "index": true,
            "expect_hashes": expect,
            "detach": true,
            "id": format!("keep-{}-{version}", std::process::id()),
        });
        // The root goes in a file beside the daemon's data (a root can fill
        // a whole packet: it does not fit in the command Interest); the
        // daemon reads it and removes it.
        if let Some(r) = root.filter(|_| !info.integrity_only()) {
            let dir = data_dir.join("replicating");
            std::fs::create_dir_all(&dir)?;
            let f = dir.join(format!("keep-{}-{version}.root", std::process::id()));
            std::fs::write(&f, r.wire())?;
            let f = std::fs::canonicalize(&f)?;
            params["root_file"] = serde_json::json!(f
                .to_str()
                .ok_or_else(|| anyhow::anyhow!("path is not UTF-8"))?);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let v: serde_json::Value = rt.block_on(async {
            let mut c = granary_app::Client::connect(socket).await?;
            let cmd = name(granary_repo::local_commands::PREFIX)?
                .append(&granary_packet::Component::generic(b"put"));
            let mut f = granary_packet::InterestFields::new(cmd);
            f.app_params = Some(bytes::Bytes::from(params.to_string()));
            f.lifetime = Some(10_000);
            match c.express(f).await? {
                granary_app::Reply::Data(d) => {
                    Ok::<_, anyhow::Error>(serde_json::from_slice(d.content())?)
                }
                granary_app::Reply::Nack(_) => anyhow::bail!(
                    "the daemon's repository did not take it (is it running with --no-repo?)"
                ),
            }
        })?;
        if v["ok"].as_bool() != Some(true) {
            anyhow::bail!("{}", v["error"].as_str().unwrap_or("refused"));
        }
        Ok(format!(
            "being kept in the local repository as {} ({chunking}; the daemon copies it in the background)",
            info.versioned
        ))
    };
    let have = granary_store::Store::open(data_dir.join("repo"))
        .and_then(|s| s.get(&prefix, Some(version)))
        .is_ok();
    if have {
        return Kept::AlreadyHere;
    }
    match run() {
        Ok(m) => Kept::Keeping(m),
        Err(e) => Kept::Failed(e),
    }
}

/// How to store the verified file `p` of `info` so that its segments are
/// the manifest's: the chunking that reproduces them, the SHA-256 of every
/// segment hash in order (what the store checks before publishing), and
/// the segments themselves as the manifest gives them (lengths and hashes:
/// [`granary_store::PutOptions::known_segments`]).
pub fn replica_layout(
    data_dir: &Path,
    info: &ObjectInfo,
    p: &Path,
) -> anyhow::Result<(
    granary_store::Chunking,
    [u8; 32],
    granary_store::KnownSegments,
)> {
    let granary_transfer::object::Check::Manifest(ck) = &info.check else {
        anyhow::bail!("{}: no manifest", info.versioned);
    };
    let count = info.map.count();
    let lengths: Vec<u64> = (0..count).map(|s| info.map.len(s).unwrap_or(0)).collect();
    let mut all = Vec::with_capacity(count as usize * 32);
    let mut hashes = Vec::with_capacity(count as usize);
    for s in 0..count {
        let h = ck
            .segment_hash(s)
            .ok_or_else(|| anyhow::anyhow!("{}: segment {s} has no hash", info.versioned))?;
        all.extend_from_slice(&h);
        hashes.push(h);
    }
    let known = granary_store::KnownSegments {
        lengths: lengths
            .iter()
            .map(|&l| u32::try_from(l).unwrap_or(u32::MAX))
            .collect(),
        hashes,
        crcs: Vec::new(),
    };
    let declared = ck.root.chunking.as_deref().and_then(|c| c.parse().ok());
    let chunking = guess_chunking(data_dir, p, &lengths, declared, ck.root.is_variable())?
        .ok_or_else(|| anyhow::anyhow!("no known chunking reproduces the manifest's segments"))?;
    Ok((chunking, granary_packet::sha256(&all), known))
}

/// Segments compared when guessing a file's chunking.
const GUESS_SEGMENTS: usize = 64;

/// The chunking that cuts `file` into `lengths`, judged on its first
/// [`GUESS_SEGMENTS`] segments (reading only those): fixed when the
/// manifest is of fixed segments (`variable` false) and every segment but a
/// shorter last one has the same length, else the first of
/// the manifest's declared chunking, the repository's default, FastCDC and
/// Rabin that agrees. The daemon
/// checks the whole file against the manifest's hashes before publishing,
/// so a wrong guess costs a copy not kept, never a wrong one.
fn guess_chunking(
    data_dir: &Path,
    file: &Path,
    lengths: &[u64],
    declared: Option<granary_store::Chunking>,
    variable: bool,
) -> anyhow::Result<Option<granary_store::Chunking>> {
    use granary_store::Chunking;
    use std::io::Read;
    let Some((&first, body)) = lengths.split_first() else {
        return Ok(None);
    };
    let last = *lengths.last().unwrap_or(&first);
    let but_last = &body[..body.len().saturating_sub(1)];
    // A variable manifest whose first segments happen to be equal (FastCDC
    // cut at its maximum, in a run of zeros) is still variable: kept as
    // fixed, its root would not be the publisher's.
    if !variable && but_last.iter().all(|&l| l == first) && last <= first {
        if let Ok(c) = u32::try_from(first).map(Chunking::Fixed) {
            if c.validate().is_ok() {
                return Ok(Some(c));
            }
        }
    }
    let k = lengths.len().min(GUESS_SEGMENTS);
    let head: u64 = lengths[..k].iter().sum();
    // The publisher's word (the manifest's advisory chunking) first, then
    // this node's default and the built-in ones; each is checked below.
    let mut cands: Vec<Chunking> = declared.into_iter().collect();
    if let Ok(s) = granary_store::Store::open(data_dir.join("repo")) {
        if let Ok(c) = s.default_chunking() {
            cands.push(c);
        }
    }
    cands.push(Chunking::fastcdc());
    cands.push(Chunking::rabin());
    for c in cands {
        if c.validate().is_err() || c.is_fixed() {
            continue;
        }
        let cutter = c.cutter();
        let f = std::fs::File::open(file)?.take(head + cutter.max() as u64);
        let mut got: Vec<u64> = Vec::with_capacity(k + 2);
        granary_store::chunking::for_each_chunk(std::io::BufReader::new(f), &cutter, |ch| {
            got.push(ch.len() as u64)
        })?;
        // The last chunk of the read part may be cut short by the limit.
        let whole = if (head + cutter.max() as u64) >= lengths.iter().sum::<u64>() {
            got.len()
        } else {
            got.len().saturating_sub(1)
        };
        if whole >= k && got[..k] == lengths[..k] {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::guess_chunking;
    use granary_store::Chunking;

    /// A FastCDC file whose first segments are all cut at the maximum (a run
    /// of zeros, as in a netCDF file's unwritten variables) has lengths a
    /// fixed layout could give: a variable manifest keeps it FastCDC (kept
    /// as fixed, the copy's root was not the publisher's and `replicate`
    /// failed); a fixed one is still taken for fixed.
    #[test]
    fn a_variable_manifest_with_equal_first_segments_is_not_taken_for_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        let mut bytes = vec![0u8; 24 * 1024];
        bytes.extend_from_slice(&granary_store::chunking::noise(1500, 9));
        std::fs::write(&file, &bytes).unwrap();
        let cdc = Chunking::fastcdc();
        let mut lengths = Vec::new();
        granary_store::chunking::for_each_chunk(&bytes[..], &cdc.cutter(), |c| {
            lengths.push(c.len() as u64)
        })
        .unwrap();
        let (first, last) = (lengths[0], *lengths.last().unwrap());
        assert!(
            lengths.len() >= 3
                && lengths[..lengths.len() - 1].iter().all(|&l| l == first)
                && last <= first,
            "not the case under test: {lengths:?}"
        );
        let got = guess_chunking(dir.path(), &file, &lengths, Some(cdc), true).unwrap();
        assert_eq!(got.map(|c| c.to_string()), Some(cdc.to_string()));
        let got = guess_chunking(dir.path(), &file, &lengths, None, false).unwrap();
        assert_eq!(
            got.map(|c| c.to_string()),
            Some(Chunking::Fixed(first as u32).to_string())
        );
    }
}
