// An NDNts producer for Granary's forwarder tests (tests/interop/CONTRACT.md §4).
//
//   node producer.mjs SOCKET PREFIX [--size N] [--freshness MS]
//
// Connects to the forwarder over the Unix stream socket SOCKET the way an NDNts application
// does (UnixTransport.createFace into the default logical forwarder, route "/"), turns on NFD
// prefix registration with enableNfdPrefixReg (@ndn/nfdmgmt) and starts produce(PREFIX) from
// @ndn/endpoint. The producer's prefix announcement makes NfdPrefixReg send a rib/register
// command: a signed Interest v0.3 /localhost/nfd/rib/register/<ControlParameters>/<ParamsDigest>
// (ControlParameters: Name, Origin 65, Cost 0, Flags 2 = CAPTURE, ExpirationPeriod 1200000;
// empty ApplicationParameters; DigestSha256 with SignatureNonce and SignatureTime).
//
// Every Interest under PREFIX is answered with:
//   Name             exactly the Interest name
//   Content          N bytes (default 100): sha256(AltUri.ofName(name) as UTF-8) repeated and
//                    cut to N bytes. AltUri.ofName is NDNts's alternate URI (/a/b, seg=3, v=7 ...),
//                    which equals python-ndn's Name.to_str for names of plain generic components.
//   FreshnessPeriod  MS (default 1000; NDNts leaves the element out when MS is 0)
//   Signature        DigestSha256 (produce's dataSigner = digestSigning)
//
// stdout: `ready` once the forwarder answered the rib/register command with StatusCode 200,
// then `served <AltUri of the name>` for each Data.
//
// NfdPrefixReg normally retries a failed registration forever; here it is told not to retry
// (retry: { retries: 0 }), and the outcome is read from the ControlResponse that arrives on the
// face (the logical forwarder's public "pktrx" event). A response other than 200, or none within
// 6 s, gives exit 1 with a message. SIGTERM/SIGINT or the forwarder closing the connection gives
// exit 0; a usage error gives exit 2.

import { createHash } from "node:crypto";

import { produce } from "@ndn/endpoint";
import { Forwarder } from "@ndn/fw";
import { AltUri } from "@ndn/naming-convention2";
import { enableNfdPrefixReg } from "@ndn/nfdmgmt";
import { Data, digestSigning } from "@ndn/packet";

import { connectProducer, errorText, watchRegistrations } from "./common.mjs";

const USAGE = "node producer.mjs SOCKET PREFIX [--size N] [--freshness MS]";
const REGISTER_TIMEOUT = 6000; // NfdPrefixReg's command Interest has the default 4 s lifetime

function usage(msg) {
  process.stderr.write(`producer.mjs: ${msg}\nusage: ${USAGE}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const pos = [];
  const opts = { size: 100, freshness: 1000 };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg === "--size" || arg === "--freshness") {
      const v = argv[++i];
      if (v === undefined || !/^\d+$/.test(v)) {
        usage(`${arg} needs a non-negative integer`);
      }
      opts[arg.slice(2)] = Number.parseInt(v, 10);
    } else if (arg.startsWith("--")) {
      usage(`unknown option ${arg}`);
    } else {
      pos.push(arg);
    }
  }
  if (pos.length !== 2) {
    usage("expected SOCKET and PREFIX");
  }
  [opts.socket, opts.prefix] = pos;
  try {
    opts.prefixName = AltUri.parseName(opts.prefix);
  } catch (err) {
    usage(`bad PREFIX ${JSON.stringify(opts.prefix)}: ${errorText(err)}`);
  }
  return opts;
}

/** sha256 of the URI's UTF-8 bytes, repeated and cut to `size` bytes. */
function makeContent(uri, size) {
  const digest = createHash("sha256").update(uri, "utf8").digest();
  const out = new Uint8Array(size);
  for (let off = 0; off < size; off += digest.length) {
    out.set(digest.subarray(0, Math.min(digest.length, size - off)), off);
  }
  return out;
}

function fail(msg) {
  process.stderr.write(`producer.mjs: ${msg}\n`);
  process.exit(1);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const fw = Forwarder.getDefault();

  const closers = [];
  const uplink = await connectProducer(opts.socket, {
    fail,
    closers,
    downNote: "producer.mjs: the forwarder closed the connection",
  });
  // The outcome of rib/register, as it arrives from the forwarder.
  watchRegistrations(fw, uplink, { want: 1, timeoutMs: REGISTER_TIMEOUT, prefix: opts.prefix, fail });

  enableNfdPrefixReg(uplink, { retry: { retries: 0 } });
  closers.push(produce(opts.prefixName, async (interest) => {
    const uri = AltUri.ofName(interest.name);
    const data = new Data(interest.name, Data.FreshnessPeriod(opts.freshness), makeContent(uri, opts.size));
    process.stdout.write(`served ${uri}\n`);
    return data; // signed by dataSigner
  }, { dataSigner: digestSigning, describe: "granary-interop-producer" }));
}

main().catch((err) => fail(err?.stack ?? String(err)));
