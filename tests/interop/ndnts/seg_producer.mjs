// An NDNts segmented-object producer for Granary's fetch tests (tests/interop/CONTRACT.md §6).
//
//   node seg_producer.mjs SOCKET PREFIX FILE [--version V] [--chunk N] [--rdr]
//
// Connects to the forwarder over the Unix stream socket SOCKET the way an NDNts application does
// (UnixTransport.createFace, enableNfdPrefixReg) and serves the bytes of FILE with
// serveVersioned(PREFIX, BufferChunkSource(FILE, {chunkSize: N})) from @ndn/segmented-object:
// PREFIX/v=V/seg=i, N bytes per segment (default 8000), FinalBlockId on every segment,
// DigestSha256 signatures, and NDNts's CanBePrefix version discovery on PREFIX. With --rdr it
// also serves RDR metadata with @ndn/rdr serveMetadata (PREFIX/32=metadata, Content = the
// versioned Name, signed by NDNts's default metadata signer).
//
// stdout: `ready` once the forwarder accepted every prefix registration (ControlResponse 200).
// Exits 0 on SIGTERM/SIGINT or when the forwarder closes the connection; 1 on a failure; 2 on a
// usage error.

import { readFileSync } from "node:fs";

import { Forwarder } from "@ndn/fw";
import { AltUri } from "@ndn/naming-convention2";
import { enableNfdPrefixReg } from "@ndn/nfdmgmt";
import { digestSigning } from "@ndn/packet";
import { Metadata, serveMetadata } from "@ndn/rdr";
import { BufferChunkSource, serveVersioned } from "@ndn/segmented-object";
import { Version } from "@ndn/naming-convention2";

import { connectProducer, errorText, watchRegistrations } from "./common.mjs";

const USAGE = "node seg_producer.mjs SOCKET PREFIX FILE [--version V] [--chunk N] [--rdr]";

function usage(msg) {
  process.stderr.write(`seg_producer.mjs: ${msg}\nusage: ${USAGE}\n`);
  process.exit(2);
}

function fail(msg) {
  process.stderr.write(`seg_producer.mjs: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const pos = [];
  const opts = { version: Date.now(), chunk: 8000, rdr: false };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg === "--version" || arg === "--chunk") {
      const v = argv[++i];
      if (v === undefined || !/^\d+$/.test(v)) {
        usage(`${arg} needs a non-negative integer`);
      }
      opts[arg.slice(2)] = Number.parseInt(v, 10);
    } else if (arg === "--rdr") {
      opts.rdr = true;
    } else if (arg.startsWith("--")) {
      usage(`unknown option ${arg}`);
    } else {
      pos.push(arg);
    }
  }
  if (pos.length !== 3) {
    usage("expected SOCKET, PREFIX and FILE");
  }
  [opts.socket, opts.prefix, opts.file] = pos;
  try {
    opts.prefixName = AltUri.parseName(opts.prefix);
  } catch (err) {
    usage(`bad PREFIX ${JSON.stringify(opts.prefix)}: ${errorText(err)}`);
  }
  return opts;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  let bytes;
  try {
    bytes = readFileSync(opts.file);
  } catch (err) {
    fail(`cannot read ${opts.file}: ${errorText(err)}`);
  }
  const fw = Forwarder.getDefault();
  const closers = [];
  const uplink = await connectProducer(opts.socket, { fail, closers });
  watchRegistrations(fw, uplink, { want: opts.rdr ? 2 : 1, timeoutMs: 6000, fail });
  enableNfdPrefixReg(uplink, { retry: { retries: 0 } });
  const source = new BufferChunkSource(new Uint8Array(bytes), { chunkSize: opts.chunk });
  closers.push(serveVersioned(opts.prefixName, source, {
    version: opts.version,
    signer: digestSigning,
    pOpts: { describe: "granary-interop-seg-producer" },
  }));
  if (opts.rdr) {
    const versioned = opts.prefixName.append(Version.create(opts.version));
    // NDNts's default metadata signer (no `signer` option), as its users get it.
    closers.push(serveMetadata(new Metadata(versioned), {
      prefix: opts.prefixName,
    }));
  }
}

main().catch((err) => fail(err?.stack ?? String(err)));
