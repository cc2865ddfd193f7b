#!/usr/bin/env python3
"""A python-ndn consumer of Granary's catalog protocol (docs/catalog-protocol.md).

Usage: catalog_query.py SOCKET CATALOG_PREFIX VERB JSON

Expresses CATALOG_PREFIX/VERB with the JSON request as ApplicationParameters
(python-ndn's appv2 sends parameters only in a signed Interest: DigestSha256 here; it
appends the ParametersSha256DigestComponent), CanBePrefix and
MustBeFresh; takes the versioned name and FinalBlockId from segment 0, fetches the
other segments by name, checks every DigestSha256 signature with python-ndn's
checker, and prints one JSON line:

  {"answer": <the parsed JSON answer>, "segments": N, "data_name": "<seg 0 name>",
   "verified": true, "error": null}

Exit status 0 on success, 1 on any failure (with "error" set).
"""
import asyncio
import json
import sys

from ndn.appv2 import NDNApp
from ndn.encoding import Component, Name, SignatureType
from ndn.security import DigestSha256Signer, sha256_digest_checker
from ndn.transport.stream_face import UnixFace
from ndn.types import ValidResult


async def validator(name, sig, _context):
    info = sig.signature_info
    if info is None or info.signature_type != SignatureType.DIGEST_SHA256:
        return ValidResult.FAIL
    return ValidResult.PASS if await sha256_digest_checker(name, sig) else ValidResult.FAIL


def main(argv) -> int:
    sock, prefix, verb, request = argv[1:5]
    result = {'answer': None, 'segments': 0, 'data_name': None, 'verified': False, 'error': None}
    app = NDNApp(face=UnixFace(sock))

    async def body():
        try:
            name = Name.from_str(prefix) + [Component.from_str(verb)]
            data_name, content, ctx = await app.express(
                name, validator, app_param=request.encode(),
                signer=DigestSha256Signer(for_interest=True), can_be_prefix=True,
                must_be_fresh=True, lifetime=4000)
            result['data_name'] = Name.to_str(data_name)
            fbi = ctx['meta_info'].final_block_id
            last = Component.to_number(fbi) if fbi is not None else 0
            body = bytearray(bytes(content or b''))
            versioned = data_name[:-1]
            for seg in range(1, last + 1):
                _n, c, _ = await app.express(versioned + [Component.from_segment(seg)],
                                             validator, lifetime=4000)
                body += bytes(c or b'')
            result['segments'] = last + 1
            result['answer'] = json.loads(bytes(body))
            result['verified'] = True
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            result['error'] = f'{type(e).__name__}: {e}'
        finally:
            app.shutdown()

    async def run():
        try:
            await app.main_loop(body())
        except OSError as e:
            result['error'] = f'cannot connect to {sock}: {e}'

    asyncio.run(run())
    print(json.dumps(result), flush=True)
    return 0 if result['error'] is None else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
