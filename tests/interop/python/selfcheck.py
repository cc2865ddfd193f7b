#!/usr/bin/env python3
"""Check the three interop scripts against each other.

Usage: selfcheck.py

1. generates the records (gen_packets.generate), writes them as gen_packets.py
   would, and checks every `fields` object against an independent TLV walk of
   the record's hex;
2. checks each record's `cert_hex` / `hmac_key_hex` against its SignatureType and
   KeyLocator, then feeds every generated Interest, Data and certificate (plus a
   few tampered ones) through verify.py with those keys;
3. feeds every generated URI through uri.py and checks it gives back the same
   Name TLV and the same URI.

Exits non-zero and lists the problems when anything is off.
"""
import json
import os
import subprocess
import sys
import tempfile
from hashlib import sha256

from ndn.app_support.security_v2 import parse_certificate
from ndn.encoding import Name, parse_interest

import gen_packets

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable
MIN_RECORDS = 550


# ---------------------------------------------------------------------------
# A deliberately tiny, independent TLV reader
# ---------------------------------------------------------------------------

def read_var(buf: bytes, pos: int) -> tuple[int, int]:
    first = buf[pos]
    if first < 0xfd:
        return first, pos + 1
    size = {0xfd: 2, 0xfe: 4, 0xff: 8}[first]
    return int.from_bytes(buf[pos + 1:pos + 1 + size], 'big'), pos + 1 + size


def elements(buf: bytes) -> list[tuple[int, bytes, bytes]]:
    """(type, value, whole TLV) for each element in buf."""
    out, pos = [], 0
    while pos < len(buf):
        start = pos
        typ, pos = read_var(buf, pos)
        length, pos = read_var(buf, pos)
        if pos + length > len(buf):
            raise ValueError('TLV overruns its buffer')
        out.append((typ, buf[pos:pos + length], buf[start:pos + length]))
        pos += length
    return out


def single(buf: bytes, expected_type: int) -> bytes:
    (typ, value, _), = elements(buf)
    assert typ == expected_type, f'outer type {typ} != {expected_type}'
    return value


def find(elems, typ):
    hits = [e for e in elems if e[0] == typ]
    assert len(hits) <= 1, f'type {typ} repeated'
    return hits[0] if hits else None


def nni(value: bytes) -> int:
    assert len(value) in (1, 2, 4, 8), f'bad NonNegativeInteger length {len(value)}'
    return int.from_bytes(value, 'big')


def raw_interest_fields(wire: bytes) -> dict:
    elems = elements(single(wire, 0x05))
    get = lambda t: find(elems, t)
    hint = get(0x1e)
    sig_info = get(0x2c)
    return {
        'can_be_prefix': get(0x21) is not None,
        'must_be_fresh': get(0x12) is not None,
        'nonce': nni(get(0x0a)[1]) if get(0x0a) else None,
        'lifetime': nni(get(0x0c)[1]) if get(0x0c) else None,
        'hop_limit': nni(get(0x22)[1]) if get(0x22) else None,
        'forwarding_hint': [e[2].hex() for e in elements(hint[1])] if hint else [],
        'app_params_hex': get(0x24)[1].hex() if get(0x24) else None,
        'sig_type': nni(find(elements(sig_info[1]), 0x1b)[1]) if sig_info else None,
    }


def raw_data_fields(wire: bytes) -> dict:
    elems = elements(single(wire, 0x06))
    meta = find(elems, 0x14)
    meta_elems = elements(meta[1]) if meta else []
    pick = lambda t: find(meta_elems, t)
    sig_elems = elements(find(elems, 0x16)[1])
    locator = find(sig_elems, 0x1c)
    key_locator = None
    if locator:
        (typ, value, whole), = elements(locator[1])
        key_locator = {'name': whole.hex()} if typ == 0x07 else {'digest_hex': value.hex()}
    return {
        'content_type': nni(pick(0x18)[1]) if pick(0x18) else None,
        'freshness_period': nni(pick(0x19)[1]) if pick(0x19) else None,
        'final_block_id_hex': pick(0x1a)[1].hex() if pick(0x1a) else None,
        'content_hex': find(elems, 0x15)[1].hex() if find(elems, 0x15) else None,
        'sig_type': nni(find(sig_elems, 0x1b)[1]),
        'key_locator': key_locator,
    }


def raw_lp_fields(wire: bytes) -> dict:
    names = {0x50: 'fragment_hex', 0x51: 'sequence', 0x52: 'frag_index', 0x53: 'frag_count',
             0x62: 'pit_token_hex', 0x320: 'nack_reason', 0x340: 'congestion_mark',
             0x348: 'tx_sequence', 0x344: 'ack', 0x32c: 'incoming_face_id',
             0x330: 'next_hop_face_id'}
    fields = {}
    for typ, value, _ in elements(single(wire, 0x64)):
        key = names[typ]
        if key.endswith('_hex'):
            fields[key] = value.hex()
        elif key == 'nack_reason':
            reason = find(elements(value), 0x321)
            fields[key] = nni(reason[1]) if reason else 0
        elif key == 'ack':
            fields.setdefault('ack', []).append(int.from_bytes(value, 'big'))
        else:
            fields[key] = int.from_bytes(value, 'big')
    return fields


def name_tlv_of(record: dict) -> bytes:
    wire = bytes.fromhex(record['hex'])
    if record['kind'] == 'name':
        return wire
    outer = 0x05 if record['kind'] == 'interest' else 0x06
    return find(elements(single(wire, outer)), 0x07)[2]


# ---------------------------------------------------------------------------

def check_fields(records: list[dict], problems: list[str]):
    for i, rec in enumerate(records):
        wire = bytes.fromhex(rec['hex'])
        try:
            if rec['kind'] == 'interest':
                raw, fields = raw_interest_fields(wire), dict(rec['fields'])
                # Compare hint names as TLV hex: re-encode the printed URIs.
                fields['forwarding_hint'] = [
                    Name.to_bytes(Name.from_str(u)).hex()
                    for u in fields['forwarding_hint']]
            elif rec['kind'] == 'data':
                raw, fields = raw_data_fields(wire), dict(rec['fields'])
                if fields['key_locator'] and 'name' in fields['key_locator']:
                    fields['key_locator'] = {'name': Name.to_bytes(
                        Name.from_str(fields['key_locator']['name'])).hex()}
            elif rec['kind'] == 'lp':
                raw, fields = raw_lp_fields(wire), rec['fields']
            else:
                elements(single(wire, 0x07))
                continue
        except Exception as e:
            problems.append(f'record {i} ({rec["note"]}): raw TLV walk failed: {e!r}')
            continue
        if raw != fields:
            problems.append(f'record {i} ({rec["note"]}): fields {fields} != wire {raw}')


def run(script: str, *args: str):
    subprocess.run([PYTHON, os.path.join(HERE, script), *args], check=True)


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding='utf-8') as f:
        return [json.loads(line) for line in f]


def record_locator(rec: dict) -> dict | None:
    if rec['kind'] == 'data':
        return rec['fields']['key_locator']
    # Interest fields carry no key locator; read it back from the wire.
    sig = parse_interest(bytes.fromhex(rec['hex']))[3].signature_info
    return gen_packets.key_locator_fields(sig)


def is_cert_record(rec: dict) -> bool:
    return rec['kind'] == 'data' and 'certificate' in rec['note']


def check_key_material(records, ring, problems):
    """Each signed record's cert_hex / hmac_key_hex, judged independently of how
    gen_packets chose them: present exactly for the SignatureTypes that need them,
    and matching the packet's KeyLocator (name prefix of the certificate or the
    SHA-256 of its public key; the HMAC key registered under the locator name)."""
    for i, rec in enumerate(records):
        if rec['kind'] not in ('interest', 'data'):
            if 'cert_hex' in rec or 'hmac_key_hex' in rec:
                problems.append(f'record {i} ({rec["note"]}): key material on a {rec["kind"]} record')
            continue
        sig_type, locator = rec['fields']['sig_type'], record_locator(rec)
        where = f'record {i} ({rec["note"]})'
        want_keys = {1: {'cert_hex'}, 3: {'cert_hex'}, 5: {'cert_hex'},
                     4: {'hmac_key_hex'}}.get(sig_type, set())
        have_keys = {k for k in ('cert_hex', 'hmac_key_hex') if k in rec}
        if have_keys != want_keys:
            problems.append(f'{where}: sig_type {sig_type} carries {sorted(have_keys)}, '
                            f'expected {sorted(want_keys)}')
            continue
        if sig_type == 4:
            if bytes.fromhex(rec['hmac_key_hex']) != ring.hmac.get(locator['name']):
                problems.append(f'{where}: hmac_key_hex is not the key named {locator["name"]}')
            continue
        if 'cert_hex' not in rec:
            continue
        own_key_name = rec['uri'].rsplit('/', 2)[0]
        self_signed = is_cert_record(rec) and locator.get('name') == own_key_name
        if self_signed != (rec['cert_hex'] is None):
            problems.append(f'{where}: self-signed={self_signed} but cert_hex='
                            f'{"null" if rec["cert_hex"] is None else "a certificate"}')
            continue
        if rec['cert_hex'] is None:
            continue
        cert = parse_certificate(bytes.fromhex(rec['cert_hex']))
        cert_uri = Name.to_str(cert.name)
        if 'digest_hex' in locator:
            ok = sha256(bytes(cert.content)).hexdigest() == locator['digest_hex']
        else:
            ok = cert_uri == locator['name'] or cert_uri.startswith(locator['name'] + '/')
        if not ok:
            problems.append(f'{where}: cert_hex {cert_uri} does not match KeyLocator {locator}')


def check_verify(records, ring, tmp, problems):
    inputs, expected = [], []
    for i, rec in enumerate(records):
        if rec['kind'] not in ('interest', 'data'):
            continue
        fields = rec['fields']
        kind = 'cert' if is_cert_record(rec) else rec['kind']
        inputs.append({'id': f'r{i}', 'kind': kind, 'hex': rec['hex'],
                       'cert_hex': rec.get('cert_hex'), 'hmac_key_hex': rec.get('hmac_key_hex')})
        content = fields['content_hex'] if rec['kind'] == 'data' else fields['app_params_hex']
        expected.append({'id': f'r{i}', 'decoded': True, 'uri': rec['uri'],
                         'sig_type': fields['sig_type'],
                         'verified': fields['sig_type'] not in (None, 200),
                         'content_hex': content, 'cert': kind == 'cert'})

    # Negative cases: a flipped content byte, a wrong key, bytes that are no packet.
    ecdsa_rec, ecdsa_content = next(
        (inp, exp['content_hex']) for inp, exp in zip(inputs, expected)
        if inp['kind'] == 'data' and exp['sig_type'] == 3 and exp['content_hex'])
    flipped = bytearray.fromhex(ecdsa_rec['hex'])
    flipped[ecdsa_rec['hex'].index(ecdsa_content) // 2] ^= 0x01
    negatives = [
        ({**ecdsa_rec, 'id': 'tampered', 'hex': flipped.hex()}, {'verified': False}),
        ({**ecdsa_rec, 'id': 'wrong-cert', 'cert_hex': ring.keys['ecdsa384'].cert_wire.hex()},
         {'verified': False}),
        ({'id': 'garbage', 'kind': 'data', 'hex': '0605070308', 'cert_hex': None,
          'hmac_key_hex': None}, {'decoded': False, 'verified': False}),
        ({'id': 'not-hex', 'kind': 'interest', 'hex': 'zz', 'cert_hex': None,
          'hmac_key_hex': None}, {'decoded': False}),
        ({'id': 'no-cert', 'kind': 'data', 'hex': ecdsa_rec['hex'], 'cert_hex': None,
          'hmac_key_hex': None}, {'decoded': True, 'verified': False}),
    ]

    in_path, out_path = os.path.join(tmp, 'verify_in.jsonl'), os.path.join(tmp, 'verify_out.jsonl')
    with open(in_path, 'w', encoding='utf-8') as f:
        for line in inputs + [n[0] for n in negatives]:
            f.write(json.dumps(line) + '\n')
    run('verify.py', in_path, out_path)
    results = read_jsonl(out_path)
    if len(results) != len(inputs) + len(negatives):
        problems.append(f'verify.py wrote {len(results)} lines for {len(inputs) + len(negatives)}')
        return
    for want, got in zip(expected, results):
        is_cert = want.pop('cert')
        for key, value in want.items():
            if got[key] != value:
                problems.append(f'verify {want["id"]}: {key}={got[key]!r}, expected {value!r} '
                                f'(error: {got["error"]})')
        if is_cert and not got['validity']:
            problems.append(f'verify {want["id"]}: certificate without validity')
        if not is_cert and got['validity'] is not None:
            problems.append(f'verify {want["id"]}: validity on a non-certificate')
    for (case, want), got in zip(negatives, results[len(inputs):]):
        for key, value in want.items():
            if got[key] != value:
                problems.append(f'verify negative {case["id"]}: {key}={got[key]!r}, expected {value!r}')
    print(f'verify.py: {len(inputs)} generated packets + {len(negatives)} negative cases')


def check_uri(records, tmp, problems):
    packets = [r for r in records if r['kind'] in ('name', 'interest', 'data')]
    extra = ['/', '', '/a/b/', 'a/b', '/a//b', '/%e2%82%ac', '/8=x/32=k/9=', '/seg=abc', '/0=x',
             '/65536=x', '/a b/c?d', '/sha256digest=zz']
    in_path, out_path = os.path.join(tmp, 'uri_in.txt'), os.path.join(tmp, 'uri_out.jsonl')
    with open(in_path, 'w', encoding='utf-8') as f:
        for line in [r['uri'] for r in packets] + extra:
            f.write(line + '\n')
    run('uri.py', in_path, out_path)
    results = read_jsonl(out_path)
    if len(results) != len(packets) + len(extra):
        problems.append(f'uri.py wrote {len(results)} lines for {len(packets) + len(extra)}')
        return
    for rec, got in zip(packets, results):
        if not got['ok']:
            problems.append(f'uri.py rejected {rec["uri"]!r}: {got["error"]}')
            continue
        if got['uri'] != rec['uri']:
            problems.append(f'uri.py re-printed {rec["uri"]!r} as {got["uri"]!r}')
        lossy = 'lossy-uri' in rec['note']
        if (got['hex'] == name_tlv_of(rec).hex()) == lossy:
            problems.append(f'uri.py hex for {rec["uri"]!r} ({rec["note"]}): lossy={lossy} '
                            f'but hex {"matches" if not lossy else "differs"} unexpectedly')
    for line, got in zip(extra, results[len(packets):]):
        if got['input'] != line:
            problems.append(f'uri.py echoed {got["input"]!r} for {line!r}')
    print(f'uri.py: {len(packets)} generated URIs + {len(extra)} hand-written')


def main() -> int:
    problems: list[str] = []
    records, ring = gen_packets.generate()
    if len(records) < MIN_RECORDS:
        problems.append(f'only {len(records)} records, need {MIN_RECORDS}')
    check_fields(records, problems)
    with tempfile.TemporaryDirectory() as tmp:
        gen_path = os.path.join(tmp, 'gen.jsonl')
        run('gen_packets.py', gen_path)
        if len(read_jsonl(gen_path)) != len(records):
            problems.append('gen_packets.py CLI wrote a different number of records')
        check_key_material(records, ring, problems)
        check_verify(records, ring, tmp, problems)
        check_uri(records, tmp, problems)
    for problem in problems:
        print('FAIL:', problem)
    print(f'{len(records)} records, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
