//! `granary put|get|ls|stat|mv|rm`: the repository from the command line.
//!
//! put/ls/stat/mv/rm work on `<data-dir>/repo` directly: the daemon serves
//! from the files, so what is published here is served at once (the rename
//! that publishes is atomic). get goes through the node.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use bytes::Bytes;
use granary_app::{Client, Reply};
use granary_packet::{Component, InterestFields, Name};
use granary_store::{PutOptions, Store};

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

fn store(data_dir: &Path) -> anyhow::Result<Store> {
    Ok(Store::open(data_dir.join("repo"))?)
}

pub fn put(data_dir: &Path, file: &Path, uri: &str, version: Option<u64>) -> anyhow::Result<()> {
    let n = name(uri)?;
    let s = store(data_dir)?;
    let opts = PutOptions {
        version,
        ..Default::default()
    };
    let (reader, total): (Box<dyn std::io::Read>, Option<u64>) = if file.as_os_str() == "-" {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", file.display()))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(f), len)
    };
    let bar = match total {
        Some(t) => indicatif::ProgressBar::new(t),
        None => indicatif::ProgressBar::new_spinner(),
    };
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bytes}/{total_bytes} {bytes_per_sec} {wide_bar} {eta}",
    ) {
        bar.set_style(style);
    }
    let t = Instant::now();
    let e = s.put(&n, reader, &opts, |b| bar.set_position(b))?;
    bar.finish_and_clear();
    let secs = t.elapsed().as_secs_f64();
    println!("{}", n.append(&Component::version(e.meta.version)));
    eprintln!(
        "published {} bytes in {} segments ({:.1} MB/s), sha256 {}",
        e.meta.size,
        e.meta.segments(),
        e.meta.size as f64 / secs.max(1e-9) / 1e6,
        e.meta.sha256
    );
    Ok(())
}

pub fn ls(data_dir: &Path, prefix: Option<&str>) -> anyhow::Result<()> {
    let p = match prefix {
        Some(p) => name(p)?,
        None => Name::new(),
    };
    for m in store(data_dir)?.list(&p)? {
        println!("{}/v={} {} bytes", m.name, m.version, m.size);
    }
    Ok(())
}

pub fn stat(data_dir: &Path, uri: &str) -> anyhow::Result<()> {
    let e = store(data_dir)?.get(&name(uri)?, None)?;
    println!("{}", serde_json::to_string_pretty(&e.meta)?);
    println!("path {}", e.path.display());
    Ok(())
}

pub fn mv(data_dir: &Path, old: &str, new: &str) -> anyhow::Result<()> {
    let t = Instant::now();
    store(data_dir)?.rename(&name(old)?, &name(new)?)?;
    eprintln!("renamed in {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
    Ok(())
}

pub fn rm(data_dir: &Path, uri: &str, version: Option<u64>) -> anyhow::Result<()> {
    let n = store(data_dir)?.remove(&name(uri)?, version)?;
    eprintln!("removed {n} version(s)");
    Ok(())
}

pub fn get(socket: &Path, uri: &str, output: Option<&Path>) -> anyhow::Result<()> {
    let n = name(uri)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut c = Client::connect(socket).await?;
        // Version discovery (RDR) unless the name already ends with a version.
        let versioned = if n
            .last()
            .is_some_and(|c| c.typ == granary_packet::types::COMP_VERSION)
        {
            n.clone()
        } else {
            let mut f = InterestFields::new(n.append(&Component::keyword(b"metadata")));
            f.can_be_prefix = true;
            f.must_be_fresh = true;
            match c.express(f).await? {
                Reply::Data(d) => {
                    granary_repo::parse_metadata(&Bytes::copy_from_slice(d.content()))?.versioned
                }
                Reply::Nack(r) => anyhow::bail!(
                    "{uri}: not found (Nack {})",
                    granary_packet::types::nack_reason::name(r)
                ),
            }
        };
        let mut out: Box<dyn Write> = match output {
            Some(p) => Box::new(std::io::BufWriter::new(std::fs::File::create(p)?)),
            None => Box::new(std::io::stdout().lock()),
        };
        let verifier = granary_security::Verifier::Digest;
        let t = Instant::now();
        let (mut seg, mut bytes) = (0u64, 0u64);
        loop {
            let mut f = InterestFields::new(versioned.append(&Component::segment(seg)));
            f.lifetime = Some(4000);
            let d = match c.express(f).await? {
                Reply::Data(d) => d,
                Reply::Nack(r) => anyhow::bail!(
                    "segment {seg}: Nack {}",
                    granary_packet::types::nack_reason::name(r)
                ),
            };
            verifier.verify_data(&d).map_err(|e| {
                anyhow::anyhow!("segment {seg} of {versioned}: {e}; nothing more written")
            })?;
            out.write_all(d.content())?;
            bytes += d.content().len() as u64;
            let last = d.final_block_id().and_then(|c| c.as_ref().as_segment());
            if last.is_none_or(|l| seg >= l) {
                break;
            }
            seg += 1;
        }
        out.flush()?;
        eprintln!(
            "{versioned}: {bytes} bytes, {} segments, {:.1} ms, every segment digest-verified",
            seg + 1,
            t.elapsed().as_secs_f64() * 1e3
        );
        Ok(())
    })
}
