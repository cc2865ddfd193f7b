// An NDNts consumer for Granary's forwarder tests (tests/interop/CONTRACT.md §4).
//
//   node consumer.mjs SOCKET NAME [--can-be-prefix] [--must-be-fresh] [--lifetime MS] [--count K]
//
// Connects to the forwarder over the Unix stream socket SOCKET the way an NDNts application
// does (UnixTransport.createFace into the default logical forwarder, route "/"; when SOCKET is
// udp://HOST:PORT, UdpTransport.createFace to that address instead) and retrieves
// K pieces of Data (default 1) with consume() from @ndn/endpoint, one after the other. With
// K = 1 the Interest name is NAME; with K > 1 Interest i (0 <= i < K) is NAME plus a
// GenericNameComponent holding the decimal digits of i (NAME/0, NAME/1, ...). NAME is parsed
// with AltUri.parseName (so /a/seg=3 works as well as /8=a/50=%03).
//
// Interests: NDNts picks a random Nonce when it encodes the Interest; CanBePrefix and
// MustBeFresh only with the flags; InterestLifetime MS (default 4000, which NDNts leaves off the
// wire because it is the default); no HopLimit. The logical forwarder sends the Interest in an
// LpPacket with a 6-byte PitToken.
//
// One JSON line per Interest on stdout, in order:
//   {"name": "<AltUri of the Interest name>", "status": "data"|"nack"|"timeout",
//    "data_name": "<AltUri>"|null, "content_hex": "..."|null, "nack_reason": <int>|null,
//    "rtt_ms": <float>, "sig_type": <int>|null, "digest_ok": true|false|null,
//    "freshness_period": <int>|null}
// (names are printed with AltUri.ofName, like python-ndn prints them; the last three keys are
// extras: SigType, whether a DigestSha256 signature is correct (null for other SigTypes), and
// FreshnessPeriod, which NDNts reports as 0 when the element is absent).
//
// Nack: NDNts's logical forwarder drops incoming Nacks, so consume() alone would only time out.
// The script watches the face's incoming packets (the forwarder's public "pktrx" event); a Nack
// for the pending Interest's name aborts consume() (AbortSignal) and gives status "nack" with the
// NackReason (0 when the Nack has no reason).
//
// Deadlines: each Interest is abandoned (status "timeout") after lifetime + 2 s even if NDNts has
// not given up yet; the process exits 3 past K * (lifetime + 2 s) + 5 s in any case.
// Exit: 0 when every Interest got its line, 1 when the connection fails or is lost, 2 on a usage
// error.

import { consume } from "@ndn/endpoint";
import { Forwarder } from "@ndn/fw";
import { AltUri } from "@ndn/naming-convention2";
import { UdpTransport, UnixTransport } from "@ndn/node-transport";
import { digestSigning, Interest, Nack, SigType } from "@ndn/packet";

import { errorText, hex, toJsonLine } from "./common.mjs";

const USAGE = "node consumer.mjs SOCKET NAME [--can-be-prefix] [--must-be-fresh] [--lifetime MS] [--count K]";
const GRACE_MS = 2000;

function usage(msg) {
  process.stderr.write(`consumer.mjs: ${msg}\nusage: ${USAGE}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const pos = [];
  const opts = { canBePrefix: false, mustBeFresh: false, lifetime: 4000, count: 1 };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg === "--can-be-prefix") {
      opts.canBePrefix = true;
    } else if (arg === "--must-be-fresh") {
      opts.mustBeFresh = true;
    } else if (arg === "--lifetime" || arg === "--count") {
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
    usage("expected SOCKET and NAME");
  }
  if (opts.count < 1) {
    usage("--count must be >= 1");
  }
  [opts.socket, opts.name] = pos;
  let base;
  try {
    base = AltUri.parseName(opts.name);
  } catch (err) {
    usage(`bad NAME ${JSON.stringify(opts.name)}: ${errorText(err)}`);
  }
  opts.names = opts.count === 1 ? [base] : Array.from({ length: opts.count }, (_, i) => base.append(String(i)));
  return opts;
}

function fail(msg) {
  process.stderr.write(`consumer.mjs: ${msg}\n`);
  process.exit(1);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const overall = opts.count * (opts.lifetime + GRACE_MS) + 5000;
  setTimeout(() => {
    process.stderr.write(`consumer.mjs: overall deadline of ${overall} ms passed\n`);
    process.exit(3);
  }, overall);

  const fw = Forwarder.getDefault();
  let l3face;
  let uplink;
  try {
    const callback = (_t, l3) => { l3face = l3; };
    if (opts.socket.startsWith("udp://")) {
      const [host, port] = opts.socket.slice("udp://".length).split(":");
      uplink = await UdpTransport.createFace({ callback }, host, Number(port));
    } else {
      uplink = await UnixTransport.createFace({ callback }, opts.socket);
    }
  } catch (err) {
    fail(`cannot connect to ${opts.socket}: ${errorText(err)}`);
  }
  let lost = false;
  let abortPending;
  l3face.addEventListener("down", () => {
    lost = true;
    abortPending?.();
  });

  for (const name of opts.names) {
    if (lost) {
      break;
    }
    const rec = {
      name: AltUri.ofName(name), status: "timeout", data_name: null, content_hex: null,
      nack_reason: null, rtt_ms: null, sig_type: null, digest_ok: null, freshness_period: null,
    };
    const args = [name, Interest.Lifetime(opts.lifetime)];
    if (opts.canBePrefix) {
      args.push(Interest.CanBePrefix);
    }
    if (opts.mustBeFresh) {
      args.push(Interest.MustBeFresh);
    }
    const interest = new Interest(...args);

    const abort = new AbortController();
    abortPending = () => abort.abort();
    let nack;
    const onRx = ({ face, packet }) => {
      if (face === uplink && packet.l3 instanceof Nack && packet.l3.interest.name.equals(name)) {
        nack = packet.l3;
        abort.abort();
      }
    };
    fw.addEventListener("pktrx", onRx);
    const giveUp = setTimeout(() => abort.abort(), opts.lifetime + GRACE_MS);

    const start = performance.now();
    try {
      const data = await consume(interest, { signal: abort.signal, describe: "granary-interop-consumer" });
      rec.rtt_ms = performance.now() - start;
      rec.status = "data";
      rec.data_name = AltUri.ofName(data.name);
      rec.content_hex = hex(data.content);
      rec.freshness_period = data.freshnessPeriod;
      rec.sig_type = data.sigInfo.type;
      if (data.sigInfo.type === SigType.Sha256) {
        try {
          await digestSigning.verify(data);
          rec.digest_ok = true;
        } catch {
          rec.digest_ok = false;
        }
      }
    } catch {
      rec.rtt_ms = performance.now() - start;
      if (nack) {
        rec.status = "nack";
        rec.nack_reason = nack.reason;
      }
    } finally {
      clearTimeout(giveUp);
      fw.removeEventListener("pktrx", onRx);
    }
    if (lost && rec.status !== "data") {
      break;
    }
    process.stdout.write(`${toJsonLine(rec)}\n`);
  }

  if (lost) {
    fail("the forwarder closed the connection");
  }
  uplink.close();
  process.exit(0);
}

main().catch((err) => fail(err?.stack ?? String(err)));
