#!/usr/bin/env python3
"""A python-ndn consumer that fetches from `granary perf serve` and checks signatures.

Usage: perf_check.py SOCKET PREFIX SIGN KEYFILE [--count K] [--payload BYTES]

Connects to the forwarder's Unix socket, expresses K Interests PREFIX/<run>/<i> (<run> a
random component, <i> the decimal digits of i), one after the other, and checks every Data:
name equal to the Interest's, Content of BYTES bytes, SignatureType matching SIGN
(sha256, ecdsa, rsa, ed25519, hmac), and the signature valid under KEYFILE
(SubjectPublicKeyInfo DER written by `perf serve --key-out`; the raw secret for hmac;
ignored for sha256, which is checked as a digest).

Prints one JSON summary line: {"fetched": n, "verified": n, "errors": [..]}.
Exit status: 0 when all K Data arrived and verified, 1 otherwise, 2 on a usage error.
"""
import argparse
import asyncio
import json
import os
import sys

from Cryptodome.PublicKey import ECC, RSA

from ndn.appv2 import NDNApp, pass_all
from ndn.encoding import Component, Name, SignatureType
from ndn.security.validator.digest_validator import sha256_digest_checker
from ndn.security.validator.known_key_validator import (
    verify_ecdsa, verify_ed25519, verify_hmac, verify_rsa)
from ndn.transport.stream_face import UnixFace

SIG_TYPES = {
    'sha256': SignatureType.DIGEST_SHA256,
    'ecdsa': SignatureType.SHA256_WITH_ECDSA,
    'rsa': SignatureType.SHA256_WITH_RSA,
    'ed25519': SignatureType.ED25519,
    'hmac': SignatureType.HMAC_WITH_SHA256,
}


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog='perf_check.py')
    ap.add_argument('socket')
    ap.add_argument('prefix')
    ap.add_argument('sign', choices=sorted(SIG_TYPES))
    ap.add_argument('keyfile')
    ap.add_argument('--count', type=int, default=10)
    ap.add_argument('--payload', type=int, default=8192)
    args = ap.parse_args(argv[1:])

    key = None
    if args.sign != 'sha256':
        with open(args.keyfile, 'rb') as f:
            raw = f.read()
        if args.sign == 'hmac':
            key = raw
        elif args.sign == 'rsa':
            key = RSA.import_key(raw)
        else:
            key = ECC.import_key(raw)

    app = NDNApp(face=UnixFace(args.socket))
    summary = {'fetched': 0, 'verified': 0, 'errors': []}

    async def check(name, sig) -> bool:
        want = SIG_TYPES[args.sign]
        got = sig.signature_info.signature_type if sig.signature_info else None
        if got != want:
            raise ValueError(f'signature type {got}, expected {want}')
        if args.sign == 'sha256':
            return bool(await sha256_digest_checker(name, sig))
        if args.sign == 'hmac':
            return bool(verify_hmac(key, sig))
        if args.sign == 'rsa':
            return bool(verify_rsa(key, sig))
        if args.sign == 'ed25519':
            return bool(verify_ed25519(key, sig))
        return bool(verify_ecdsa(key, sig))

    async def run():
        try:
            # A fresh component per run: no Content Store answers from an earlier run.
            base = Name.from_str(args.prefix) + [Component.from_str(os.urandom(6).hex())]
            for i in range(args.count):
                name = base + [Component.from_str(str(i))]
                try:
                    data_name, content, ctx = await asyncio.wait_for(
                        app.express(name, validator=pass_all, lifetime=4000), 6)
                except Exception as e:  # timeout, nack: recorded, not fatal
                    summary['errors'].append(f'{Name.to_str(name)}: {type(e).__name__}: {e}')
                    continue
                summary['fetched'] += 1
                if Name.to_bytes(data_name) != Name.to_bytes(name):
                    summary['errors'].append(f'Data name {Name.to_str(data_name)}')
                    continue
                if content is None or len(bytes(content)) != args.payload:
                    summary['errors'].append(f'content of {len(bytes(content or b""))} bytes')
                    continue
                try:
                    ok = await check(data_name, ctx['sig_ptrs'])
                except Exception as e:
                    summary['errors'].append(f'{Name.to_str(name)}: {type(e).__name__}: {e}')
                    continue
                if ok:
                    summary['verified'] += 1
                else:
                    summary['errors'].append(f'{Name.to_str(name)}: bad signature')
        finally:
            app.shutdown()

    asyncio.run(app.main_loop(run()))
    print(json.dumps(summary), flush=True)
    return 0 if summary['verified'] == args.count else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
