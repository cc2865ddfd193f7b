// URIs both ways with NDNts (tests/interop/CONTRACT.md §3).
//
//   node uri.mjs IN.txt OUT.jsonl
//
// Each input line is parsed with the NDNts Name constructor, using the rev3 alternate-URI
// component parser from @ndn/naming-convention2 (AltUri.parseName = new Name(uri, parseComponent)).
// It accepts the canonical "TYPE=value" form and also seg=, off=, v=, t=, seq=, sha256digest=,
// params-sha256=; a component that matches none of those is parsed by Component.from exactly as
// the plain `new Name(uri)` would.
//
// Output: "uri" is NDNts's canonical Name.toString() ("/8=a/50=%05"); the extra key "alt_uri"
// is the alternate form ("/a/seg=5").

import { AltUri } from "@ndn/naming-convention2";
import { Encoder } from "@ndn/tlv";

import { argsOrUsage, errorText, hex, readLines, runMain, writeJsonLines } from "./common.mjs";

function convert(input) {
  try {
    const name = AltUri.parseName(input);
    return {
      input, ok: true, hex: hex(Encoder.encode(name)), uri: name.toString(), alt_uri: AltUri.ofName(name), error: null,
    };
  } catch (err) {
    return { input, ok: false, hex: null, uri: null, alt_uri: null, error: errorText(err) };
  }
}

async function main() {
  const [inPath, outPath] = argsOrUsage(2, "node uri.mjs IN.txt OUT.jsonl");
  writeJsonLines(outPath, readLines(inPath).map(convert));
}

runMain(main);
