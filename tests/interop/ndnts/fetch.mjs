// An NDNts fetcher for Granary's repository tests (tests/interop/CONTRACT.md §5).
//
//   node fetch.mjs SOCKET NAME OUT [--timeout S] [--accept-null]
//
// SOCKET is a Unix socket path, or a ws:// URL (@ndn/ws-transport: the node's WebSocket face).
//
// Connects to the node over the Unix stream socket SOCKET the way an NDNts application does
// (UnixTransport.createFace into the default logical forwarder, route "/"), then:
//
//  1. version discovery with RDR: retrieveMetadata(NAME) from @ndn/rdr expresses
//     NAME/32=metadata with CanBePrefix and MustBeFresh (consume() from @ndn/endpoint, verifier
//     digestSigning, 2 retransmissions). The Content is decoded by a Metadata subclass that also
//     reads the NDN-DPDK FileMetadata fields (FinalBlockId 26, SegmentSize 0xF500, Size 0xF502,
//     Mode 0xF504, Atime/Btime/Ctime/Mtime 0xF506..0xF50C). The versioned name must be NAME plus
//     one VersionNameComponent;
//  2. fetch(versioned) from @ndn/segmented-object (its own congestion control and
//     retransmission; Segment3 = seg= components) with a verifier that is digestSigning.verify
//     (SigType must be DigestSha256 (0) and the digest must match) and counts the Data it passed.
//     The Data are taken in segment order; each one's name must be versioned/seg=<i>. The
//     payload is written to OUT and hashed.
//
// Checks after the fetch: the number of segments is FinalBlockId + 1 and the byte count is Size
// (when the metadata has them).
//
// stdout: exactly one JSON line (also on failure, after a usage error excepted):
//   {"versioned": "<AltUri of the versioned name>"|null, "bytes": n|null, "segments": k,
//    "verified": true|false, "sha256": "<hex of OUT>"|null, "error": null|"<message>",
//    "segment_interests": n (segment Interests sent, retransmissions included),
//    "congestion_marks": n (Data received with an NDNLPv2 CongestionMark),
//    "metadata": {"data_name": AltUri, "final_block_id": n|null, "segment_size": n|null,
//                 "size": n|null, "mode": n|null, "atime": ns|null, "btime": ns|null,
//                 "ctime": ns|null, "mtime": ns|null} | null}
// `verified` is true only when the metadata Data and every segment passed digestSigning.verify.
//
// --accept-null (for bench/transfer.sh against a repository configured with
// `segment_signature = "null"`): a segment with a NullSignature (SigType 200) is accepted
// unchecked — NDNts has no way to check it against Granary's manifest — and counted in
// "null_signed"; such a run has "verified": false and still exits 0.
//
// A Nack (NDNts's logical forwarder ignores Nacks; the script watches the face's incoming packets
// through the forwarder's public "pktrx" event) for the discovery Interest, or one other than
// Congestion for a segment, ends the run at once: a name the node does not have fails within
// milliseconds ("no such object"), not after the Interest lifetime.
//
// Exit: 0 on success; 1 on any failure (cannot connect, Nack, timeout, bad signature, bad
// metadata, short file), with the message on stderr too, and OUT removed; 2 on a usage error;
// 3 when the overall deadline (--timeout, default 60 s) passes.

import { createHash } from "node:crypto";
import { open, unlink } from "node:fs/promises";

import { Forwarder } from "@ndn/fw";
import { AltUri, Segment, Version } from "@ndn/naming-convention2";
import { UnixTransport } from "@ndn/node-transport";
import { Component, digestSigning, Interest, Nack, Name, SigType, TT } from "@ndn/packet";
import { WsTransport } from "@ndn/ws-transport";
import { Metadata, MetadataKeyword, retrieveMetadata } from "@ndn/rdr";
import { fetch } from "@ndn/segmented-object";
import { EvDecoder } from "@ndn/tlv";

import { errorText, toJsonLine } from "./common.mjs";

const USAGE = "node fetch.mjs SOCKET NAME OUT [--timeout S] [--accept-null]";

// NDN-DPDK's file server metadata (ndn6file): the RDR Metadata with more fields.
const FILE_FIELDS = [
  [0xF500, "segment_size"], [0xF502, "size"], [0xF504, "mode"],
  [0xF506, "atime"], [0xF508, "btime"], [0xF50A, "ctime"], [0xF50C, "mtime"],
];

class FileMetadata extends Metadata {
  final_block_id = null;
  static decodeFrom(decoder) {
    return FILE_EVD.decodeValue(new FileMetadata(), decoder);
  }
}
for (const [, key] of FILE_FIELDS) {
  FileMetadata.prototype[key] = null;
}
const FILE_EVD = new EvDecoder("FileMetadata")
  .add(TT.Name, (t, { value }) => { t.name = new Name(value); }, { required: true })
  .add(TT.FinalBlock, (t, { vd }) => {
    const comp = vd.decode(Component);
    if (!comp.is(Segment)) {
      throw new Error(`metadata FinalBlockId ${AltUri.ofComponent(comp)} is not a segment number`);
    }
    t.final_block_id = comp.as(Segment);
  });
for (const [tt, key] of FILE_FIELDS) {
  // times are nanoseconds (beyond 2^53): keep them exact as BigInt.
  FILE_EVD.add(tt, (t, { nniBig }) => {
    t[key] = nniBig <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(nniBig) : nniBig;
  });
}
// like @ndn/rdr's own Metadata decoder: unknown or out-of-order elements are ignored
FILE_EVD.setIsCritical(EvDecoder.neverCritical);

function usage(msg) {
  process.stderr.write(`fetch.mjs: ${msg}\nusage: ${USAGE}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const pos = [];
  const opts = { timeout: 60, acceptNull: false };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg === "--timeout") {
      const v = argv[++i];
      if (v === undefined || !/^\d+(\.\d+)?$/.test(v) || Number(v) <= 0) {
        usage(`${arg} needs a positive number of seconds`);
      }
      opts.timeout = Number(v);
    } else if (arg === "--accept-null") {
      opts.acceptNull = true;
    } else if (arg.startsWith("--")) {
      usage(`unknown option ${arg}`);
    } else {
      pos.push(arg);
    }
  }
  if (pos.length !== 3) {
    usage("expected SOCKET NAME OUT");
  }
  [opts.socket, opts.nameUri, opts.out] = pos;
  try {
    opts.name = AltUri.parseName(opts.nameUri);
  } catch (err) {
    usage(`bad NAME ${JSON.stringify(opts.nameUri)}: ${errorText(err)}`);
  }
  if (opts.name.get(-1)?.equals(MetadataKeyword)) {
    opts.name = opts.name.getPrefix(-1);
  }
  return opts;
}

const result = {
  versioned: null, bytes: null, segments: 0, verified: false, sha256: null, error: null,
  metadata: null, null_signed: 0, segment_interests: 0, congestion_marks: 0,
};
let outPath;
let outCreated = false;

async function finish(code, msg) {
  if (msg) {
    result.error = msg;
    process.stderr.write(`fetch.mjs: ${msg}\n`);
    if (outCreated) {
      await unlink(outPath).catch(() => undefined);
    }
  }
  process.stdout.write(`${toJsonLine(result)}\n`, () => process.exit(code));
}

class Failure extends Error {}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  outPath = opts.out;
  setTimeout(() => void finish(3, `overall deadline of ${opts.timeout} s passed`), opts.timeout * 1000).unref();

  const fw = Forwarder.getDefault();
  let l3face;
  let uplink;
  try {
    // SOCKET may also be a WebSocket URL (ws://HOST:PORT[/ndn]): a Granary
    // WebSocket face, one packet per binary message.
    const transport = /^wss?:\/\//.test(opts.socket) ? WsTransport : UnixTransport;
    uplink = await transport.createFace({ callback: (_t, l3) => { l3face = l3; } }, opts.socket);
  } catch (err) {
    return finish(1, `cannot connect to ${opts.socket}: ${errorText(err)}`);
  }

  // Abort whatever is pending on connection loss or on a Nack for our names.
  const abort = new AbortController();
  let reason;
  const stop = (msg) => {
    reason ??= msg;
    abort.abort();
  };
  l3face.addEventListener("down", () => stop("the node closed the connection"));
  const discovery = opts.name.append(MetadataKeyword);
  let versioned;
  let finalSeg = null;
  // Segment Interests sent (their excess over the segments is the
  // retransmissions) and congestion-marked Data received.
  fw.addEventListener("pkttx", ({ face, packet }) => {
    if (face === uplink && packet.l3 instanceof Interest && versioned?.isPrefixOf(packet.l3.name)) {
      ++result.segment_interests;
    }
  });
  fw.addEventListener("pktrx", ({ face, packet }) => {
    if (face === uplink && packet.congestionMark) {
      ++result.congestion_marks;
    }
  });
  fw.addEventListener("pktrx", ({ face, packet }) => {
    if (face !== uplink || !(packet.l3 instanceof Nack)) {
      return;
    }
    const { name } = packet.l3.interest;
    const why = `Nack reason ${packet.l3.reason}`;
    if (name.equals(discovery)) {
      stop(`no such object: ${AltUri.ofName(discovery)} was answered with a ${why}`);
    } else if (versioned?.isPrefixOf(name) && packet.l3.reason !== 50 && finalSeg !== null &&
               name.length === versioned.length + 1 && name.get(-1).is(Segment) &&
               name.get(-1).as(Segment) <= finalSeg) {
      // (Interests past the last segment are normal: NDNts's fetcher learns the end only from
      // the Data whose name ends with its FinalBlockId, so their Nacks are ignored.)
      stop(`segment Interest ${AltUri.ofName(name)} was answered with a ${why}`);
    }
  });

  let nVerified = 0;
  let lastVerified;
  const verifier = {
    async verify(pkt) {
      if (opts.acceptNull && pkt.sigInfo?.type === SigType.Null) {
        ++result.null_signed;
        return;
      }
      await digestSigning.verify(pkt);
      ++nVerified;
      lastVerified = pkt.name;
    },
  };

  // 1. RDR version discovery
  let md;
  try {
    md = await retrieveMetadata(opts.name, FileMetadata, {
      verifier, retx: 2, signal: abort.signal, describe: "granary-interop-fetch-rdr",
    });
  } catch (err) {
    const text = errorText(err);
    return finish(1, reason ?? (/verify/i.test(text) ? `signature check failed: ${text}` :
      `version discovery (${AltUri.ofName(discovery)}) failed: ${text}`));
  }
  const mdVerified = nVerified === 1;
  nVerified = 0;
  result.metadata = { data_name: AltUri.ofName(lastVerified) };
  for (const key of ["final_block_id", ...FILE_FIELDS.map(([, k]) => k)]) {
    result.metadata[key] = md[key];
  }
  versioned = md.name;
  result.versioned = AltUri.ofName(versioned);
  if (versioned.length !== opts.name.length + 1 || !opts.name.isPrefixOf(versioned) ||
      !versioned.get(-1).is(Version)) {
    return finish(1, `metadata names ${result.versioned}, which is not ${AltUri.ofName(opts.name)}/v=<version>`);
  }

  finalSeg = md.final_block_id;

  // 2. segmented fetch, verified
  const hash = createHash("sha256");
  let fh;
  let bytes = 0;
  let seg = 0; // segments written to OUT
  try {
    fh = await open(opts.out, "w");
    outCreated = true;
    const fetching = fetch(versioned, {
      verifier, signal: abort.signal, describe: "granary-interop-fetch",
      segmentRange: finalSeg === null ? undefined : [0, finalSeg + 1],
    });
    for await (const data of fetching) {
      const want = versioned.append(Segment, seg);
      if (!data.name.equals(want)) {
        throw new Failure(`segment ${seg} came as ${AltUri.ofName(data.name)}, expected ${AltUri.ofName(want)}`);
      }
      if (md.final_block_id !== null && !data.finalBlockId?.equals(Segment.create(md.final_block_id))) {
        throw new Failure(`segment ${seg} has FinalBlockId ${data.finalBlockId ? AltUri.ofComponent(data.finalBlockId) : "(none)"}, metadata says seg=${md.final_block_id}`);
      }
      hash.update(data.content);
      await fh.write(data.content);
      bytes += data.content.length;
      ++seg;
    }
    result.segments = seg;
    result.bytes = bytes;
  } catch (err) {
    result.segments = seg;
    await fh?.close();
    if (err instanceof Failure) {
      return finish(1, err.message);
    }
    const text = errorText(err);
    return finish(1, reason ?? (/verify|sig/i.test(text) ? `signature check failed: ${text}` : `fetch of ${result.versioned} failed: ${text}`));
  }
  await fh.close();
  result.sha256 = hash.digest("hex");
  result.verified = mdVerified && nVerified === result.segments;
  uplink.close();

  if (md.final_block_id !== null && result.segments !== md.final_block_id + 1) {
    return finish(1, `got ${result.segments} segments, metadata FinalBlockId says ${md.final_block_id + 1}`);
  }
  if (md.size !== null && BigInt(result.bytes) !== BigInt(md.size)) {
    return finish(1, `got ${result.bytes} bytes, metadata Size says ${md.size}`);
  }
  if (!result.verified && !(opts.acceptNull && mdVerified &&
                             nVerified + result.null_signed === result.segments)) {
    return finish(1, "not every packet went through the verifier");
  }
  return finish(0);
}

main().catch((err) => finish(1, err?.stack ?? String(err)));
