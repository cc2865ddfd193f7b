#!/usr/bin/env python3
"""Decode and verify packets made by Granary with python-ndn (CONTRACT.md, section 2).

Usage: verify.py IN.jsonl OUT.jsonl

One output line per input line, same order.  A record that cannot be decoded or
verified is reported in its own output line; the script still exits 0.
"""
import asyncio
import json
import sys

from Cryptodome.PublicKey import ECC, RSA

from ndn.app_support.security_v2 import parse_certificate
from ndn.encoding import Name, SignatureType, parse_data, parse_interest
from ndn.security.validator.digest_validator import params_sha256_checker, sha256_digest_checker
from ndn.security.validator.known_key_validator import (
    verify_ecdsa, verify_ed25519, verify_hmac, verify_rsa)


class VerifyError(Exception):
    """The packet decoded but its signature could not be checked."""


def public_key_bits(cert_hex: str) -> bytes:
    """The SubjectPublicKeyInfo DER carried in a certificate's Content."""
    cert = parse_certificate(bytes.fromhex(cert_hex))
    if cert.content is None:
        raise VerifyError('signer certificate has no Content')
    return bytes(cert.content)


def check_signature(name, sig_ptrs, key_bits: bytes | None, hmac_key: bytes | None) -> bool:
    """True when the signature verifies; VerifyError when it cannot be checked."""
    sig_info = sig_ptrs.signature_info
    if sig_info is None or sig_info.signature_type is None:
        raise VerifyError('packet carries no SignatureInfo')
    if sig_ptrs.signature_value_buf is None:
        raise VerifyError('packet carries no SignatureValue')
    sig_type = sig_info.signature_type

    if sig_type == SignatureType.DIGEST_SHA256:
        return asyncio.run(sha256_digest_checker(name, sig_ptrs))
    if sig_type == SignatureType.HMAC_WITH_SHA256:
        if hmac_key is None:
            raise VerifyError('HMAC signature but no hmac_key_hex given')
        return verify_hmac(hmac_key, sig_ptrs)
    if sig_type in (SignatureType.SHA256_WITH_RSA, SignatureType.SHA256_WITH_ECDSA,
                    SignatureType.ED25519):
        if key_bits is None:
            raise VerifyError(f'signature type {sig_type} needs a certificate')
        try:
            if sig_type == SignatureType.SHA256_WITH_RSA:
                key = RSA.import_key(key_bits)
            else:
                key = ECC.import_key(key_bits)
        except (ValueError, IndexError, TypeError) as e:
            raise VerifyError(f'cannot import public key: {e}') from e
        if sig_type == SignatureType.SHA256_WITH_RSA:
            return verify_rsa(key, sig_ptrs)
        is_ed25519 = key.curve == 'Ed25519'
        if (sig_type == SignatureType.ED25519) != is_ed25519:
            raise VerifyError(f'signature type {sig_type} does not match key curve {key.curve}')
        if is_ed25519:
            return verify_ed25519(key, sig_ptrs)
        return verify_ecdsa(key, sig_ptrs)
    if sig_type == SignatureType.NULL:
        raise VerifyError('Null signature (type 200) carries nothing to verify')
    raise VerifyError(f'unsupported signature type {sig_type}')


def process(record: dict) -> dict:
    result = {'id': record.get('id'), 'decoded': False, 'uri': None, 'sig_type': None,
              'verified': False, 'error': None, 'content_hex': None, 'validity': None}
    kind = record.get('kind')

    # Decode.
    try:
        wire = bytes.fromhex(record['hex'])
        if kind == 'interest':
            name, _, app_param, sig_ptrs = parse_interest(wire)
            content = app_param
        elif kind == 'data':
            name, _, content, sig_ptrs = parse_data(wire)
        elif kind == 'cert':
            name, _, content, sig_ptrs = parse_data(wire)
            cert = parse_certificate(wire)
            validity = cert.signature_info.validity_period if cert.signature_info else None
            if validity is not None:
                result['validity'] = {
                    'not_before': bytes(validity.not_before).decode()
                    if validity.not_before is not None else None,
                    'not_after': bytes(validity.not_after).decode()
                    if validity.not_after is not None else None,
                }
        else:
            raise ValueError(f'unknown kind {kind!r}')
        result['uri'] = Name.to_str(name)
    except Exception as e:  # any decoding failure belongs to this record only
        result['error'] = f'decode: {type(e).__name__}: {e}'
        result['validity'] = None
        return result
    result['decoded'] = True
    result['content_hex'] = bytes(content).hex() if content is not None else None
    if sig_ptrs.signature_info is not None:
        result['sig_type'] = sig_ptrs.signature_info.signature_type

    # Verify.
    try:
        if kind == 'interest' and sig_ptrs.digest_value_buf is not None:
            if not asyncio.run(params_sha256_checker(name, sig_ptrs)):
                raise VerifyError('ParametersSha256DigestComponent does not match')
        cert_hex = record.get('cert_hex')
        if cert_hex is None and kind == 'cert':
            key_bits = bytes(content) if content is not None else None  # self-signed
        else:
            key_bits = public_key_bits(cert_hex) if cert_hex is not None else None
        hmac_hex = record.get('hmac_key_hex')
        hmac_key = bytes.fromhex(hmac_hex) if hmac_hex is not None else None
        result['verified'] = bool(check_signature(name, sig_ptrs, key_bits, hmac_key))
        if not result['verified']:
            result['error'] = 'signature does not verify'
    except Exception as e:
        result['error'] = f'verify: {type(e).__name__}: {e}'
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print('usage: verify.py IN.jsonl OUT.jsonl', file=sys.stderr)
        return 2
    with open(argv[1], encoding='utf-8') as src, open(argv[2], 'w', encoding='utf-8') as dst:
        for line_no, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError('line is not a JSON object')
            except ValueError as e:
                result = {'id': None, 'decoded': False, 'uri': None, 'sig_type': None,
                          'verified': False, 'error': f'input line {line_no}: {e}',
                          'content_hex': None, 'validity': None}
            else:
                result = process(record)
            dst.write(json.dumps(result, ensure_ascii=False) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
