//! Cross-check against python-ndn: `tests/interop/python/mgmt_vectors.py`
//! encodes ControlParameters, ControlResponse, dataset items, GeneralStatus and
//! command Interests (make_command and make_command_v2) with python-ndn's own
//! models; Granary must decode each to the same field values, re-encode it
//! byte-identically, and parse the commands in both signed forms.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use bytes::Bytes;
use granary_mgmt::*;
use granary_packet::types::sig_type;
use granary_packet::{sha256, Interest, Name};
use serde_json::{json, Map, Value};

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop")
}

/// Runs mgmt_vectors.py with the python that has python-ndn installed.
/// A missing interpreter is a failure, never a skip.
fn python_vectors() -> Vec<Value> {
    let py = interop_dir().join(".venv/bin/python");
    assert!(
        py.exists(),
        "{} missing: run scripts/setup-test-deps.sh to install python-ndn for the interop tests",
        py.display()
    );
    let script = interop_dir().join("python/mgmt_vectors.py");
    let out = Process::new(&py)
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", py.display()));
    assert!(
        out.status.success(),
        "{} {} failed: {}\nstderr: {}",
        py.display(),
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8 output")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l}: {e}")))
        .collect()
}

// --- Granary values as python-ndn's field dictionaries ----------------------

fn name(n: &Name) -> Value {
    json!(hex::encode(n.to_tlv()))
}

fn opt_name(n: &Option<Name>) -> Value {
    n.as_ref().map_or(Value::Null, name)
}

fn cp_json(cp: &ControlParameters) -> Value {
    json!({
        "name": opt_name(&cp.name),
        "face_id": cp.face_id,
        "uri": cp.uri,
        "local_uri": cp.local_uri,
        "origin": cp.origin,
        "cost": cp.cost,
        "capacity": cp.capacity,
        "count": cp.count,
        "base_congestion_mark_interval": cp.base_congestion_marking_interval,
        "default_congestion_threshold": cp.default_congestion_threshold,
        "mtu": cp.mtu,
        "flags": cp.flags,
        "mask": cp.mask,
        "strategy": cp.strategy.as_ref().map(|s| json!({ "name": name(s) })),
        "expiration_period": cp.expiration_period,
        "face_persistency": cp.face_persistency,
    })
}

fn response_json(r: &ControlResponse) -> Value {
    let body = match r.params() {
        None => Value::Null,
        Some(Ok(cp)) => cp_json(&cp),
        Some(Err(e)) => json!(format!("body is not ControlParameters: {e}")),
    };
    json!({ "status_code": r.status_code, "status_text": r.status_text, "body": body })
}

trait PyFields: TlvElement + std::fmt::Debug {
    fn py(&self) -> Value;
}

impl PyFields for FaceStatus {
    fn py(&self) -> Value {
        json!({
            "face_id": self.face_id,
            "uri": self.uri,
            "local_uri": self.local_uri,
            "expiration_period": self.expiration_period,
            "face_scope": self.face_scope,
            "face_persistency": self.face_persistency,
            "link_type": self.link_type,
            "base_congestion_mark_interval": self.base_congestion_marking_interval,
            "default_congestion_threshold": self.default_congestion_threshold,
            "mtu": self.mtu,
            "n_in_interests": self.n_in_interests,
            "n_in_data": self.n_in_data,
            "n_in_nacks": self.n_in_nacks,
            "n_out_interests": self.n_out_interests,
            "n_out_data": self.n_out_data,
            "n_out_nacks": self.n_out_nacks,
            "n_in_bytes": self.n_in_bytes,
            "n_out_bytes": self.n_out_bytes,
            "flags": self.flags,
        })
    }
}

impl PyFields for FibEntry {
    fn py(&self) -> Value {
        let hops: Vec<Value> = self
            .next_hops
            .iter()
            .map(|h| json!({ "face_id": h.face_id, "cost": h.cost }))
            .collect();
        json!({ "name": name(&self.name), "next_hop_records": hops })
    }
}

impl PyFields for RibEntry {
    fn py(&self) -> Value {
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|r| {
                json!({
                    "face_id": r.face_id,
                    "origin": r.origin,
                    "cost": r.cost,
                    "flags": r.flags,
                    "expiration_period": r.expiration_period,
                })
            })
            .collect();
        json!({ "name": name(&self.name), "routes": routes })
    }
}

impl PyFields for StrategyChoice {
    fn py(&self) -> Value {
        json!({ "name": name(&self.name), "strategy": { "name": name(&self.strategy) } })
    }
}

impl PyFields for CsInfo {
    fn py(&self) -> Value {
        json!({
            "capacity": self.capacity,
            "flags": self.flags,
            "n_cs_entries": self.n_entries,
            "n_hits": self.n_hits,
            "n_misses": self.n_misses,
        })
    }
}

fn general_json(g: &GeneralStatus) -> Value {
    json!({
        "nfd_version": g.nfd_version,
        "start_timestamp": g.start_timestamp,
        "current_timestamp": g.current_timestamp,
        "n_name_tree_entries": g.n_name_tree_entries,
        "n_fib_entries": g.n_fib_entries,
        "n_pit_entries": g.n_pit_entries,
        "n_measurement_entries": g.n_measurements_entries,
        "n_cs_entries": g.n_cs_entries,
        "n_in_interests": g.n_in_interests,
        "n_in_data": g.n_in_data,
        "n_in_nacks": g.n_in_nacks,
        "n_out_interests": g.n_out_interests,
        "n_out_data": g.n_out_data,
        "n_out_nacks": g.n_out_nacks,
        "n_satisfied_interests": g.n_satisfied_interests,
        "n_unsatisfied_interests": g.n_unsatisfied_interests,
    })
}

/// Drops null members recursively: python-ndn lists every field of its model
/// (null when absent, including DNMP extensions Granary does not model), and
/// an absent Option is null on Granary's side.
fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), strip_nulls(x)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        x => x.clone(),
    }
}

// --- Checks ------------------------------------------------------------------

struct Check {
    failures: Vec<String>,
}

impl Check {
    fn same(&mut self, i: usize, what: &str, ours: &Value, theirs: &Value) {
        let (a, b) = (strip_nulls(ours), strip_nulls(theirs));
        if a != b {
            self.failures.push(format!(
                "#{i} {what}: fields differ\n  granary: {a}\n  python:  {b}"
            ));
        }
    }

    fn bytes(&mut self, i: usize, what: &str, ours: &[u8], theirs: &[u8]) {
        if ours != theirs {
            self.failures.push(format!(
                "#{i} {what}: re-encoding differs\n  granary: {}\n  python:  {}",
                hex::encode(ours),
                hex::encode(theirs)
            ));
        }
    }

    fn fail(&mut self, i: usize, msg: String) {
        self.failures.push(format!("#{i} {msg}"));
    }

    fn item<T: PyFields>(&mut self, i: usize, typ: &str, wire: &Bytes, fields: &Value) {
        match T::decode(wire) {
            Ok(v) => {
                self.same(i, typ, &v.py(), fields);
                self.bytes(i, typ, &v.encode(), wire);
                match decode_dataset::<T>(wire) {
                    Ok(items) if items.len() == 1 && items[0].encode() == *wire => {}
                    other => self.fail(i, format!("{typ}: decode_dataset gave {other:?}")),
                }
            }
            Err(e) => self.fail(i, format!("{typ} decode: {e}")),
        }
    }

    fn dataset<T: PyFields>(&mut self, i: usize, wire: &Bytes, fields: &Value) {
        match decode_dataset::<T>(wire) {
            Ok(items) => {
                let ours = Value::Array(items.iter().map(PyFields::py).collect());
                self.same(i, "dataset", &ours, &fields["items"]);
                self.bytes(i, "dataset", &encode_dataset(&items), wire);
            }
            Err(e) => self.fail(i, format!("dataset decode: {e}")),
        }
    }

    fn command(&mut self, i: usize, typ: &str, wire: &Bytes, fields: &Value) {
        let interest = match Interest::decode(wire.clone()) {
            Ok(x) => x,
            Err(e) => return self.fail(i, format!("{typ}: Interest decode: {e}")),
        };
        let prefix_hex = fields["prefix"].as_str().expect("prefix");
        let prefix = Name::decode(&Bytes::from(hex::decode(prefix_hex).unwrap())).unwrap();
        let c = match parse_command(&interest, &prefix) {
            Ok(c) => c,
            Err(e) => return self.fail(i, format!("{typ}: parse_command: {e}")),
        };
        let module = fields["module"].as_str().unwrap();
        let verb = fields["verb"].as_str().unwrap();
        if c.module != module || c.verb != verb {
            self.fail(
                i,
                format!("{typ}: {}/{} != {module}/{verb}", c.module, c.verb),
            );
        }
        self.same(i, typ, &cp_json(&c.params), &fields["params"]);
        // The ControlParameters component re-encodes byte-identically.
        let cp_component = interest.name.get(prefix.len() as isize + 2).unwrap();
        self.bytes(i, typ, &c.params.encode(), cp_component.value);
        // The signature is DigestSha256 over the signed portion.
        let sig_ok = |si: &granary_packet::SignatureInfo, sv: &Bytes, portion: &Bytes| {
            si.sig_type == sig_type::DIGEST_SHA256 && sv.as_ref() == sha256(portion)
        };
        match (typ, &c.signed) {
            ("command_v2", SignedForm::V03(v)) => {
                if !sig_ok(&v.sig_info, &v.sig_value, &v.signed_portion)
                    || v.sig_info.nonce.is_none()
                    || v.sig_info.time.is_none()
                {
                    self.fail(i, format!("{typ}: bad v0.3 signature {v:?}"));
                }
                // Granary's make_command builds the same name, before the digest.
                let ours = make_command(&prefix, module, verb, &c.params);
                if ours.name != interest.name.prefix(-1) {
                    self.fail(i, format!("{typ}: make_command name {} differs", ours.name));
                }
            }
            ("command_legacy", SignedForm::Legacy(l)) => {
                if !sig_ok(&l.sig_info, &l.sig_value, &l.signed_portion)
                    || l.timestamp < 1_600_000_000_000
                    || l.nonce.len() != 8
                    || l.signed_portion != interest.name.prefix(-1).value()
                {
                    self.fail(i, format!("{typ}: bad legacy signature {l:?}"));
                }
            }
            (_, s) => self.fail(i, format!("{typ}: parsed as {s:?}")),
        }
    }
}

#[test]
fn python_ndn_vectors_decode_and_reencode_identically() {
    let records = python_vectors();
    let mut check = Check {
        failures: Vec::new(),
    };
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        let typ = r["type"].as_str().expect("type");
        let wire = Bytes::from(hex::decode(r["hex"].as_str().expect("hex")).expect("hex"));
        let fields = &r["fields"];
        *counts.entry(typ.to_string()).or_default() += 1;
        match typ {
            "control_parameters" => match ControlParameters::decode(&wire) {
                Ok(cp) => {
                    check.same(i, typ, &cp_json(&cp), fields);
                    check.bytes(i, typ, &cp.encode(), &wire);
                }
                Err(e) => check.fail(i, format!("{typ} decode: {e}")),
            },
            "control_response" => match ControlResponse::decode(&wire) {
                Ok(resp) => {
                    check.same(i, typ, &response_json(&resp), fields);
                    check.bytes(i, typ, &resp.encode(), &wire);
                    // Rebuilt from its parts, it is the same bytes.
                    let rebuilt = match resp.params() {
                        Some(Ok(cp)) => {
                            ControlResponse::with_params(resp.status_code, &resp.status_text, &cp)
                        }
                        _ => ControlResponse::new(resp.status_code, &resp.status_text),
                    };
                    check.bytes(i, "control_response rebuilt", &rebuilt.encode(), &wire);
                }
                Err(e) => check.fail(i, format!("{typ} decode: {e}")),
            },
            "face_status" => check.item::<FaceStatus>(i, typ, &wire, fields),
            "fib_entry" => check.item::<FibEntry>(i, typ, &wire, fields),
            "rib_entry" => check.item::<RibEntry>(i, typ, &wire, fields),
            "strategy_choice" => check.item::<StrategyChoice>(i, typ, &wire, fields),
            "cs_info" => check.item::<CsInfo>(i, typ, &wire, fields),
            "general_status" => match GeneralStatus::decode(&wire) {
                Ok(g) => {
                    check.same(i, typ, &general_json(&g), fields);
                    check.bytes(i, typ, &g.encode(), &wire);
                }
                Err(e) => check.fail(i, format!("{typ} decode: {e}")),
            },
            "dataset" => match fields["item_type"].as_str().unwrap() {
                "face_status" => check.dataset::<FaceStatus>(i, &wire, fields),
                "fib_entry" => check.dataset::<FibEntry>(i, &wire, fields),
                "rib_entry" => check.dataset::<RibEntry>(i, &wire, fields),
                "strategy_choice" => check.dataset::<StrategyChoice>(i, &wire, fields),
                other => check.fail(i, format!("unknown dataset item type {other}")),
            },
            "command_v2" | "command_legacy" => check.command(i, typ, &wire, fields),
            other => check.fail(i, format!("unknown record type {other}")),
        }
    }
    eprintln!("python-ndn management vectors: {counts:?}");
    for (typ, min) in [
        ("control_parameters", 40),
        ("control_response", 20),
        ("face_status", 10),
        ("fib_entry", 10),
        ("rib_entry", 10),
        ("strategy_choice", 5),
        ("cs_info", 5),
        ("general_status", 5),
        ("dataset", 4),
        ("command_v2", 10),
        ("command_legacy", 10),
    ] {
        let n = counts.get(typ).copied().unwrap_or(0);
        assert!(n >= min, "only {n} {typ} records (expected at least {min})");
    }
    assert!(
        check.failures.is_empty(),
        "{} of {} records failed:\n{}",
        check.failures.len(),
        records.len(),
        check.failures.join("\n")
    );
}
