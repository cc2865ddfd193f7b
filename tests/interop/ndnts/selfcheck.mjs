// Self-check of the NDNts interop scripts against themselves.
//
//   node selfcheck.mjs [WORKDIR]
//
// Runs gen_packets.mjs, checks coverage and the `fields` of its records, feeds its Data,
// certificates and Interests (with their keys) through verify.mjs (plus tampered and broken
// records), and round-trips every generated URI through uri.mjs. Exits non-zero on failure.

import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { Data, Interest, Name } from "@ndn/packet";
import { Decoder, Encoder } from "@ndn/tlv";

import { hex, readLines, toJsonLine, unhex } from "./common.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
const workdir = process.argv[2] ?? mkdtempSync(path.join(tmpdir(), "ndnts-selfcheck-"));
const failures = [];

function check(ok, what) {
  if (!ok) {
    failures.push(what);
  }
}

function runScript(script, ...args) {
  const result = spawnSync(process.execPath, [path.join(here, script), ...args], { encoding: "utf8" });
  if (result.status !== 0) {
    throw new Error(`${script} exited with ${result.status}:\n${result.stderr}`);
  }
  process.stderr.write(result.stderr);
}

function readJsonLines(file) {
  return readLines(file).map((line) => JSON.parse(line));
}

// ---------------------------------------------------------------- gen_packets

const genPath = path.join(workdir, "gen.jsonl");
runScript("gen_packets.mjs", genPath);
const recs = readJsonLines(genPath);
check(recs.length >= 550, `only ${recs.length} records`);

const count = (pred) => recs.filter(pred).length;
const ofKind = (kind) => recs.filter((r) => r.kind === kind);

for (const [i, r] of recs.entries()) {
  check(/^(?:[\da-f]{2})+$/.test(r.hex), `record ${i}: hex is not lowercase hex`);
  check(typeof r.note === "string" && r.note.length > 0, `record ${i}: missing note`);
  check(r.kind === "lp" ? !("uri" in r) : typeof r.uri === "string", `record ${i}: uri`);
  check(r.kind === "name" || typeof r.fields === "object", `record ${i}: fields`);
}

// Name component types.
const compTypes = new Set();
for (const r of ofKind("name")) {
  const name = Decoder.decode(unhex(r.hex), Name);
  for (const c of name.comps) {
    compTypes.add(c.type);
  }
  check(name.toString() === r.uri, `name ${r.uri}: uri differs from toString`);
}
for (const t of [1, 2, 8, 32, 33, 34, 35, 36, 37, 50, 52, 54, 56, 58, 252, 65535]) {
  check(compTypes.has(t), `no name component of type ${t}`);
}
check(ofKind("name").some((r) => r.hex === "0700"), "no empty name");
check(ofKind("name").some((r) => r.hex.includes("0800")), "no empty generic component");
for (const dots of ["2e", "2e2e", "2e2e2e"]) {
  check(ofKind("name").some((r) => r.hex.includes(`08${(dots.length / 2).toString(16).padStart(2, "0")}${dots}`)),
    `no component of ${dots.length / 2} periods`);
}

// Interest fields.
const interests = ofKind("interest");
for (const key of ["can_be_prefix", "must_be_fresh"]) {
  check(interests.some((r) => r.fields[key]) && interests.some((r) => !r.fields[key]), `Interest ${key} not varied`);
}
for (const key of ["lifetime", "hop_limit", "forwarding_hint", "app_params_hex", "sig_type"]) {
  check(interests.some((r) => r.fields[key] === null) && interests.some((r) => r.fields[key] !== null),
    `Interest ${key} not varied`);
}
check(interests.every((r) => Number.isInteger(r.fields.nonce)), "Interest without Nonce");
for (const t of [0, 1, 3, 4, 5, 200]) {
  check(interests.some((r) => r.fields.sig_type === t), `no signed Interest with SigType ${t}`);
}
for (const r of interests) {
  const interest = Decoder.decode(unhex(r.hex), Interest);
  check(interest.canBePrefix === r.fields.can_be_prefix && interest.mustBeFresh === r.fields.must_be_fresh &&
    interest.nonce === r.fields.nonce && interest.lifetime === (r.fields.lifetime ?? 4000) &&
    interest.hopLimit === (r.fields.hop_limit ?? 255), `Interest fields mismatch: ${r.note}`);
}

// Data fields.
const data = ofKind("data");
for (const t of [0, 1, 3, 4, 5, 200]) {
  check(data.some((r) => r.fields.sig_type === t), `no Data with SigType ${t}`);
}
for (const key of ["content_type", "freshness_period", "final_block_id_hex", "key_locator"]) {
  check(data.some((r) => r.fields[key] === null) && data.some((r) => r.fields[key] !== null), `Data ${key} not varied`);
}
check(data.some((r) => r.fields.key_locator?.digest_hex), "no KeyDigest KeyLocator");
check(data.some((r) => r.fields.content_hex === ""), "no empty content");
check(data.some((r) => r.fields.content_hex.length === 2 * 8192), "no 8 KiB content");
check(data.some((r) => r.fields.content_type === null && r.fields.freshness_period === null &&
  r.fields.final_block_id_hex === null), "no Data without MetaInfo fields");
const certs = data.filter((r) => r.fields.content_type === 2 && r.uri.includes("/8=KEY/"));
check(certs.length >= 10, `only ${certs.length} certificates`);
for (const r of data) {
  const d = Decoder.decode(unhex(r.hex), Data);
  check(hex(d.content) === r.fields.content_hex && d.contentType === (r.fields.content_type ?? 0) &&
    d.freshnessPeriod === (r.fields.freshness_period ?? 0) &&
    (d.finalBlockId ? hex(d.finalBlockId.tlv) : null) === r.fields.final_block_id_hex, `Data fields mismatch: ${r.note}`);
}

// LpPacket fields.
const lps = ofKind("lp");
for (const reason of [0, 50, 100, 150]) {
  check(lps.some((r) => r.fields.nack_reason === reason), `no Nack reason ${reason}`);
}
for (const key of ["fragment_hex", "sequence", "frag_index", "frag_count", "pit_token_hex", "congestion_mark"]) {
  check(lps.some((r) => key in r.fields), `no LpPacket with ${key}`);
}

// ---------------------------------------------------------------- verify

const verifyIn = [];
const expected = [];
function addVerify(rec, expect) {
  const id = `v${verifyIn.length}`;
  verifyIn.push(typeof rec === "string" ? rec : toJsonLine({ id, ...rec }));
  expected.push({ id: typeof rec === "string" ? null : id, ...expect });
}

for (const r of [...data, ...interests]) {
  const isCert = certs.includes(r);
  const selfSigned = isCert && r.cert_hex === r.hex;
  const signed = r.fields.sig_type !== null && r.fields.sig_type !== 200;
  addVerify({
    kind: isCert ? "cert" : r.kind, hex: r.hex,
    cert_hex: selfSigned ? null : r.cert_hex ?? null, hmac_key_hex: r.hmac_key_hex ?? null,
  }, { decoded: true, verified: signed, uri: r.uri, sig_type: r.fields.sig_type, content_hex: r.fields.content_hex ?? null,
    cert: isCert, paramsDigestOk: r.kind === "interest" && r.fields.app_params_hex !== null ? true : null, note: r.note });

  if (signed && r.hex.length > 2) {
    // Flip a bit in the last octet, which is inside the signature value.
    const tampered = r.hex.slice(0, -2) + (Number.parseInt(r.hex.slice(-2), 16) ^ 0x01).toString(16).padStart(2, "0");
    addVerify({
      kind: isCert ? "cert" : r.kind, hex: tampered,
      cert_hex: selfSigned ? null : r.cert_hex ?? null, hmac_key_hex: r.hmac_key_hex ?? null,
    }, { decoded: true, verified: false, note: `tampered: ${r.note}` });
  }
}
// Signed Interests with a tampered signature but a recomputed (correct) ParamsDigest,
// so that the signature itself is what fails.
for (const r of interests.filter((i) => i.fields.sig_type !== null && i.fields.sig_type !== 200)) {
  const interest = Decoder.decode(unhex(r.hex), Interest);
  const sigValue = Uint8Array.from(interest.sigValue);
  sigValue[sigValue.length - 1] ^= 0x01;
  interest.sigValue = sigValue;
  await interest.updateParamsDigest();
  addVerify({ kind: "interest", hex: hex(Encoder.encode(interest)), cert_hex: r.cert_hex ?? null,
    hmac_key_hex: r.hmac_key_hex ?? null }, { decoded: true, verified: false, error: /bad signature/,
    note: `tampered signature, fixed ParamsDigest: ${r.note}` });
}

const ecdsaData = data.find((r) => r.fields.sig_type === 3 && !certs.includes(r));
const rsaCert = certs.find((r) => r.fields.sig_type === 1);
const hmacData = data.find((r) => r.fields.sig_type === 4);
addVerify({ kind: "data", hex: ecdsaData.hex, cert_hex: rsaCert.hex, hmac_key_hex: null },
  { decoded: true, verified: false, note: "ECDSA Data with an RSA certificate" });
addVerify({ kind: "data", hex: hmacData.hex, cert_hex: null, hmac_key_hex: "00".repeat(32) },
  { decoded: true, verified: false, note: "HMAC Data with the wrong key" });
addVerify({ kind: "data", hex: ecdsaData.hex, cert_hex: null, hmac_key_hex: null },
  { decoded: true, verified: false, note: "ECDSA Data without cert_hex" });
addVerify({ kind: "data", hex: "zz", cert_hex: null, hmac_key_hex: null }, { decoded: false, note: "bad hex" });
addVerify({ kind: "data", hex: ecdsaData.hex.slice(0, 20), cert_hex: null, hmac_key_hex: null },
  { decoded: false, note: "truncated Data" });
addVerify({ kind: "interest", hex: ecdsaData.hex, cert_hex: null, hmac_key_hex: null },
  { decoded: false, note: "Data given as Interest" });
addVerify({ kind: "nack", hex: "0500", cert_hex: null, hmac_key_hex: null }, { decoded: false, note: "unknown kind" });
addVerify("{not json", { decoded: false, note: "bad JSON line" });

const verifyInPath = path.join(workdir, "verify_in.jsonl");
const verifyOutPath = path.join(workdir, "verify_out.jsonl");
writeFileSync(verifyInPath, verifyIn.map((line) => `${line}\n`).join(""));
runScript("verify.mjs", verifyInPath, verifyOutPath);
const verifyOut = readJsonLines(verifyOutPath);
check(verifyOut.length === expected.length, `verify: ${verifyOut.length} results for ${expected.length} inputs`);
for (const [i, exp] of expected.entries()) {
  const got = verifyOut[i] ?? {};
  const what = `verify ${exp.id} (${exp.note}): ${JSON.stringify({ ...got, content_hex: undefined })}`;
  check(got.id === exp.id, `${what}: id`);
  check(got.decoded === exp.decoded, `${what}: decoded`);
  check(exp.decoded ? got.error === null || !exp.verified : typeof got.error === "string", `${what}: error`);
  if (exp.error) {
    check(exp.error.test(got.error ?? ""), `${what}: error text`);
  }
  if (exp.verified !== undefined) {
    check(got.verified === exp.verified, `${what}: verified`);
  }
  if (exp.uri !== undefined) {
    check(got.uri === exp.uri && got.sig_type === exp.sig_type && got.content_hex === exp.content_hex, `${what}: values`);
    check(got.params_digest_ok === exp.paramsDigestOk, `${what}: params_digest_ok`);
    check(exp.cert ? /^\d{8}T\d{6}$/.test(got.validity?.not_before) && /^\d{8}T\d{6}$/.test(got.validity?.not_after) :
      got.validity === null, `${what}: validity`);
  }
}

// ---------------------------------------------------------------- uri

const uriCases = [];
for (const r of ofKind("name")) {
  uriCases.push([r.uri, r.hex, r.uri], [r.alt_uri, r.hex, r.uri]);
}
for (const r of [...interests, ...data]) {
  const pkt = Decoder.decode(unhex(r.hex), r.kind === "data" ? Data : Interest);
  uriCases.push([r.uri, hex(Encoder.encode(pkt.name)), r.uri], [r.alt_uri, hex(Encoder.encode(pkt.name)), r.uri]);
}
const handWritten = [
  ["/", "0700"], ["ndn:/a", "0703080161"], ["a/b", "0706080161080162"], ["/a//b/", "0706080161080162"],
  ["/...", "07020800"], ["/8=...", "07020800"], ["/....", "070308012e"], ["/%2e%2E%2e", "070508032e2e2e"],
  ["/seg=5", "0703320105"], ["/50=%05", "0703320105"], ["/v=256", "070436020100"], ["/32=metadata", "070a20086d65746164617461"],
  ["/sha256digest=" + "ab".repeat(32), `07220120${"ab".repeat(32)}`], ["/hello%20world", "070d080b68656c6c6f20776f726c64"],
];
for (const [input, wantHex] of handWritten) {
  uriCases.push([input, wantHex, undefined]);
}
const uriInPath = path.join(workdir, "uri_in.txt");
const uriOutPath = path.join(workdir, "uri_out.jsonl");
writeFileSync(uriInPath, uriCases.map(([input]) => `${input}\n`).join(""));
runScript("uri.mjs", uriInPath, uriOutPath);
const uriOut = readJsonLines(uriOutPath);
check(uriOut.length === uriCases.length, `uri: ${uriOut.length} results for ${uriCases.length} inputs`);
for (const [i, [input, wantHex, wantUri]] of uriCases.entries()) {
  const got = uriOut[i] ?? {};
  const what = `uri ${JSON.stringify(input.slice(0, 80))}: ${JSON.stringify(got).slice(0, 300)}`;
  check(got.input === input && got.ok === true && got.error === null, `${what}: not ok`);
  check(got.hex === wantHex, `${what}: hex`);
  if (wantUri !== undefined) {
    check(got.uri === wantUri, `${what}: uri`);
  }
}

// ---------------------------------------------------------------- report

const summary = `${recs.length} records, ${verifyIn.length} verify cases, ${uriCases.length} uri cases (workdir ${workdir})`;
if (failures.length > 0) {
  process.stderr.write(`SELFCHECK FAILED: ${failures.length} problem(s); ${summary}\n`);
  for (const f of failures.slice(0, 50)) {
    process.stderr.write(`  - ${f}\n`);
  }
  process.exit(1);
}
process.stdout.write(`selfcheck OK: ${summary}\n`);
