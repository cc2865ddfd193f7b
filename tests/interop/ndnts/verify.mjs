// Granary → NDNts: decode and verify packets with NDNts (tests/interop/CONTRACT.md §2).
//
//   node verify.mjs IN.jsonl OUT.jsonl
//
// One output line per input line, in the same order. A bad record (bad JSON, bad hex,
// undecodable packet, bad signature) is reported in its output line; the script still exits 0.
//
// Verification:
//   SigType 0 (DigestSha256)   digestSigning
//   SigType 4 (HMAC)           HMAC key imported from hmac_key_hex
//   SigType 1/3/5 (RSA/ECDSA/Ed25519)
//                              public key imported from the certificate in cert_hex, or from the
//                              packet itself when kind=cert and cert_hex is null (self-signed);
//                              the certificate must pass NDNts Certificate.fromData (certificate
//                              name, ContentType KEY, ValidityPeriod). Its ValidityPeriod is NOT
//                              checked against the current time, and the KeyLocator is not matched
//                              against the certificate name: only the signature is judged.
//   SigType 200 (Null) and unsigned Interests: verified=false (there is no signature).
//
// Extra output key beyond the contract: "params_digest_ok" — for an Interest with
// AppParameters, whether its ParametersSha256DigestComponent matches (NDNts
// validateParamsDigest); null for Data and for Interests without AppParameters.
// (Verifying a signed Interest also checks the ParamsDigest first.)

import { Certificate, createVerifier, HMAC, SigningAlgorithmListFull } from "@ndn/keychain";
import { Data, digestSigning, Interest, SigType } from "@ndn/packet";
import { Decoder } from "@ndn/tlv";

import { argsOrUsage, errorText, hex, readLines, runMain, unhex, writeJsonLines } from "./common.mjs";

/** Verifier for the packet's SigType, built from the record's key material. */
async function makeVerifier(rec, pkt) {
  const sigType = pkt.sigInfo?.type;
  switch (sigType) {
    case undefined: {
      throw new Error("packet is not signed (no SignatureInfo)");
    }
    case SigType.Sha256: {
      return digestSigning;
    }
    case SigType.Null: {
      throw new Error("SigType Null (200) carries no signature to verify");
    }
    case SigType.HmacWithSha256: {
      if (!rec.hmac_key_hex) {
        throw new Error("hmac_key_hex is required for SigType 4");
      }
      const key = await HMAC.cryptoGenerate({ importRaw: unhex(rec.hmac_key_hex) }, false);
      return createVerifier(HMAC, key);
    }
    default: {
      let certData;
      if (rec.cert_hex) {
        certData = Decoder.decode(unhex(rec.cert_hex), Data);
      } else if (rec.kind === "cert") {
        certData = pkt; // self-signed
      } else {
        throw new Error(`cert_hex is required for SigType ${sigType}`);
      }
      const cert = Certificate.fromData(certData);
      const [algo, key] = await cert.importPublicKey(SigningAlgorithmListFull);
      if (algo.sigType !== sigType) {
        throw new Error(`certificate key is for SigType ${algo.sigType}, packet has SigType ${sigType}`);
      }
      return createVerifier(algo, key);
    }
  }
}

function validityOf(data) {
  const validity = data.sigInfo.validity;
  if (!validity) {
    return null;
  }
  const [notBefore, notAfter] = validity.toString().split("-");
  return { not_before: notBefore, not_after: notAfter };
}

async function verifyRecord(line) {
  const out = {
    id: null, decoded: false, uri: null, sig_type: null, verified: false, error: null,
    content_hex: null, validity: null, params_digest_ok: null,
  };
  let rec;
  let pkt;
  try {
    rec = JSON.parse(line);
    out.id = rec.id ?? null;
    const wire = unhex(rec.hex);
    switch (rec.kind) {
      case "data":
      case "cert": {
        pkt = Decoder.decode(wire, Data);
        break;
      }
      case "interest": {
        pkt = Decoder.decode(wire, Interest);
        break;
      }
      default: {
        throw new Error(`unknown kind ${JSON.stringify(rec.kind)}`);
      }
    }
  } catch (err) {
    out.error = `decode: ${errorText(err)}`;
    return out;
  }

  out.decoded = true;
  out.uri = pkt.name.toString();
  out.sig_type = pkt.sigInfo?.type ?? null;
  if (pkt instanceof Data) {
    out.content_hex = hex(pkt.content);
  }
  if (rec.kind === "cert") {
    out.validity = validityOf(pkt);
  }
  if (pkt instanceof Interest && pkt.appParameters) {
    try {
      await pkt.validateParamsDigest();
      out.params_digest_ok = true;
    } catch {
      out.params_digest_ok = false;
    }
  }

  try {
    if (rec.kind === "cert") {
      Certificate.fromData(pkt); // throws if NDNts does not accept it as a certificate
    }
    const verifier = await makeVerifier(rec, pkt);
    await verifier.verify(pkt);
    out.verified = true;
  } catch (err) {
    out.error = `verify: ${errorText(err)}`;
  }
  return out;
}

async function main() {
  const [inPath, outPath] = argsOrUsage(2, "node verify.mjs IN.jsonl OUT.jsonl");
  const results = [];
  for (const line of readLines(inPath)) {
    if (line.trim() === "") {
      continue;
    }
    results.push(await verifyRecord(line));
  }
  writeJsonLines(outPath, results);
}

runMain(main);
