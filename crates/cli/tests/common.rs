//! Shared helpers for tests that run real peer libraries (python-ndn, NDNts).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop")
}

/// The python with python-ndn installed (tests/interop/.venv, made by
/// scripts/setup-test-deps.sh). Missing is a failure, never a skip.
pub fn python() -> PathBuf {
    let p = interop_dir().join(".venv/bin/python");
    assert!(
        p.exists(),
        "{} missing: run scripts/setup-test-deps.sh (the README's test command does)",
        p.display()
    );
    p
}

pub fn node_script(name: &str) -> Command {
    let dir = interop_dir().join("ndnts");
    assert!(
        dir.join("node_modules/@ndn/packet").exists(),
        "NDNts not installed in {}: run scripts/setup-test-deps.sh",
        dir.display()
    );
    let mut c = Command::new("node");
    c.arg(dir.join(name));
    c
}

pub fn python_script(name: &str) -> Command {
    let mut c = Command::new(python());
    c.arg(interop_dir().join("python").join(name));
    c
}

pub fn run(mut c: Command) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot start {c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn read_jsonl(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l}: {e}")))
        .collect()
}

pub fn write_jsonl(p: &Path, v: &[Value]) {
    let mut s = String::new();
    for x in v {
        s.push_str(&serde_json::to_string(x).unwrap());
        s.push('\n');
    }
    std::fs::write(p, s).unwrap();
}

pub fn granary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_granary"))
}
