// NDNts → Granary: generate packets with NDNts and describe them (tests/interop/CONTRACT.md §1).
//
//   node gen_packets.mjs OUT.jsonl
//
// The set of records is fixed; only random parts (keys, signature values, Nonces left to
// NDNts) differ between runs. `fields` is computed by decoding the produced wire, so it
// states what is actually on the wire, not what was asked for.
//
// Extra top-level keys beyond the contract (ignore them if not needed):
//   alt_uri      — name printed with the rev3 naming conventions (seg=, v=, sha256digest=, ...)
//   cert_hex     — certificate of the signing key (RSA/ECDSA/Ed25519 signatures)
//   hmac_key_hex — raw HMAC key (HmacWithSha256 signatures)

import { createHash } from "node:crypto";

import { CertNaming, Certificate, createSigner, ECDSA, Ed25519, generateSigningKey, HMAC, RSA } from "@ndn/keychain";
import { Fragmenter, LpPacket } from "@ndn/lp";
import {
  ByteOffset, ByteOffset2, GenericNumber, Keyword, Segment, Segment2, SequenceNum, SequenceNum2,
  Timestamp, Timestamp2, Version, Version2,
} from "@ndn/naming-convention2";
import {
  Component, Data, digestSigning, FwHint, ImplicitDigest, Interest, NackHeader, Name, nullSigner,
  ParamsDigest, SigInfo, SigType, ValidityPeriod,
} from "@ndn/packet";
import { Decoder, Encoder } from "@ndn/tlv";
import { toUtf8 } from "@ndn/util";

import { altUri, argsOrUsage, dataFields, decodeName, hex, interestFields, lpFields, runMain, writeJsonLines } from "./common.mjs";

const records = [];

// ---------------------------------------------------------------- byte helpers

/** Deterministic filler bytes. */
function pattern(length, seed = 0) {
  return Uint8Array.from({ length }, (_, i) => (i * 31 + seed * 7 + 3) & 0xFF);
}

function sha256(bytes) {
  return new Uint8Array(createHash("sha256").update(bytes).digest());
}

const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, i) => i);
const CONTENT_8K = pattern(8192, 8);
const HMAC_KEY = pattern(32, 42);

// ---------------------------------------------------------------- record writers

function addName(name, note) {
  const wire = Encoder.encode(name);
  const uri = decodeName(wire).toString();
  records.push({ kind: "name", hex: hex(wire), uri, alt_uri: altUri(name), fields: {}, note });
}

function keyMaterial(signer) {
  const extra = {};
  if (signer?.certData) {
    extra.cert_hex = hex(Encoder.encode(signer.certData));
  }
  if (signer?.hmacKey) {
    extra.hmac_key_hex = hex(signer.hmacKey);
  }
  return extra;
}

function addInterest(interest, note, signer) {
  const wire = Encoder.encode(interest);
  const { interest: decoded, fields } = interestFields(wire);
  if (hex(Encoder.encode(decoded)) !== hex(wire)) {
    throw new Error(`Interest does not re-encode identically: ${note}`);
  }
  records.push({
    kind: "interest", hex: hex(wire), uri: decoded.name.toString(), alt_uri: altUri(decoded.name),
    fields, note, ...keyMaterial(signer),
  });
}

function addData(data, note, signer) {
  const wire = Encoder.encode(data);
  const { data: decoded, fields } = dataFields(wire);
  records.push({
    kind: "data", hex: hex(wire), uri: decoded.name.toString(), alt_uri: altUri(decoded.name),
    fields, note, ...keyMaterial(signer),
  });
}

function addLp(lp, note) {
  const wire = Encoder.encode(lp);
  Decoder.decode(wire, LpPacket); // must decode with NDNts itself
  records.push({ kind: "lp", hex: hex(wire), fields: lpFields(wire), note });
}

// ---------------------------------------------------------------- names

const comp = (type, value) => new Component(type, value);

/** Number values exercising every NNI width (1, 2, 4, 8 octets) and boundaries. */
const NUMBERS = [0, 1, 127, 255, 256, 4660, 65535, 65536, 16777216, 0xFFFFFFFF, 0x100000000,
  1_700_000_000_000, Number.MAX_SAFE_INTEGER];
const BIG_NUMBERS = [2n ** 63n, 2n ** 64n - 1n];

function genNames() {
  addName(new Name(), "empty name (zero components)");

  // GenericNameComponent text and bytes.
  const generic = [
    ["a", "single letter"],
    ["hello", "plain text"],
    ["ABCxyz0189", "letters and digits"],
    ["-._~", "unreserved punctuation (never escaped)"],
    ["hello world", "space (escaped %20)"],
    ["a/b", "slash inside a component (escaped %2F)"],
    ["100%", "percent sign (escaped %25)"],
    ["a=b", "equals sign (escaped %3D)"],
    ["8=x", "text that looks like a typed URI component"],
    ["seg=5", "text that looks like an alternate-URI segment"],
    ["sha256digest=00", "text that looks like an alternate-URI digest"],
    ["?#[]@!$&'()*+,;:", "URI reserved characters"],
    ["\"<>\\^`{|}", "other printable ASCII that needs escaping"],
    ["日本語", "UTF-8 multibyte text"],
    ["ümlaut", "UTF-8 two-byte sequence"],
    ["😀", "UTF-8 four-byte emoji"],
    ["\t\n\r", "control characters"],
    ["NDN", "upper case"],
    ["%2F", "literal percent-escape text (double escaping)"],
  ];
  for (const [text, note] of generic) {
    addName(new Name([comp(8, text)]), `generic component: ${note}`);
  }
  addName(new Name([comp(8, ALL_BYTES)]), "generic component with every byte value 0x00-0xFF");
  addName(new Name([comp(8, Uint8Array.of(0))]), "generic component of one 0x00 byte");
  addName(new Name([comp(8, Uint8Array.of(0xFF))]), "generic component of one 0xFF byte");
  addName(new Name([comp(8, pattern(252))]), "generic component of 252 octets (1-octet TLV-LENGTH max)");
  addName(new Name([comp(8, pattern(253))]), "generic component of 253 octets (3-octet TLV-LENGTH)");
  addName(new Name([comp(8, pattern(1000))]), "generic component of 1000 octets");
  addName(new Name([comp(8, pattern(65536))]), "generic component of 65536 octets (5-octet TLV-LENGTH)");

  // Empty components and period-only values.
  const empty = comp(8);
  addName(new Name([empty]), "single empty generic component");
  addName(new Name([empty, empty]), "two empty generic components");
  addName(new Name([empty, comp(8, "a")]), "empty generic component first");
  addName(new Name([comp(8, "a"), empty, comp(8, "b")]), "empty generic component in the middle");
  addName(new Name([comp(8, "a"), empty]), "empty generic component last");
  for (const dots of [".", "..", "...", "....", "....."]) {
    addName(new Name([comp(8, dots)]), `generic component of ${dots.length} period(s)`);
    addName(new Name([comp(8, "x"), comp(8, dots), comp(8, "y")]), `period-only component (${dots.length}) in the middle`);
  }
  addName(new Name([comp(8, ".a")]), "period then letter (not period-only)");
  addName(new Name([comp(8, "a.b")]), "period inside text");
  for (const type of [32, 50, 252, 65535]) {
    addName(new Name([comp(type)]), `empty component of type ${type}`);
  }

  // Digest components.
  const digests = [
    ["all zero", new Uint8Array(32)],
    ["all 0xFF", new Uint8Array(32).fill(0xFF)],
    ["sha256('hello')", sha256(toUtf8("hello"))],
    ["pattern", pattern(32, 1)],
  ];
  for (const [what, d] of digests) {
    addName(new Name("/8=data").append(ImplicitDigest, d), `ImplicitSha256DigestComponent (${what})`);
    addName(new Name("/8=intr").append(ParamsDigest, d), `ParametersSha256DigestComponent (${what})`);
  }
  addName(new Name([ImplicitDigest.create(pattern(32, 2))]), "implicit digest as the only component");
  addName(new Name([ParamsDigest.create(pattern(32, 3)), comp(8, "after")]), "params digest followed by a component");
  addName(new Name("/8=a").append(ParamsDigest, pattern(32, 4)).append(ImplicitDigest, pattern(32, 5)),
    "params digest then implicit digest");

  // Keyword (type 32).
  for (const kw of ["metadata", "PA", "KEY", "", "with space", "..."]) {
    addName(new Name("/8=app").append(Keyword, kw), `KeywordNameComponent '${kw}'`);
  }
  addName(new Name([Keyword.create(Uint8Array.of(0, 1, 0xFE))]), "KeywordNameComponent with binary value");

  // Naming conventions rev3 (types 50/52/54/56/58) and rev2 (types 33-37).
  const numbered = [
    ["Segment rev3 (50)", Segment], ["ByteOffset rev3 (52)", ByteOffset], ["Version rev3 (54)", Version],
    ["SequenceNum rev3 (58)", SequenceNum], ["GenericNumber (8)", GenericNumber],
  ];
  for (const [what, conv] of numbered) {
    for (const n of NUMBERS) {
      addName(new Name("/8=seq").append(conv, n), `${what} = ${n}`);
    }
    for (const n of BIG_NUMBERS) {
      addName(new Name("/8=seq").append(conv.big, n), `${what} = ${n} (bigint)`);
    }
  }
  for (const n of [0, 1, 1_700_000_000_000, 8_787_511_468_039]) {
    addName(new Name("/8=ts").append(Timestamp.ms, n),
      `Timestamp rev3 (56) from milliseconds ${n} (wire value is microseconds)`);
  }
  for (const n of [0, 1, 1_700_000_000_000_123, Number.MAX_SAFE_INTEGER]) {
    addName(new Name("/8=ts").append(Timestamp.us, n), `Timestamp rev3 (56), microseconds ${n}`);
  }
  addName(new Name("/8=ts").append(Timestamp, new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 678))),
    "Timestamp rev3 (56) from a Date");
  const rev2 = [
    ["Segment rev2 (33)", Segment2], ["ByteOffset rev2 (34)", ByteOffset2], ["Version rev2 (35)", Version2],
    ["Timestamp rev2 (36)", Timestamp2.us], ["SequenceNum rev2 (37)", SequenceNum2],
  ];
  for (const [what, conv] of rev2) {
    for (const n of [0, 300, 70000, 0xFFFFFFFF + 1]) {
      addName(new Name("/8=old").append(conv, n), `${what} = ${n}`);
    }
  }
  addName(new Name("/8=video/8=clip").append(Version, 3).append(Segment, 17), "typical versioned, segmented name");
  addName(new Name("/8=a").append(Segment, 1).append(ByteOffset, 2).append(Version, 3)
    .append(Timestamp.us, 4).append(SequenceNum, 5), "all rev3 convention types in one name");

  // Convention types carrying values that are not valid NNIs (typed components with opaque bytes).
  addName(new Name([comp(50, Uint8Array.of(1, 2, 3))]), "type 50 with a 3-octet value (not a valid segment NNI)");
  addName(new Name([comp(54, toUtf8("v1"))]), "type 54 with text value (not a valid version NNI)");
  addName(new Name([comp(56, pattern(5))]), "type 56 with a 5-octet value");

  // Other numbered component types.
  const otherTypes = [3, 7, 9, 16, 31, 33, 100, 127, 128, 200, 252, 253, 254, 255, 256, 1000, 4096, 32767, 32768,
    65534, 65535];
  for (const type of otherTypes) {
    addName(new Name([comp(8, "t"), comp(type, `v${type}`)]), `component of type ${type} with text value`);
  }
  addName(new Name([comp(252, ALL_BYTES)]), "type 252 with every byte value");
  addName(new Name([comp(65535, Uint8Array.of(0))]), "type 65535 with a 0x00 byte");
  addName(new Name([comp(65535, ".")]), "type 65535 with a period-only value");

  // Longer names.
  addName(new Name(Array.from({ length: 30 }, (_, i) => comp(8, `c${i}`))), "30 generic components");
  addName(new Name(Array.from({ length: 12 }, (_, i) => comp([8, 32, 50, 52, 54, 56, 58, 1, 2, 9, 252, 65535][i],
    i === 7 || i === 8 ? pattern(32, i) : Uint8Array.of(i)))), "one component of each of 12 types");
  addName(new Name("/8=localhost/8=nfd/8=rib/8=register"), "management-style name");
  addName(new Name("/8=ndn/8=edu/8=ucla/8=%40%3A"), "name parsed from canonical URI with escapes");
}

// ---------------------------------------------------------------- signers

const FIXED_VALIDITY = new ValidityPeriod(Date.UTC(2024, 0, 1, 0, 0, 0), Date.UTC(2044, 0, 1, 0, 0, 0));

/** An asymmetric signer with a self-signed certificate and fixed names. */
async function makeAsymSigner(label, algo, sigType) {
  const keyName = new Name(`/8=ndnts/8=${label}/8=KEY/8=k1`);
  const [privateKey, publicKey] = await generateSigningKey(keyName, algo);
  const certName = CertNaming.makeCertName(keyName, { issuerId: CertNaming.ISSUER_SELF, version: Version.create(1) });
  const cert = await Certificate.build({
    name: certName, validity: FIXED_VALIDITY, publicKeySpki: publicKey.spki, signer: privateKey,
  });
  return {
    label, sigType, algo, privateKey, publicKey, keyName, certName,
    certData: cert.data, keyDigest: sha256(publicKey.spki),
  };
}

async function makeSigners() {
  const hmacKeyName = new Name("/8=ndnts/8=hmac/8=KEY/8=k1");
  const hmacKey = await HMAC.cryptoGenerate({ importRaw: HMAC_KEY }, false);
  const signers = [
    { label: "digest", sigType: SigType.Sha256, privateKey: digestSigning },
    await makeAsymSigner("rsa", RSA, SigType.Sha256WithRsa),
    await makeAsymSigner("ecdsa", ECDSA, SigType.Sha256WithEcdsa),
    {
      label: "hmac", sigType: SigType.HmacWithSha256, privateKey: createSigner(hmacKeyName, HMAC, hmacKey),
      keyName: hmacKeyName, hmacKey: HMAC_KEY, keyDigest: sha256(HMAC_KEY),
    },
    await makeAsymSigner("ed25519", Ed25519, SigType.Ed25519),
    { label: "null", sigType: SigType.Null, privateKey: nullSigner },
  ];
  return signers;
}

/**
 * Signer with a KeyLocator variant: 0 = key name, 1 = certificate name, 2 = KeyDigest.
 * Digest and Null signatures never carry a KeyLocator.
 */
function withKeyLocator(signer, variant) {
  if (!signer.keyName) {
    return [signer.privateKey, "no KeyLocator"];
  }
  switch (variant % 3) {
    case 1: {
      if (signer.certName) {
        return [signer.privateKey.withKeyLocator(signer.certName), "KeyLocator=cert name"];
      }
      return [signer.privateKey, "KeyLocator=key name"];
    }
    case 2: {
      return [signer.privateKey.withKeyLocator(signer.keyDigest), "KeyLocator=KeyDigest"];
    }
    default: {
      return [signer.privateKey, "KeyLocator=key name"];
    }
  }
}

// ---------------------------------------------------------------- Interests

const INTEREST_NAMES = [
  new Name("/8=ndn/8=interest"),
  new Name("/8=a"),
  new Name("/8=video").append(Version, 7).append(Segment, 0),
  new Name("/8=app").append(Keyword, "metadata"),
  new Name([comp(8, "sp ace"), comp(8), comp(8, "...")]),
  new Name("/8=x").append(Timestamp.ms, 1_700_000_000_000).append(SequenceNum, 99),
  new Name([comp(8, "typed"), comp(252, "x"), comp(65535, Uint8Array.of(0xFF))]),
  new Name("/8=full").append(ImplicitDigest, pattern(32, 9)),
];
const FWHINTS = [
  new FwHint("/8=isp/8=router"),
  new FwHint(["/8=hint1", "/8=hint2/8=sub"]),
  new FwHint([new Name("/8=h").append(Segment, 3), "/8=second", "/8=third"]),
];
const NONCES = [0, 1, 0xDEADBEEF, 0xFFFFFFFF, 0x12345678];
const LIFETIMES = [0, 1, 100, 10000, 3_600_000, 0xFFFFFFFF + 1];
const HOP_LIMITS = [0, 1, 64, 254];
const APP_PARAMS = [new Uint8Array(), toUtf8("params"), pattern(1000, 5), ALL_BYTES];

async function genInterests(signers) {
  // Every combination of the seven optional elements; values vary with the combination index.
  for (let mask = 0; mask < 128; ++mask) {
    const has = (bit) => (mask & (1 << bit)) !== 0;
    const args = [INTEREST_NAMES[mask % INTEREST_NAMES.length]];
    const parts = [];
    if (has(0)) {
      args.push(Interest.CanBePrefix);
      parts.push("CanBePrefix");
    }
    if (has(1)) {
      args.push(Interest.MustBeFresh);
      parts.push("MustBeFresh");
    }
    if (has(2)) {
      args.push(FWHINTS[mask % FWHINTS.length]);
      parts.push("ForwardingHint");
    }
    if (has(3)) {
      const nonce = NONCES[mask % NONCES.length];
      args.push(Interest.Nonce(nonce));
      parts.push(`Nonce=${nonce}`);
    } else {
      parts.push("Nonce(random; NDNts always emits one)");
    }
    if (has(4)) {
      const lifetime = LIFETIMES[mask % LIFETIMES.length];
      args.push(Interest.Lifetime(lifetime));
      parts.push(`InterestLifetime=${lifetime}`);
    }
    if (has(5)) {
      const hopLimit = HOP_LIMITS[mask % HOP_LIMITS.length];
      args.push(Interest.HopLimit(hopLimit));
      parts.push(`HopLimit=${hopLimit}`);
    }
    const interest = new Interest(...args);
    if (has(6)) {
      interest.appParameters = APP_PARAMS[mask % APP_PARAMS.length];
      await interest.updateParamsDigest();
      parts.push(`AppParameters(${interest.appParameters.length} octets)`);
    }
    addInterest(interest, `Interest element combination ${mask}: ${parts.join(", ")}`);
  }

  // Defaults that NDNts leaves off the wire, and other special cases.
  addInterest(new Interest("/8=def", Interest.Lifetime(4000), Interest.Nonce(7)),
    "InterestLifetime=4000 requested: NDNts omits it (it is the default)");
  addInterest(new Interest("/8=def", Interest.HopLimit(255), Interest.Nonce(8)),
    "HopLimit=255 requested: NDNts omits it (it is the default)");
  addInterest(new Interest("/8=def", Interest.Lifetime(4000.9), Interest.Nonce(9)),
    "fractional InterestLifetime 4000.9 is truncated to 4000 and omitted");
  addInterest(new Interest("/8=def", Interest.Lifetime(1234.5), Interest.Nonce(10)),
    "fractional InterestLifetime 1234.5 is truncated to 1234");
  {
    const interest = new Interest(new Name([comp(8, "a"), ParamsDigest.PLACEHOLDER, comp(8, "b")]),
      toUtf8("mid"), Interest.Nonce(11));
    await interest.updateParamsDigest();
    addInterest(interest, "ParametersSha256DigestComponent in the middle of the name");
  }
  {
    const interest = new Interest("/8=empty-params", new Uint8Array(), Interest.Nonce(12));
    await interest.updateParamsDigest();
    addInterest(interest, "empty AppParameters (AppParameters TLV with zero length)");
  }
  {
    const interest = new Interest("/8=big-params", pattern(8192, 6), Interest.Nonce(13), Interest.MustBeFresh);
    await interest.updateParamsDigest();
    addInterest(interest, "8 KiB AppParameters");
  }
  for (const name of INTEREST_NAMES) {
    addInterest(new Interest(name, Interest.Nonce(0x0A0B0C0D)), "minimal Interest (Name and Nonce only)");
  }

  // Signed Interests (v0.3), each signer × SigInfo variant × with/without AppParameters.
  const sigInfoVariants = [
    ["no SigNonce/SigTime/SigSeqNum", () => []],
    ["SigNonce", () => [SigInfo.Nonce(pattern(8, 1))]],
    ["SigTime", () => [SigInfo.Time(1_700_000_000_000)]],
    ["SigSeqNum", () => [SigInfo.SeqNum(42n)]],
    ["SigNonce+SigTime+SigSeqNum", () => [SigInfo.Nonce(pattern(16, 2)), SigInfo.Time(1_700_000_000_123),
      SigInfo.SeqNum(2n ** 64n - 1n)]],
  ];
  let index = 0;
  for (const signer of signers) {
    for (const [siWhat, siArgs] of sigInfoVariants) {
      for (const withParams of [false, true]) {
        const args = [new Name(`/8=signed/8=${signer.label}`), Interest.Nonce(0x5160_0000 + index)];
        if (index % 3 === 1) {
          args.push(Interest.CanBePrefix, Interest.MustBeFresh, Interest.Lifetime(2000));
        }
        if (index % 4 === 2) {
          args.push(FWHINTS[0], Interest.HopLimit(32));
        }
        if (withParams) {
          args.push(toUtf8(`command ${index}`));
        }
        const interest = new Interest(...args);
        interest.sigInfo = new SigInfo(...siArgs());
        const [key, klWhat] = withKeyLocator(signer, index);
        await key.sign(interest);
        addInterest(interest,
          `signed Interest v0.3, SigType ${signer.sigType} (${signer.label}), ${klWhat}, ${siWhat}, ` +
          (withParams ? "with AppParameters" : "empty AppParameters"),
          signer);
        ++index;
      }
    }
  }
}

// ---------------------------------------------------------------- Data

const CONTENTS = [
  ["empty content (Content element omitted)", new Uint8Array()],
  ["text content", toUtf8("hello from NDNts")],
  ["binary content", ALL_BYTES],
  ["8 KiB content", CONTENT_8K],
];
const CONTENT_TYPES = [1, 2, 3, 5, 1000, 0xFFFFFFFF + 1];
const FRESHNESS = [1, 1000, 4000, 3_600_000, 0xFFFFFFFF + 1];

async function genData(signers) {
  let index = 0;
  for (const signer of signers) {
    for (let mask = 0; mask < 8; ++mask) {
      for (const contentPick of [mask % 4, (mask + 2) % 4]) {
        const [contentWhat, content] = CONTENTS[contentPick];
        const name = new Name(`/8=data/8=${signer.label}`).append(Segment, index);
        const data = new Data(name, content);
        const parts = [contentWhat];
        if (mask & 1) {
          data.contentType = CONTENT_TYPES[index % CONTENT_TYPES.length];
          parts.push(`ContentType=${data.contentType}`);
        }
        if (mask & 2) {
          data.freshnessPeriod = FRESHNESS[index % FRESHNESS.length];
          parts.push(`FreshnessPeriod=${data.freshnessPeriod}`);
        }
        if (mask & 4) {
          if (index % 2 === 0) {
            data.isFinalBlock = true;
            parts.push("FinalBlockId=last name component (segment)");
          } else {
            data.finalBlockId = Segment.create(1000 + index);
            parts.push("FinalBlockId=another segment");
          }
        }
        if ((mask & 7) === 0) {
          parts.push("no MetaInfo");
        }
        const [key, klWhat] = withKeyLocator(signer, index);
        await key.sign(data);
        addData(data, `Data, SigType ${signer.sigType} (${signer.label}), ${klWhat}, ${parts.join(", ")}`, signer);
        ++index;
      }
    }
  }

  const digest = signers[0];
  const sign = async (data) => {
    await digestSigning.sign(data);
    return data;
  };
  addData(new Data("/8=unsigned", toUtf8("x")),
    "Data never passed to a signer: NDNts encodes SigType Null (200) with an empty SignatureValue");
  addData(await sign(new Data("/8=meta", Data.ContentType(0), Data.FreshnessPeriod(0), toUtf8("x"))),
    "ContentType=0 and FreshnessPeriod=0 requested: NDNts omits both (and the empty MetaInfo)", digest);
  addData(await sign(new Data("/8=final/8=generic", Data.FinalBlock)), "FinalBlockId = generic last component", digest);
  {
    const data = new Data("/8=final/8=other", toUtf8("x"));
    data.finalBlockId = comp(8);
    addData(await sign(data), "FinalBlockId = empty generic component", digest);
  }
  {
    const data = new Data("/8=final/8=typed", toUtf8("x"));
    data.finalBlockId = comp(65535, "z");
    addData(await sign(data), "FinalBlockId = type 65535 component", digest);
  }
  addData(await sign(new Data(new Name("/8=obj").append(Version, 5).append(Segment, 9), Data.FinalBlock,
    Data.FreshnessPeriod(10000), Data.ContentType(0), toUtf8("last"))), "last segment of a versioned object", digest);
  addData(await sign(new Data("/8=meta/8=all", Data.ContentType(1), Data.FreshnessPeriod(1), Data.FinalBlock, CONTENT_8K)),
    "all MetaInfo fields and 8 KiB content", digest);
  const dataNames = [
    new Name([comp(8)]), new Name([comp(8, "...")]), new Name([comp(8, "sp ace"), comp(8, "%")]),
    new Name("/8=a").append(Keyword, "metadata").append(Version, 1700000000000).append(Segment, 0),
    new Name([comp(252, "x"), comp(65535, "y"), comp(9, ALL_BYTES)]),
    new Name("/8=p").append(ParamsDigest, pattern(32, 7)),
    new Name("/8=t").append(Timestamp.us, 1).append(SequenceNum.big, 2n ** 64n - 1n),
    new Name(Array.from({ length: 40 }, (_, i) => comp(8, `n${i}`))),
  ];
  for (const name of dataNames) {
    addData(await sign(new Data(name, toUtf8("named"))), "Data name coverage", digest);
  }
  for (const signer of signers) {
    const data = new Data(`/8=tiny/8=${signer.label}`);
    await signer.privateKey.sign(data);
    addData(data, `Data without Content or MetaInfo, SigType ${signer.sigType} (${signer.label})`, signer);
  }
}

// ---------------------------------------------------------------- certificates

async function genCertificates(signers) {
  const asym = signers.filter((s) => s.certData);
  const ca = asym.find((s) => s.label === "ecdsa");
  for (const s of asym) {
    addData(s.certData, `self-signed certificate (Certificate.build), SigType ${s.sigType} (${s.label}), ` +
      `ValidityPeriod ${FIXED_VALIDITY}`, s);
  }
  for (const s of asym) {
    // selfSign picks IssuerId "self" and a version component of the current time in milliseconds.
    const cert = await Certificate.selfSign({ privateKey: s.privateKey, publicKey: s.publicKey });
    addData(cert.data, `Certificate.selfSign defaults (ValidityPeriod.MAX ${cert.validity}, version = current time), ` +
      `SigType ${s.sigType} (${s.label})`, { ...s, certData: cert.data });
  }
  const validities = [
    ["expired", new ValidityPeriod(Date.UTC(2000, 0, 1), Date.UTC(2001, 0, 1))],
    ["not yet valid", new ValidityPeriod(Date.UTC(2090, 0, 1), Date.UTC(2100, 0, 1))],
    ["milliseconds truncated", new ValidityPeriod(Date.UTC(2024, 5, 15, 12, 30, 45, 999), Date.UTC(2030, 11, 31, 23, 59, 59, 500))],
  ];
  for (const s of asym) {
    for (const [i, [what, validity]] of validities.entries()) {
      const cert = await Certificate.build({
        name: CertNaming.makeCertName(s.keyName, { issuerId: new Component(8, "ca"), version: Version.create(10 + i) }),
        validity, freshness: 86_400_000, publicKeySpki: s.publicKey.spki, signer: ca.privateKey,
      });
      addData(cert.data, `certificate for ${s.label} key issued by the ECDSA CA key, ${what} ValidityPeriod ${validity}`, ca);
    }
  }
  const hmac = signers.find((s) => s.label === "hmac");
  const digest = signers.find((s) => s.label === "digest");
  for (const s of [hmac, digest]) {
    const cert = await Certificate.build({
      name: CertNaming.makeCertName(ca.keyName, { issuerId: new Component(8, s.label), version: Version.create(20) }),
      validity: FIXED_VALIDITY, publicKeySpki: ca.publicKey.spki, signer: s.privateKey,
    });
    addData(cert.data, `certificate of the ECDSA key signed with SigType ${s.sigType} (${s.label})`, s);
  }
}

// ---------------------------------------------------------------- LpPackets

function lp(props) {
  return Object.assign(new LpPacket(), props);
}

function genLp(l3) {
  const { interestWire, dataWire, bigDataWire } = l3;
  addLp(lp({ payload: interestWire }), "LpPacket with only a Fragment (Interest)");
  addLp(lp({ payload: dataWire }), "LpPacket with only a Fragment (Data)");
  addLp(lp({}), "empty LpPacket (IDLE)");
  for (const seq of [0n, 1n, 0xFFFFFFFFn, 2n ** 63n, 2n ** 64n - 1n]) {
    addLp(lp({ fragSeqNum: seq, payload: interestWire }), `Sequence=${seq} (always 8 octets), unfragmented`);
  }
  for (const token of [Uint8Array.of(0xA5), pattern(4, 1), pattern(8, 2), pattern(32, 3)]) {
    addLp(lp({ pitToken: token, payload: interestWire }), `PitToken of ${token.length} octets with Interest`);
    addLp(lp({ pitToken: token, payload: dataWire }), `PitToken of ${token.length} octets with Data`);
  }
  for (const reason of [0, 50, 100, 150, 1000]) {
    addLp(lp({ nack: new NackHeader(reason), payload: interestWire }), `Nack reason ${reason} with Interest`);
    addLp(lp({ nack: new NackHeader(reason), pitToken: pattern(8, reason), payload: interestWire }),
      `Nack reason ${reason} with PitToken`);
  }
  for (const mark of [0, 1, 2, 255, 65536]) {
    addLp(lp({ congestionMark: mark, payload: dataWire }),
      mark === 0 ? "CongestionMark=0 requested: NDNts omits it" : `CongestionMark=${mark}`);
  }
  addLp(lp({
    fragSeqNum: 77n, pitToken: pattern(8, 9), nack: new NackHeader(50), congestionMark: 1, payload: interestWire,
  }), "Sequence + PitToken + Nack + CongestionMark");
  addLp(lp({ fragSeqNum: 5n, pitToken: pattern(4, 4), congestionMark: 3, payload: dataWire }),
    "Sequence + PitToken + CongestionMark with Data");
  addLp(lp({ pitToken: pattern(8, 1) }), "PitToken without Fragment");
  addLp(lp({ nack: new NackHeader(150) }), "Nack without Fragment");

  // Real fragmentation of an 8 KiB Data packet, with and without L3 headers on the first fragment.
  for (const [mtu, headers] of [[1500, {}], [1200, { pitToken: pattern(8, 6), congestionMark: 1 }], [4000, {}]]) {
    const fragmenter = new Fragmenter();
    fragmenter.seqNumGen.current = 1000n * BigInt(mtu);
    const fragments = fragmenter.fragment(lp({ ...headers, payload: bigDataWire }), mtu);
    for (const frag of fragments) {
      addLp(frag, `fragment ${frag.fragIndex}/${frag.fragCount} of an 8 KiB Data, MTU ${mtu}` +
        (Object.keys(headers).length > 0 && frag.fragIndex === 0 ? ", L3 headers on first fragment" : ""));
    }
  }
  addLp(lp({ fragSeqNum: 9n, fragIndex: 2, fragCount: 3, payload: pattern(10, 1) }), "FragIndex=2 FragCount=3 set by hand");
  addLp(lp({ fragSeqNum: 10n, fragIndex: 0, fragCount: 300, payload: pattern(10, 2) }),
    "FragIndex=0 (omitted) FragCount=300 (2-octet NNI)");
}

// ---------------------------------------------------------------- main

async function main() {
  const [outPath] = argsOrUsage(1, "node gen_packets.mjs OUT.jsonl");
  const signers = await makeSigners();

  genNames();
  await genInterests(signers);
  await genData(signers);
  await genCertificates(signers);

  const interestWire = Encoder.encode(new Interest("/8=lp/8=interest", Interest.Nonce(0x01020304)));
  const data = new Data("/8=lp/8=data", toUtf8("lp payload"));
  await digestSigning.sign(data);
  const bigData = new Data(new Name("/8=lp/8=big").append(Segment, 0), CONTENT_8K);
  await digestSigning.sign(bigData);
  genLp({ interestWire, dataWire: Encoder.encode(data), bigDataWire: Encoder.encode(bigData) });

  writeJsonLines(outPath, records);
  const byKind = {};
  for (const { kind } of records) {
    byKind[kind] = (byKind[kind] ?? 0) + 1;
  }
  process.stderr.write(`wrote ${records.length} records: ${
    Object.entries(byKind).map(([k, n]) => `${k}=${n}`).join(" ")}\n`);
}

runMain(main);
