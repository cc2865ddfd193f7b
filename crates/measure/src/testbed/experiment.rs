//! The experiment file: its tables (nodes, links, LANs, publications,
//! consumers, sweep, baselines), the `[tiny]` overrides, and the checks made
//! before anything is built.

use std::path::Path;

use granary_testbed::relay::{parse_duration, parse_loss, parse_rate};
use granary_testbed::{Impairment, LinkSpec};
use serde::Deserialize;

/// A link in the file.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct LinkCfg {
    pub a: String,
    pub b: String,
    /// e.g. "100mbit" (a → b, and b → a unless `rate_back`).
    pub rate: Option<String>,
    /// One-way delay, e.g. "10ms".
    pub delay: Option<String>,
    /// Loss per datagram, e.g. "0.5%".
    pub loss: Option<String>,
    pub rate_back: Option<String>,
    pub delay_back: Option<String>,
    pub loss_back: Option<String>,
}

/// A node in the file.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct NodeCfg {
    pub name: String,
    /// Extra `granary daemon` flags.
    #[serde(default)]
    pub args: Vec<String>,
}

/// What a node publishes.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct PublishCfg {
    pub node: String,
    pub prefix: String,
    /// File size ("32MiB"), for file publications.
    pub size: Option<String>,
    /// Objects of a catalog served on demand (vip).
    pub objects: Option<usize>,
    /// Payload bytes per object (vip).
    pub payload: Option<usize>,
}

/// A consumer and its schedule.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct ConsumerCfg {
    pub node: String,
    /// What it fetches (a prefix; for vip the catalog's).
    pub fetch: String,
    /// When it starts: "serial" (after the one before ends) or seconds.
    #[serde(default)]
    pub start: Option<toml::Value>,
    /// Requests per second (vip).
    pub rate: Option<f64>,
    /// Seconds of requests (vip).
    pub duration: Option<f64>,
    /// Zipf skew (vip).
    pub alpha: Option<f64>,
}

/// The seed paper's figure, for the report.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct SeedCfg {
    pub paper: String,
    pub figure: String,
    /// Markdown: the seed's numbers, as a table or list.
    pub text: String,
}

/// A baseline (or compared variant): a name and kind-specific keys.
#[derive(Deserialize, Clone, Debug)]
pub struct BaselineCfg {
    pub name: String,
    #[serde(flatten)]
    pub params: toml::Table,
}

/// An experiment file.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    pub kind: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    pub seed: SeedCfg,
    /// Seed of the links' loss generators and the consumers' draws.
    #[serde(default = "one")]
    pub random_seed: u64,
    pub node: Vec<NodeCfg>,
    #[serde(default)]
    pub link: Vec<LinkCfg>,
    /// LANs: lists of member nodes (clean).
    #[serde(default)]
    pub lan: Vec<Vec<String>>,
    #[serde(default)]
    pub publish: Vec<PublishCfg>,
    #[serde(default)]
    pub consumer: Vec<ConsumerCfg>,
    #[serde(default)]
    pub sweep: toml::Table,
    #[serde(default)]
    pub baseline: Vec<BaselineCfg>,
    /// Kind-specific settings.
    #[serde(default)]
    pub params: toml::Table,
    /// Overrides for `--tiny` (applied to the raw table by [`load`]).
    #[serde(default)]
    #[allow(dead_code)]
    pub tiny: Option<toml::Table>,
}

fn one() -> u64 {
    1
}

/// Merges `over` into `base` (tables recursively, everything else replaced).
fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Reads an experiment file (with its `[tiny]` overrides when asked).
pub fn load(path: &Path, tiny: bool) -> anyhow::Result<Experiment> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let mut t: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if tiny {
        let Some(toml::Value::Table(over)) = t.get("tiny").cloned() else {
            anyhow::bail!("{}: --tiny needs a [tiny] table", path.display());
        };
        merge(&mut t, &over);
    }
    let e: Experiment = toml::Value::Table(t)
        .try_into()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    check(&e).map_err(|m| anyhow::anyhow!("{}: {m}", path.display()))?;
    Ok(e)
}

/// Consistency of names and values, before anything is built.
fn check(e: &Experiment) -> Result<(), String> {
    let known = |n: &str| e.node.iter().any(|x| x.name == n);
    if e.node.is_empty() {
        return Err("no [[node]]".into());
    }
    for (i, n) in e.node.iter().enumerate() {
        if n.name.is_empty() || !n.name.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("node name {:?}: use letters and digits", n.name));
        }
        if e.node[..i].iter().any(|m| m.name == n.name) {
            return Err(format!("node {:?} appears twice", n.name));
        }
    }
    for l in &e.link {
        for n in [&l.a, &l.b] {
            if !known(n) {
                return Err(format!("link to unknown node {n:?}"));
            }
        }
        link_spec(l)?;
    }
    for lan in &e.lan {
        if let Some(n) = lan.iter().find(|n| !known(n)) {
            return Err(format!("LAN member {n:?} is not a node"));
        }
    }
    for p in &e.publish {
        if !known(&p.node) {
            return Err(format!("publish on unknown node {:?}", p.node));
        }
        if let Some(s) = &p.size {
            parse_bytes(s).map_err(|m| format!("publish size: {m}"))?;
        }
    }
    for c in &e.consumer {
        if !known(&c.node) {
            return Err(format!("consumer on unknown node {:?}", c.node));
        }
    }
    if !["pipeline", "caching", "carepo", "vip"].contains(&e.kind.as_str()) {
        return Err(format!(
            "kind {:?}: expected pipeline, caching, carepo or vip",
            e.kind
        ));
    }
    Ok(())
}

/// A byte count: `4096`, `256KiB`, `32MiB`, `1GiB` (k, m, g: powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (num, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(1 << shift))
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("{s:?}: not a size (e.g. 4096, 256KiB, 32MiB)"))
}

/// The link's impairments per direction from the file's strings.
pub fn link_spec(l: &LinkCfg) -> Result<LinkSpec, String> {
    let rate = |s: &Option<String>| -> Result<Option<u64>, String> {
        s.as_deref()
            .map(parse_rate)
            .transpose()
            .map_err(|e| format!("link {}-{}: rate: {e}", l.a, l.b))
    };
    let delay = |s: &Option<String>| -> Result<std::time::Duration, String> {
        Ok(s.as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|e| format!("link {}-{}: delay: {e}", l.a, l.b))?
            .unwrap_or_default())
    };
    let loss = |s: &Option<String>| -> Result<f64, String> {
        Ok(s.as_deref()
            .map(parse_loss)
            .transpose()
            .map_err(|e| format!("link {}-{}: loss: {e}", l.a, l.b))?
            .unwrap_or(0.0))
    };
    let ab = Impairment {
        delay: delay(&l.delay)?,
        loss: loss(&l.loss)?,
        rate_bps: rate(&l.rate)?,
        queue_bytes: None,
    };
    let ba = Impairment {
        delay: if l.delay_back.is_some() {
            delay(&l.delay_back)?
        } else {
            ab.delay
        },
        loss: if l.loss_back.is_some() {
            loss(&l.loss_back)?
        } else {
            ab.loss
        },
        rate_bps: if l.rate_back.is_some() {
            rate(&l.rate_back)?
        } else {
            ab.rate_bps
        },
        queue_bytes: None,
    };
    Ok(LinkSpec { ab, ba, mtu: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
    }

    #[test]
    fn shipped_experiments_parse_in_both_scales() {
        for n in ["pipeline", "caching-vs-http", "carepo", "vip", "vip-heavy"] {
            let p = exp_dir().join(format!("{n}.toml"));
            let full = load(&p, false).unwrap();
            let tiny = load(&p, true).unwrap();
            assert_eq!(full.name, n);
            assert_eq!(full.kind, tiny.kind);
            assert!(!full.seed.text.is_empty());
        }
    }

    #[test]
    fn bad_files_get_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.toml");
        let base = r#"
name = "x"
kind = "pipeline"
title = "t"
[seed]
paper = "p"
figure = "f"
text = "t"
[[node]]
name = "a"
[[node]]
name = "b"
"#;
        let write = |extra: &str| std::fs::write(&p, format!("{base}{extra}")).unwrap();
        write("[[link]]\na = \"a\"\nb = \"c\"\n");
        assert!(load(&p, false)
            .unwrap_err()
            .to_string()
            .contains("unknown node \"c\""));
        write("[[link]]\na = \"a\"\nb = \"b\"\ndelay = \"ten\"\n");
        assert!(load(&p, false).unwrap_err().to_string().contains("delay"));
        write("colour = 1\n");
        assert!(load(&p, false).unwrap_err().to_string().contains("colour"));
        write("");
        assert!(load(&p, true).unwrap_err().to_string().contains("[tiny]"));
        write("[tiny]\nkind = \"nope\"\n");
        assert!(load(&p, true).unwrap_err().to_string().contains("kind"));
        assert!(load(&p, false).is_ok());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("32MiB"), Ok(32 << 20));
        assert_eq!(parse_bytes("256k"), Ok(256 << 10));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("1 GiB"), Ok(1 << 30));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn tiny_overrides_merge_into_tables() {
        let mut base: toml::Table = toml::from_str("a = 1\n[s]\nx = [1, 2]\ny = 3\n").unwrap();
        let over: toml::Table = toml::from_str("[s]\nx = [1]\n").unwrap();
        merge(&mut base, &over);
        assert_eq!(base["a"].as_integer(), Some(1));
        assert_eq!(base["s"]["x"].as_array().unwrap().len(), 1);
        assert_eq!(base["s"]["y"].as_integer(), Some(3));
    }
}
