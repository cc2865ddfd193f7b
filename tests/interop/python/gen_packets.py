#!/usr/bin/env python3
"""Generate packets with python-ndn for Granary to decode (CONTRACT.md, section 1).

Usage: gen_packets.py OUT.jsonl

Every packet is encoded by python-ndn and then parsed back with python-ndn; the
`fields` object of each record is filled from that parse, so it describes what is
really on the wire.  Values come from a seeded random.Random, so the set of records
is the same on every run; only key material, signature bytes and the timestamps
python-ndn inserts itself (certificate versions, DigestSha256 Interest signatures)
change between runs.

Every signed Data and signed Interest record also carries what is needed to verify
it, after `note` (the same extra keys NDNts's gen_packets.mjs writes):
  cert_hex     — RSA (1), ECDSA (3) and Ed25519 (5) signatures: the signer's
                 certificate (a python-ndn certificate v2 Data whose Content is the
                 SubjectPublicKeyInfo DER); null for a self-signed certificate, the
                 issuer's certificate for a certificate issued by another certificate
  hmac_key_hex — HMAC (4) signatures: the raw HMAC key
Records with no signature, DigestSha256 (0) or Null (200) carry neither key.

The module can also be imported: generate() returns the records together with the
keys that signed them (used by selfcheck.py).
"""
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from hashlib import sha256

from Cryptodome.PublicKey import ECC, RSA

from ndn.app_support.security_v2 import (
    KEY_COMPONENT, AdditionalDescription, DescriptionEntry, derive_cert, self_sign)
from ndn.encoding import (
    Component, ContentType, InterestParam, KeyLocator, MetaInfo, Name, Signer,
    SignatureType, TypeNumber, UintField, IncludeBase, make_data, make_interest,
    parse_and_check_tl, parse_interest)
from ndn.encoding.ndn_format_0_3 import DataPacketValue
from ndn.encoding.ndnlp_v2 import LpPacket, LpPacketValue, LpTypeNumber, NetworkNack, NackReason
from ndn.encoding.tlv_model import ModelField, TlvModel
from ndn.security import (
    DigestSha256Signer, Ed25519Signer, HmacSha256Signer, NullSigner,
    Sha256WithEcdsaSigner, Sha256WithRsaSigner)

SEED = 20250307


# ---------------------------------------------------------------------------
# Signing helpers
# ---------------------------------------------------------------------------

class ExtendedSigner(Signer):
    """Wraps a stock python-ndn signer and fills SignatureInfo sub-elements that
    the stock signers never set (SignatureNonce/Time/SeqNum, a KeyDigest
    KeyLocator, a certificate AdditionalDescription).  The TLV layout is still
    entirely python-ndn's: this only assigns fields of its SignatureInfo model."""

    def __init__(self, inner: Signer, *, nonce=None, time=None, seq_num=None,
                 key_digest=None, description=None):
        self.inner = inner
        self.nonce = nonce
        self.time = time
        self.seq_num = seq_num
        self.key_digest = key_digest
        self.description = description

    def write_signature_info(self, signature_info):
        self.inner.write_signature_info(signature_info)
        if self.key_digest is not None:
            signature_info.key_locator = KeyLocator()
            signature_info.key_locator.key_digest = self.key_digest
        if self.nonce is not None:
            signature_info.signature_nonce = self.nonce
        if self.time is not None:
            signature_info.signature_time = self.time
        if self.seq_num is not None:
            signature_info.signature_seq_num = self.seq_num
        if self.description:
            # Only meaningful when python-ndn passes a CertificateV2SignatureInfo.
            desc = AdditionalDescription()
            for key, value in self.description:
                entry = DescriptionEntry()
                entry.description_key = key.encode()
                entry.description_value = value.encode()
                desc.description_entry.append(entry)
            signature_info.additional_description = desc

    def get_signature_value_size(self):
        return self.inner.get_signature_value_size()

    def write_signature_value(self, wire, contents):
        return self.inner.write_signature_value(wire, contents)


@dataclass
class AsymKey:
    """An asymmetric key pair, its NDN key name and its self-signed certificate."""
    label: str
    sig_type: int
    key_name: list
    private_der: bytes
    public_der: bytes
    cert_name: list = None
    cert_wire: bytes = None

    @property
    def key_digest(self) -> bytes:
        return sha256(self.public_der).digest()

    def signer(self, locator_name=None) -> Signer:
        locator = self.key_name if locator_name is None else locator_name
        if self.sig_type == SignatureType.SHA256_WITH_RSA:
            signer = Sha256WithRsaSigner(locator, self.private_der)
        elif self.sig_type == SignatureType.SHA256_WITH_ECDSA:
            signer = Sha256WithEcdsaSigner(locator, self.private_der)
        else:
            signer = Ed25519Signer(locator, self.private_der)
        # Remembered on the signer so the record it signs can carry the certificate
        # (see key_material); None only while the key's own self_sign() runs.
        signer.interop_cert_wire = self.cert_wire
        return signer


@dataclass
class Keyring:
    """Everything a verifier needs for the generated signatures."""
    keys: dict = field(default_factory=dict)       # label -> AsymKey
    certs: list = field(default_factory=list)      # every certificate wire generated
    hmac: dict = field(default_factory=dict)       # key name URI -> raw key bytes


def make_keyring(rng: random.Random) -> Keyring:
    ring = Keyring()
    specs = [
        ('rsa', SignatureType.SHA256_WITH_RSA, lambda: RSA.generate(2048)),
        ('ecdsa', SignatureType.SHA256_WITH_ECDSA, lambda: ECC.generate(curve='P-256')),
        ('ecdsa384', SignatureType.SHA256_WITH_ECDSA, lambda: ECC.generate(curve='P-384')),
        ('ed25519', SignatureType.ED25519, lambda: ECC.generate(curve='Ed25519')),
    ]
    for label, sig_type, generate_key in specs:
        private = generate_key()
        if sig_type == SignatureType.SHA256_WITH_RSA:
            private_der = private.export_key(format='DER', pkcs=1)
            public_der = private.publickey().export_key(format='DER')
        else:
            private_der = private.export_key(format='DER')
            public_der = bytes(private.public_key().export_key(format='DER'))
        key_id = Component.from_bytes(rng.randbytes(8))
        key_name = Name.from_str(f'/interop/python/{label}') + [KEY_COMPONENT, key_id]
        key = AsymKey(label, sig_type, key_name, private_der, public_der)
        key.cert_name, cert = self_sign(key_name, public_der, key.signer())
        key.cert_wire = bytes(cert)
        ring.keys[label] = key
        ring.certs.append(key.cert_wire)
    for index in range(2):
        ring.hmac[f'/interop/python/hmac/key{index}'] = rng.randbytes(32 if index == 0 else 64)
    return ring


@dataclass
class SignerChoice:
    note: str
    make: object   # () -> Signer, called per packet so signers never share state


def data_signers(ring: Keyring) -> list[SignerChoice]:
    rsa, ecdsa = ring.keys['rsa'], ring.keys['ecdsa']
    ecdsa384, ed = ring.keys['ecdsa384'], ring.keys['ed25519']
    hmac0, hmac1 = list(ring.hmac.items())
    return [
        SignerChoice('DigestSha256', DigestSha256Signer),
        SignerChoice('RSA, KeyLocator=key name', lambda: rsa.signer()),
        SignerChoice('ECDSA P-256, KeyLocator=key name', lambda: ecdsa.signer()),
        SignerChoice('HMAC (32-byte key), KeyLocator=key name',
                     lambda: HmacSha256Signer(hmac0[0], hmac0[1])),
        SignerChoice('Ed25519, KeyLocator=key name', lambda: ed.signer()),
        SignerChoice('Null (200)', NullSigner),
        SignerChoice('RSA, KeyLocator=cert name', lambda: rsa.signer(rsa.cert_name)),
        SignerChoice('ECDSA P-256, KeyLocator=cert name', lambda: ecdsa.signer(ecdsa.cert_name)),
        SignerChoice('Ed25519, KeyLocator=cert name', lambda: ed.signer(ed.cert_name)),
        SignerChoice('HMAC (64-byte key), KeyLocator=key name',
                     lambda: HmacSha256Signer(hmac1[0], hmac1[1])),
        SignerChoice('ECDSA P-256, KeyLocator=KeyDigest',
                     lambda: ExtendedSigner(ecdsa.signer(), key_digest=ecdsa.key_digest)),
        SignerChoice('ECDSA P-384 (SHA-256), KeyLocator=key name', lambda: ecdsa384.signer()),
    ]


def key_material(signer: Signer | None) -> dict:
    """The extra record keys a verifier needs for what `signer` signs: `cert_hex`
    for RSA/ECDSA/Ed25519 (from AsymKey.signer), `hmac_key_hex` for HMAC, nothing
    for DigestSha256, Null or no signer."""
    while isinstance(signer, ExtendedSigner):
        signer = signer.inner
    if isinstance(signer, HmacSha256Signer):
        return {'hmac_key_hex': bytes(signer.key_bytes).hex()}
    cert_wire = getattr(signer, 'interop_cert_wire', None)
    if cert_wire is not None:
        return {'cert_hex': cert_wire.hex()}
    return {}


# ---------------------------------------------------------------------------
# Reading back what python-ndn wrote
# ---------------------------------------------------------------------------

def hex_or_none(value) -> str | None:
    return None if value is None else bytes(value).hex()


def key_locator_fields(sig_info) -> dict | None:
    locator = sig_info.key_locator if sig_info is not None else None
    if locator is None:
        return None
    if locator.name is not None:
        return {'name': Name.to_str(locator.name)}
    if locator.key_digest is not None:
        return {'digest_hex': bytes(locator.key_digest).hex()}
    return None


def interest_fields(wire: bytes) -> tuple[str, dict]:
    name, param, app_param, sig = parse_interest(wire)
    sig_info = sig.signature_info
    return Name.to_str(name), {
        'can_be_prefix': bool(param.can_be_prefix),
        'must_be_fresh': bool(param.must_be_fresh),
        'nonce': param.nonce,
        'lifetime': param.lifetime,
        'hop_limit': param.hop_limit,
        'forwarding_hint': [Name.to_str(hint) for hint in param.forwarding_hint],
        'app_params_hex': hex_or_none(app_param),
        'sig_type': sig_info.signature_type if sig_info is not None else None,
    }


def data_fields(wire: bytes) -> tuple[str, dict]:
    # DataPacketValue is the model parse_data() uses; it is used directly here
    # because parse_data() substitutes MetaInfo() (ContentType=BLOB) for an absent
    # MetaInfo, which would hide whether ContentType is on the wire.
    value = DataPacketValue.parse(parse_and_check_tl(wire, TypeNumber.DATA))
    meta = value.meta_info
    final_block = meta.final_block_id if meta is not None else None
    sig_info = value.signature_info
    return Name.to_str(value.name), {
        'content_type': meta.content_type if meta is not None else None,
        'freshness_period': meta.freshness_period if meta is not None else None,
        'final_block_id_hex': hex_or_none(final_block),
        'content_hex': hex_or_none(value.content),
        'sig_type': sig_info.signature_type if sig_info is not None else None,
        'key_locator': key_locator_fields(sig_info),
    }


# ---------------------------------------------------------------------------
# LpPacket
# ---------------------------------------------------------------------------

class FragmentedLpPacketValue(LpPacketValue):
    """python-ndn's LpPacketValue has no Sequence (0x51) field, which NDNLPv2
    requires next to FragIndex/FragCount.  This declares it in front of the
    stock fields with python-ndn's own TlvModel machinery."""
    sequence = UintField(LpTypeNumber.SEQUENCE, fixed_len=8)
    _base = IncludeBase(LpPacketValue)


class FragmentedLpPacket(TlvModel):
    lp_packet = ModelField(LpTypeNumber.LP_PACKET, FragmentedLpPacketValue)


def lp_fields(wire: bytes) -> dict:
    value = FragmentedLpPacketValue.parse(parse_and_check_tl(wire, LpTypeNumber.LP_PACKET),
                                          ignore_critical=True)
    fields = {}
    if value.fragment is not None:
        fields['fragment_hex'] = bytes(value.fragment).hex()
    if value.sequence is not None:
        fields['sequence'] = value.sequence
    if value.frag_index is not None:
        fields['frag_index'] = value.frag_index
    if value.frag_count is not None:
        fields['frag_count'] = value.frag_count
    if value.pit_token is not None:
        fields['pit_token_hex'] = bytes(value.pit_token).hex()
    if value.nack is not None:
        reason = value.nack.nack_reason
        fields['nack_reason'] = reason if reason is not None else NackReason.NONE
    if value.congestion_mark is not None:
        fields['congestion_mark'] = value.congestion_mark
    if value.tx_sequence is not None:
        fields['tx_sequence'] = int.from_bytes(value.tx_sequence, 'big')
    if value.ack is not None:
        fields['ack'] = [int.from_bytes(value.ack, 'big')]
    if value.incoming_face_id is not None:
        fields['incoming_face_id'] = value.incoming_face_id
    if value.next_hop_face_id is not None:
        fields['next_hop_face_id'] = value.next_hop_face_id
    return fields


# ---------------------------------------------------------------------------
# Record collection
# ---------------------------------------------------------------------------

class Records:
    def __init__(self):
        self.items: list[dict] = []

    def name(self, name: list, note: str):
        wire = Name.to_bytes(name)
        parsed = Name.from_bytes(wire)
        assert [bytes(c) for c in parsed] == [bytes(c) for c in name], note
        self.items.append({'kind': 'name', 'hex': wire.hex(), 'uri': Name.to_str(parsed),
                           'fields': {}, 'note': note})

    def interest(self, name, param: InterestParam, app_param=None, signer=None, note=''):
        wire = bytes(make_interest(name, param, app_param, signer))
        uri, fields = interest_fields(wire)
        assert fields['can_be_prefix'] == param.can_be_prefix, note
        assert fields['must_be_fresh'] == param.must_be_fresh, note
        assert fields['nonce'] == param.nonce, note
        assert fields['lifetime'] == param.lifetime, note
        assert fields['hop_limit'] == param.hop_limit, note
        assert len(fields['forwarding_hint']) == len(param.forwarding_hint), note
        if signer is None:
            assert fields['app_params_hex'] == hex_or_none(app_param), note
        self.items.append({'kind': 'interest', 'hex': wire.hex(), 'uri': uri,
                           'fields': fields, 'note': note, **key_material(signer)})

    def data(self, name, meta: MetaInfo | None, content, signer, note=''):
        wire = bytes(make_data(name, meta, content, signer))
        fields = self.data_wire(wire, note, key_material(signer))
        if meta is not None:
            assert fields['content_type'] == meta.content_type, note
            assert fields['freshness_period'] == meta.freshness_period, note
            assert fields['final_block_id_hex'] == hex_or_none(meta.final_block_id), note
        assert fields['content_hex'] == hex_or_none(content), note

    def data_wire(self, wire: bytes, note: str, keys: dict) -> dict:
        """`keys`: the record's key material (see key_material)."""
        uri, fields = data_fields(wire)
        self.items.append({'kind': 'data', 'hex': wire.hex(), 'uri': uri,
                           'fields': fields, 'note': note, **keys})
        return fields

    def lp(self, note: str, model=LpPacketValue, **values):
        packet = FragmentedLpPacket() if model is FragmentedLpPacketValue else LpPacket()
        packet.lp_packet = model()
        for key, value in values.items():
            setattr(packet.lp_packet, key, value)
        wire = bytes(packet.encode())
        self.items.append({'kind': 'lp', 'hex': wire.hex(), 'fields': lp_fields(wire),
                           'note': note})


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------

NUMBER_EDGES = [0, 1, 0xfc, 0xfd, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff,
                0x100000000, 0xffffffffffffffff]

NUMBERED = [
    ('segment', Component.from_segment),
    ('byte offset', Component.from_byte_offset),
    ('version', Component.from_version),
    ('timestamp', Component.from_timestamp),
    ('sequence number', Component.from_sequence_num),
]

OTHER_TYPES = [3, 4, 9, 16, 31, 33, 49, 100, 252, 253, 255, 256, 1000, 4096, 65534, 65535]


def gen(s: str) -> bytearray:
    """A generic component holding the UTF-8 bytes of s, exactly."""
    return Component.from_bytes(s.encode())


def random_component(rng: random.Random) -> bytearray:
    choice = rng.randrange(10)
    if choice < 4:
        alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789-._~'
        return gen(''.join(rng.choice(alphabet) for _ in range(rng.randrange(1, 12))))
    if choice == 4:
        return Component.from_bytes(rng.randbytes(rng.randrange(0, 20)))
    if choice == 5:
        return Component.from_segment(rng.randrange(0, 1 << rng.choice([8, 16, 32, 64])))
    if choice == 6:
        return Component.from_version(rng.randrange(0, 1 << 48))
    if choice == 7:
        return Component.from_bytes(rng.randbytes(rng.randrange(0, 6)), rng.choice(OTHER_TYPES))
    if choice == 8:
        return Component.from_bytes(b'keyword', Component.TYPE_KEYWORD)
    return Component.from_sequence_num(rng.randrange(0, 100000))


def add_names(out: Records, rng: random.Random) -> list[list]:
    """Adds name records; returns a pool of names reused for packets."""
    pool = []

    def add(name, note):
        out.name(name, note)
        pool.append(name)

    add([], 'empty name (zero components)')
    for uri in ['/a', '/hello/world', '/ndn/edu/ucla/cs/alice', '/A/B/c/D',
                '/-/_/~/.-_~', '/0/1/2/3/4/5/6/7/8/9', '/%41%42%43']:
        add(Name.from_str(uri), f'generic components from URI {uri}')

    # Every byte value, and single characters that need (or don't need) escaping.
    everything = bytes(range(256))
    add([Component.from_bytes(everything[i:i + 32]) for i in range(0, 256, 32)],
        'generic components holding every byte 0x00..0xff (percent-escaping)')
    add([Component.from_bytes(everything)], 'one generic component with all 256 byte values')
    for char in [' ', '/', '%', '=', '?', '#', '&', '+', '~', '-', '_', ':', '@', '!', '*',
                 "'", '(', ')', ',', ';', '[', ']', '\\', '"', '<', '>', '^', '`', '{', '|',
                 '}', '\t', '\n', '\x00', '\x7f']:
        add([gen('x' + char + 'y')], f'generic component with character {char!r} (U+{ord(char):04X})')
    for raw in [b'\x80', b'\xff', b'\x00\x00', b'\xfe\xff\x00\x01']:
        add([Component.from_bytes(raw)], f'generic component with raw bytes {raw.hex()}')
    add([gen('a=b')], "generic component containing '=' (must print as %3D)")
    add([gen('seg=1')], "generic component whose text looks like seg=1")
    add([gen('8=x')], "generic component whose text looks like a typed URI 8=x")
    add([gen('sha256digest=00')], "generic component whose text looks like sha256digest=00")
    for text in ['Σπυρίδων', 'Алек', '日本語', 'Kraus Bölter', '🙂', 'a b c']:
        add([gen('utf8'), gen(text)], f'generic component with UTF-8 text {text!r}')

    # Empty components and dots.
    empty = Component.from_bytes(b'')
    add([empty], 'single empty generic component')
    add([empty, empty], 'two empty generic components')
    add([empty, empty, empty], 'three empty generic components')
    add([gen('a'), empty, gen('b')], 'empty generic component in the middle')
    add([gen('a'), empty], 'empty generic component at the end')
    add([empty, gen('a')], 'empty generic component at the start')
    for dots in ['.', '..', '...', '....', '.....']:
        add([gen(dots)], f'generic component {dots!r} (python-ndn prints it verbatim)')
        add([gen('a'), gen(dots), gen('b')], f'generic component {dots!r} between a and b')
    add([gen('.a'), gen('a.'), gen('..a..')], 'components with dots mixed with letters')

    # Digest components.
    digest = rng.randbytes(32)
    add([gen('a'), Component.from_bytes(digest, Component.TYPE_IMPLICIT_SHA256)],
        'implicit SHA-256 digest component (type 1)')
    add([gen('a'), Component.from_bytes(rng.randbytes(32), Component.TYPE_PARAMETERS_SHA256)],
        'parameters SHA-256 digest component (type 2)')
    add([Component.from_bytes(bytes(32), Component.TYPE_IMPLICIT_SHA256)],
        'all-zero implicit digest as the only component')
    add([Component.from_bytes(b'\xff' * 32, Component.TYPE_PARAMETERS_SHA256)],
        'all-0xff params digest as the only component')
    add([gen('a'), Component.from_bytes(rng.randbytes(32), Component.TYPE_PARAMETERS_SHA256),
         gen('b'), Component.from_bytes(rng.randbytes(32), Component.TYPE_IMPLICIT_SHA256)],
        'params digest in the middle, implicit digest at the end')

    # Keyword.
    for value in [b'metadata', b'', b'a b', bytes([0, 1, 2, 255])]:
        add([gen('k'), Component.from_bytes(value, Component.TYPE_KEYWORD)],
            f'keyword component (type 32) value {value.hex() or "empty"}')

    # Typed numbers, every length boundary.
    for label, make in NUMBERED:
        for number in NUMBER_EDGES:
            add([gen('n'), make(number)], f'{label} component = {number}')

    # Other numbered component types, with and without a value.
    for typ in OTHER_TYPES:
        add([Component.from_bytes(b'value', typ)], f'component of type {typ} with a value')
        add([gen('t'), Component.from_bytes(b'', typ)], f'component of type {typ}, empty value')
    add([Component.from_str('252=%00%FF%25')], 'type 252 component with escaped bytes (from URI)')
    add([Component.from_str('65535=x')], 'type 65535 component from URI 65535=x')

    # Lengths that need 3- and 5-byte TLV-LENGTH.
    add([Component.from_bytes(b'L' * 252)], 'generic component, 252-byte value (1-byte length)')
    add([Component.from_bytes(b'L' * 253)], 'generic component, 253-byte value (3-byte length)')
    add([Component.from_bytes(b'L' * 300)], 'generic component, 300-byte value')
    add([Component.from_bytes(b'L' * 65536)], 'generic component, 65536-byte value (5-byte length)')
    add([gen(f'c{i}') for i in range(100)], 'name with 100 components')

    # Every component type in one name.
    add([gen('all'), empty, Component.from_bytes(b'kw', Component.TYPE_KEYWORD),
         Component.from_segment(7), Component.from_byte_offset(4096),
         Component.from_version(1700000000000), Component.from_timestamp(1700000000000000),
         Component.from_sequence_num(42), Component.from_bytes(b'x', 252),
         Component.from_bytes(b'y', 65535),
         Component.from_bytes(rng.randbytes(32), Component.TYPE_PARAMETERS_SHA256),
         Component.from_bytes(rng.randbytes(32), Component.TYPE_IMPLICIT_SHA256)],
        'one name with every component type')

    # python-ndn prints a numbered type with its alternate URI whatever the value
    # length is, so these URIs do not parse back to the same bytes.
    add([gen('q'), Component.from_bytes(b'\x00\x05', Component.TYPE_SEGMENT)],
        'lossy-uri: segment with non-minimal 2-byte value 0x0005 prints as seg=5')
    add([gen('q'), Component.from_bytes(b'\x01\x02\x03', Component.TYPE_VERSION)],
        'lossy-uri: version with 3-byte value (not a NonNegativeInteger) prints as v=66051')
    add([gen('q'), Component.from_bytes(b'', Component.TYPE_SEQUENCE_NUM)],
        'lossy-uri: sequence-num with empty value prints as seq=0')

    # Random mixtures.
    for i in range(60):
        add([random_component(rng) for _ in range(rng.randrange(1, 8))], f'random mixed name #{i}')
    return pool


# ---------------------------------------------------------------------------
# Interests
# ---------------------------------------------------------------------------

def interest_name_pool(rng: random.Random) -> list[list]:
    return [
        Name.from_str('/interop/interest'),
        [gen('a')],
        [gen('a'), Component.from_version(3), Component.from_segment(0)],
        [gen('x'), Component.from_bytes(rng.randbytes(32), Component.TYPE_IMPLICIT_SHA256)],
        [gen('sp ace'), gen('%'), Component.from_bytes(b'k', Component.TYPE_KEYWORD)],
        [gen('.'), gen('..'), gen('...')],
        [gen('t'), Component.from_bytes(b'v', 252), Component.from_bytes(b'', 65535)],
        [gen('e'), Component.from_bytes(b''), gen('f')],
        [],
    ]


def add_interests(out: Records, rng: random.Random, ring: Keyring, names: list[list]):
    hint_sets = [
        [Name.from_str('/hint')],
        [Name.from_str('/ndn/edu/ucla'), Name.from_str('/ndn/edu/arizona')],
        [[gen('h'), Component.from_version(1)], Name.from_str('/h2/%00'), []],
    ]
    lifetimes = [0, 1, 4000, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff, 0x100000000]
    app_options = [None, b'', None]   # third slot gets random bytes per packet
    index = 0
    # Every combination of the optional Interest elements.
    for can_be_prefix in (False, True):
        for must_be_fresh in (False, True):
            for with_hint in (False, True):
                for with_nonce in (False, True):
                    for with_lifetime in (False, True):
                        for with_hop in (False, True):
                            for app_slot in range(3):
                                param = InterestParam(
                                    can_be_prefix=can_be_prefix,
                                    must_be_fresh=must_be_fresh,
                                    nonce=rng.choice([0, 1, 0xffffffff, rng.randrange(1 << 32)])
                                    if with_nonce else None,
                                    lifetime=rng.choice(lifetimes) if with_lifetime else None,
                                    hop_limit=rng.choice([0, 1, 64, 255]) if with_hop else None,
                                    forwarding_hint=rng.choice(hint_sets) if with_hint else [])
                                app = app_options[app_slot]
                                if app_slot == 2:
                                    app = rng.randbytes(rng.choice([1, 16, 300]))
                                name = names[index % len(names)]
                                index += 1
                                parts = [f'CanBePrefix={can_be_prefix}', f'MustBeFresh={must_be_fresh}',
                                         f'ForwardingHint={with_hint}', f'Nonce={with_nonce}',
                                         f'Lifetime={with_lifetime}', f'HopLimit={with_hop}',
                                         'AppParams=' + ('none', 'empty', 'bytes')[app_slot]]
                                out.interest(name, param, app, note='unsigned Interest ' + ' '.join(parts))

    out.interest('/default', InterestParam(), note='InterestParam() defaults: python-ndn writes Lifetime 4000')
    out.interest('/nolife', InterestParam(lifetime=None), note='no element besides the Name')
    out.interest([], InterestParam(lifetime=None), note='empty Name, no other element')
    out.interest([gen('a'), Component.from_bytes(rng.randbytes(32), Component.TYPE_PARAMETERS_SHA256),
                  gen('b')], InterestParam(nonce=7), b'params-in-middle',
                 note='ApplicationParameters with the params digest placed in the middle of the name')
    out.interest('/big', InterestParam(nonce=1), rng.randbytes(8192),
                 note='8 KiB ApplicationParameters')

    # Signed Interests (v0.3: InterestSignatureInfo/Value, params digest).
    rsa, ecdsa, ed = ring.keys['rsa'], ring.keys['ecdsa'], ring.keys['ed25519']
    hmac_name, hmac_key = next(iter(ring.hmac.items()))
    signers = [
        ('DigestSha256', lambda: DigestSha256Signer(for_interest=False)),
        ('RSA', lambda: rsa.signer()),
        ('ECDSA P-256', lambda: ecdsa.signer()),
        ('HMAC', lambda: HmacSha256Signer(hmac_name, hmac_key)),
        ('Ed25519', lambda: ed.signer()),
        ('Null', NullSigner),
    ]
    extras = [
        ('no SignatureNonce/Time/SeqNum', {}),
        ('SignatureNonce (1-byte value)', {'nonce': 0x2a}),
        ('SignatureNonce (8-byte value)', {'nonce': rng.randrange(1 << 56, 1 << 64)}),
        ('SignatureTime', {'time': 1700000000000}),
        ('SignatureSeqNum', {'seq_num': 0}),
        ('SignatureNonce+Time+SeqNum', {'nonce': rng.randrange(1 << 32, 1 << 64),
                                        'time': 1741305600000, 'seq_num': 65536}),
    ]
    for sig_label, make_signer in signers:
        for extra_label, extra in extras:
            for app in (None, b'signed-app-params'):
                param = InterestParam(nonce=rng.randrange(1 << 32), must_be_fresh=app is None)
                signer = ExtendedSigner(make_signer(), **extra) if extra else make_signer()
                out.interest(Name.from_str('/interop/signed') + [Component.from_sequence_num(index)],
                             param, app, signer,
                             note=f'signed Interest {sig_label}, {extra_label}, '
                                  f'AppParams={"absent (python-ndn writes empty)" if app is None else "bytes"}')
                index += 1
    # As for Data: the ECDSA SignatureValue is shrunk after signing, which can
    # move the outer TLV-LENGTH across the 253-byte boundary.
    for size in range(40, 58, 2):
        out.interest('/interop/signed/ecdsa-boundary', InterestParam(nonce=size), bytes(size),
                     ecdsa.signer(), note=f'ECDSA-signed Interest near the 253-byte outer-length '
                                          f'boundary ({size}-byte AppParams)')
    out.interest('/interop/signed/auto', InterestParam(), None, DigestSha256Signer(for_interest=True),
                 note='signed Interest DigestSha256Signer(for_interest=True): python-ndn adds '
                      'SignatureTime and a random 64-bit SignatureNonce')
    out.interest('/interop/signed/keydigest', InterestParam(can_be_prefix=True), b'\x01',
                 ExtendedSigner(ecdsa.signer(), key_digest=ecdsa.key_digest, seq_num=9),
                 note='signed Interest ECDSA with KeyDigest KeyLocator and SignatureSeqNum')
    out.interest('/interop/signed/hint', InterestParam(forwarding_hint=hint_sets[1], hop_limit=3),
                 b'x', ed.signer(ed.cert_name),
                 note='signed Interest Ed25519 (KeyLocator=cert name) with ForwardingHint and HopLimit')


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def add_data(out: Records, rng: random.Random, ring: Keyring, names: list[list]):
    signers = data_signers(ring)
    content_types = [None, ContentType.BLOB, ContentType.LINK, ContentType.KEY,
                     ContentType.NACK, 5, 1024, 0x10000]
    freshness = [None, 0, 1000, 0x10000, 0x100000000]
    final_blocks = [None, Component.from_segment(9), gen('last')]
    index = 0
    # MetaInfo combinations; signer and content rotate.
    for content_type in content_types:
        for period in freshness:
            for final_block in final_blocks:
                signer = signers[index % len(signers)]
                content = [b'', b'hello', rng.randbytes(40)][index % 3]
                meta = MetaInfo(content_type=content_type, freshness_period=period,
                                final_block_id=final_block)
                out.data(names[index % len(names)], meta, content, signer.make(),
                         note=f'Data MetaInfo ContentType={content_type} FreshnessPeriod={period} '
                              f'FinalBlockId={"none" if final_block is None else Component.to_str(final_block)}'
                              f'; {signer.note}')
                index += 1

    # Every signer with each content size; no MetaInfo at all.
    sizes = [0, 1, 252, 253, 8192, 70000]
    for signer in signers:
        for size in sizes:
            out.data(Name.from_str('/interop/data/size') + [Component.from_number(size, Component.TYPE_SEGMENT)],
                     None, rng.randbytes(size), signer.make(),
                     note=f'Data without MetaInfo, {size}-byte content; {signer.note}')

    # ECDSA signatures are variable-length; python-ndn shrinks the buffer after
    # signing, which can also shrink the outer TLV-LENGTH across 253.
    for size in range(84, 100, 2):
        out.data('/interop/data/ecdsa-boundary', None, bytes(size), ring.keys['ecdsa'].signer(),
                 note=f'ECDSA Data near the 253-byte outer-length boundary ({size}-byte content)')

    out.data('/interop/data/blob-default', MetaInfo(), b'blob', DigestSha256Signer(),
             note='MetaInfo() default: python-ndn writes ContentType=0 (BLOB) explicitly')
    out.data('/interop/data/empty-meta', MetaInfo(content_type=None), b'x', DigestSha256Signer(),
             note='empty MetaInfo element (14 00): every MetaInfo field set to None')
    out.data('/interop/data/no-content', MetaInfo(freshness_period=1), None, DigestSha256Signer(),
             note='Content element absent (content=None)')
    out.data('/interop/data/no-content-no-meta', None, None, ring.keys['ecdsa'].signer(),
             note='no MetaInfo and no Content element')
    out.data([], None, b'root', DigestSha256Signer(), note='Data with empty Name')
    out.data('/interop/data/sigtime', None, b'timed',
             ExtendedSigner(ring.keys['ecdsa'].signer(), time=1700000000000),
             note='Data SignatureInfo with SignatureTime (extra sub-element)')
    out.data('/interop/data/sigseq', None, b'seq',
             ExtendedSigner(DigestSha256Signer(), seq_num=5, nonce=0x0102),
             note='Data SignatureInfo with SignatureNonce and SignatureSeqNum (extra sub-elements)')
    out.data('/interop/data/digest-locator', None, b'rsa',
             ExtendedSigner(ring.keys['rsa'].signer(), key_digest=ring.keys['rsa'].key_digest),
             note='RSA Data with KeyDigest KeyLocator')


def add_certificates(out: Records, rng: random.Random, ring: Keyring):
    for key in ring.keys.values():
        out.data_wire(key.cert_wire,
                      f'self-signed certificate ({key.label}), KeyLocator=key name, '
                      'ValidityPeriod 19700101T000000 .. now+20y',
                      {'cert_hex': None})   # self-signed: verified with its own key

    start = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    issued = [
        ('ecdsa', 'rsa', 'python-issuer', 86400, None),
        ('ed25519', 'ecdsa', 'ecdsa-issuer', 365 * 86400, None),
        ('rsa', 'ed25519', 'ed-issuer', 3600, None),
        ('ecdsa', 'ecdsa', 'self-desc', 10 * 86400,
         [('purpose', 'interop'), ('library', 'python-ndn 0.5.2')]),
        ('ed25519', 'rsa', 'long-lived', 100 * 365 * 86400, [('k', 'v')]),
    ]
    for subject_label, issuer_label, issuer_id, seconds, description in issued:
        subject, issuer = ring.keys[subject_label], ring.keys[issuer_label]
        signer = issuer.signer(issuer.cert_name)
        if description:
            signer = ExtendedSigner(signer, description=description)
        _, wire = derive_cert(subject.key_name, issuer_id, subject.public_der, signer, start, seconds)
        wire = bytes(wire)
        ring.certs.append(wire)
        out.data_wire(wire, f'certificate for {subject_label} key issued by {issuer_label} '
                            f'(KeyLocator=issuer cert name), ValidityPeriod {seconds}s from '
                            f'20240102T030405' + (', AdditionalDescription' if description else ''),
                      key_material(signer))   # the issuer's certificate


# ---------------------------------------------------------------------------
# LpPackets
# ---------------------------------------------------------------------------

def add_lp_packets(out: Records, rng: random.Random):
    interest = bytes(make_interest('/lp/interest', InterestParam(nonce=0x01020304)))
    data = bytes(make_data('/lp/data', MetaInfo(freshness_period=1000), b'payload', DigestSha256Signer()))

    out.lp('fragment only (Interest)', fragment=interest)
    out.lp('fragment only (Data)', fragment=data)
    for size in (1, 4, 8, 32):
        out.lp(f'{size}-byte PitToken + Interest', pit_token=rng.randbytes(size), fragment=interest)
    out.lp('PitToken + Data', pit_token=rng.randbytes(8), fragment=data)
    for reason in (None, NackReason.CONGESTION, NackReason.DUPLICATE, NackReason.NO_ROUTE, 999):
        nack = NetworkNack()
        nack.nack_reason = reason
        out.lp(f'Nack reason={reason} + Interest', nack=nack, fragment=interest)
    nack = NetworkNack()
    nack.nack_reason = NackReason.NO_ROUTE
    out.lp('PitToken + Nack + Interest', pit_token=b'\xaa\xbb\xcc\xdd', nack=nack, fragment=interest)
    for mark in (0, 1, 0x1234):
        out.lp(f'CongestionMark={mark} + Data', congestion_mark=mark, fragment=data)
    for face in (0, 1, 300, 0x10000, 0x100000000):
        out.lp(f'IncomingFaceId={face} + Interest', incoming_face_id=face, fragment=interest)
        out.lp(f'NextHopFaceId={face} + Interest', next_hop_face_id=face, fragment=interest)
    for seq in (0, 1, 0xfedcba9876543210):
        out.lp(f'TxSequence={seq} (8 octets) + Data', tx_sequence=seq.to_bytes(8, 'big'), fragment=data)
        out.lp(f'Ack={seq} (8 octets), no fragment', ack=seq.to_bytes(8, 'big'))
    out.lp('Ack (8 octets) + Interest', ack=(77).to_bytes(8, 'big'), fragment=interest)
    out.lp('PitToken + IncomingFaceId + CongestionMark + Data',
           pit_token=b'\x01\x02', incoming_face_id=5, congestion_mark=1, fragment=data)
    out.lp('PitToken + Nack + NextHopFaceId + CongestionMark + Interest',
           pit_token=b'\x09', nack=nack, next_hop_face_id=260, congestion_mark=2, fragment=interest)
    out.lp('IncomingFaceId + NextHopFaceId + TxSequence + Data',
           incoming_face_id=1, next_hop_face_id=2, tx_sequence=(3).to_bytes(8, 'big'), fragment=data)
    out.lp('empty LpPacket (no fields)')

    # Fragmentation (Sequence, FragIndex, FragCount); Sequence declared on top of
    # python-ndn's model, see FragmentedLpPacketValue.
    big = bytes(make_data('/lp/big', None, rng.randbytes(3000), DigestSha256Signer()))
    pieces = [big[i:i + 1200] for i in range(0, len(big), 1200)]
    base_seq = rng.randrange(1 << 63)
    for i, piece in enumerate(pieces):
        out.lp(f'fragment {i} of {len(pieces)} (Sequence/FragIndex/FragCount; Sequence field '
               'added to python-ndn\'s LpPacketValue model)', model=FragmentedLpPacketValue,
               sequence=base_seq + i, frag_index=i, frag_count=len(pieces), fragment=piece)
    out.lp('Sequence only + full Interest (model extended with Sequence)',
           model=FragmentedLpPacketValue, sequence=0, fragment=interest)


# ---------------------------------------------------------------------------

def generate() -> tuple[list[dict], Keyring]:
    rng = random.Random(SEED)
    out = Records()
    ring = make_keyring(rng)
    names = add_names(out, rng)
    add_interests(out, rng, ring, interest_name_pool(rng))
    digest_types = (Component.TYPE_IMPLICIT_SHA256, Component.TYPE_PARAMETERS_SHA256)
    data_names = [n for n in names
                  if sum(len(c) for c in n) < 1000
                  and not any(Component.get_type(c) in digest_types for c in n)]
    add_data(out, rng, ring, data_names)
    add_certificates(out, rng, ring)
    add_lp_packets(out, rng)
    return out.items, ring


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print('usage: gen_packets.py OUT.jsonl', file=sys.stderr)
        return 2
    records, _ = generate()
    with open(argv[1], 'w', encoding='utf-8') as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
