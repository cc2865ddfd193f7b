// Helpers shared by the NDNts interop scripts (see tests/interop/CONTRACT.md).

import { readFileSync, writeFileSync } from "node:fs";

import { AltUri } from "@ndn/naming-convention2";
import { ControlResponse } from "@ndn/nfdmgmt";
import { UnixTransport } from "@ndn/node-transport";
import { Data, Interest, NackHeader, Name } from "@ndn/packet";
import { Decoder, NNI } from "@ndn/tlv";
import { fromHex, toHex } from "@ndn/util";

/** Lowercase hex of a byte array (NDNts's own toHex is uppercase). */
export function hex(bytes) {
  return toHex(bytes).toLowerCase();
}

/** Strict hex decoding (NDNts's fromHex silently accepts garbage). */
export function unhex(s) {
  if (typeof s !== "string" || !/^(?:[\da-f]{2})*$/i.test(s)) {
    throw new Error("invalid hex string");
  }
  return fromHex(s);
}

/** Message of an error value, for JSON output. */
export function errorText(err) {
  return err instanceof Error ? err.message : String(err);
}

const BIGINT_MARK = "\u0000bigint:";

/** One JSON line; bigint values are written as exact JSON integers. */
export function toJsonLine(obj) {
  return JSON.stringify(obj, (_key, v) => typeof v === "bigint" ? `${BIGINT_MARK}${v}` : v)
    .replaceAll(/"\\u0000bigint:(\d+)"/g, "$1");
}

/** Write records as JSONL. */
export function writeJsonLines(path, records) {
  writeFileSync(path, records.map((r) => `${toJsonLine(r)}\n`).join(""));
}

/**
 * Read the lines of a text file, without line terminators.
 * A trailing newline does not produce a final empty line.
 */
export function readLines(path) {
  const lines = readFileSync(path, "utf8").split("\n").map((line) => line.replace(/\r$/, ""));
  if (lines.at(-1) === "") {
    lines.pop();
  }
  return lines;
}

/** Fail with a usage message unless exactly `n` arguments were given. */
export function argsOrUsage(n, usage) {
  const args = process.argv.slice(2);
  if (args.length !== n) {
    process.stderr.write(`usage: ${usage}\n`);
    process.exit(2);
  }
  return args;
}

/** Run an async main(); any uncaught exception gives exit code 1. */
export function runMain(main) {
  main().catch((err) => {
    process.stderr.write(`${err?.stack ?? err}\n`);
    process.exit(1);
  });
}

/**
 * Children of a TLV, as a Map from TLV-TYPE to the first child TLV of that type.
 * Used to learn which elements are actually present on the wire.
 */
export function childMap(tlvBytes) {
  const { vd } = new Decoder(tlvBytes).read();
  const children = new Map();
  while (!vd.eof) {
    const child = vd.read();
    if (!children.has(child.type)) {
      children.set(child.type, child);
    }
  }
  return children;
}

/** Optional NNI element: number (bigint if beyond 2^53), or null when absent. */
function optNni(child) {
  if (!child) {
    return null;
  }
  const n = NNI.decode(child.value, { big: true });
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
}

/** URI printed with the rev3 naming conventions (seg=, v=, t=, sha256digest=, ...). */
export function altUri(name) {
  return AltUri.ofName(name);
}

function keyLocatorField(sigInfo) {
  const kl = sigInfo?.keyLocator;
  if (kl?.name) {
    return { name: kl.name.toString() };
  }
  if (kl?.digest) {
    return { digest_hex: hex(kl.digest) };
  }
  return null;
}

/** `fields` of an Interest, derived from its wire encoding. */
export function interestFields(wire) {
  const interest = Decoder.decode(wire, Interest);
  const c = childMap(wire);
  return {
    interest,
    fields: {
      can_be_prefix: c.has(0x21),
      must_be_fresh: c.has(0x12),
      nonce: optNni(c.get(0x0A)),
      lifetime: optNni(c.get(0x0C)),
      hop_limit: optNni(c.get(0x22)),
      forwarding_hint: c.has(0x1E) ? interest.fwHint.delegations.map((n) => n.toString()) : null,
      app_params_hex: c.has(0x24) ? hex(c.get(0x24).value) : null,
      sig_type: c.has(0x2C) ? interest.sigInfo.type : null,
    },
  };
}

/** `fields` of a Data, derived from its wire encoding. */
export function dataFields(wire) {
  const data = Decoder.decode(wire, Data);
  const c = childMap(wire);
  const meta = c.has(0x14) ? childMap(c.get(0x14).tlv) : new Map();
  return {
    data,
    fields: {
      content_type: optNni(meta.get(0x18)),
      freshness_period: optNni(meta.get(0x19)),
      final_block_id_hex: meta.has(0x1A) ? hex(meta.get(0x1A).value) : null,
      content_hex: c.has(0x15) ? hex(c.get(0x15).value) : "",
      sig_type: data.sigInfo.type,
      key_locator: keyLocatorField(data.sigInfo),
    },
  };
}

/** `fields` of an LpPacket, derived from its wire encoding (only elements present). */
export function lpFields(wire) {
  const c = childMap(wire);
  const fields = {};
  if (c.has(0x50)) {
    fields.fragment_hex = hex(c.get(0x50).value);
  }
  if (c.has(0x51)) {
    fields.sequence = optNni(c.get(0x51));
  }
  if (c.has(0x52)) {
    fields.frag_index = optNni(c.get(0x52));
  }
  if (c.has(0x53)) {
    fields.frag_count = optNni(c.get(0x53));
  }
  if (c.has(0x62)) {
    fields.pit_token_hex = hex(c.get(0x62).value);
  }
  if (c.has(0x0320)) {
    fields.nack_reason = new Decoder(c.get(0x0320).tlv).decode(NackHeader).reason;
  }
  if (c.has(0x0340)) {
    fields.congestion_mark = optNni(c.get(0x0340));
  }
  return fields;
}

/** Decode a Name TLV. */
export function decodeName(wire) {
  return Decoder.decode(wire, Name);
}

/**
 * Connect a producer to the forwarder's Unix stream socket the way an NDNts application does
 * (UnixTransport.createFace into the default logical forwarder) and return the uplink face.
 * SIGTERM/SIGINT close every object in `closers` (pushed to later as well) and the uplink and
 * exit 0; the forwarder closing the connection exits 0 too, writing `downNote` to stderr first
 * when one is given. A connection that cannot be made calls `fail(message)`.
 */
export async function connectProducer(socket, { fail, closers, downNote = null }) {
  let l3face;
  let uplink;
  let stopping = false;
  const stop = () => {
    stopping = true;
    for (const c of closers) {
      c?.close();
    }
    uplink?.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  try {
    uplink = await UnixTransport.createFace({ callback: (_t, l3) => { l3face = l3; } }, socket);
  } catch (err) {
    fail(`cannot connect to ${socket}: ${errorText(err)}`);
  }
  l3face.addEventListener("down", () => {
    if (!stopping) {
      if (downNote) {
        process.stderr.write(`${downNote}\n`);
      }
      process.exit(0);
    }
  });
  return uplink;
}

const REGISTER_PREFIXES = ["/localhost/nfd/rib/register", "/localhop/nfd/rib/register"]
  .map((u) => new Name(u));

/**
 * Watch the rib/register ControlResponses that reach `uplink` through the logical forwarder
 * `fw` (its "pktrx" event): once `want` of them said 200, write `ready` to stdout. A response
 * that does not decode or says anything but 200 calls `fail` (naming `prefix` when given), and
 * so does having fewer than `want` within `timeoutMs`.
 */
export function watchRegistrations(fw, uplink, { want, timeoutMs, prefix = null, fail }) {
  let accepted = 0;
  const timer = setTimeout(() => fail(`no answer to rib/register${prefix ? ` for ${prefix}` : ""} within ${timeoutMs} ms`),
    timeoutMs);
  fw.addEventListener("pktrx", ({ face, packet }) => {
    const data = packet.l3;
    if (face !== uplink || !(data instanceof Data) || !REGISTER_PREFIXES.some((p) => p.isPrefixOf(data.name))) {
      return;
    }
    let cr;
    try {
      cr = Decoder.decode(data.content, ControlResponse);
    } catch (err) {
      fail(`cannot decode the rib/register ControlResponse: ${errorText(err)}`);
    }
    if (cr.statusCode !== 200) {
      fail(`registration${prefix ? ` of ${prefix}` : ""} failed: ${cr.statusCode} ${cr.statusText}`);
    }
    if (++accepted === want) {
      clearTimeout(timer);
      process.stdout.write("ready\n");
    }
  });
}
