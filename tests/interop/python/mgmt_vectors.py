#!/usr/bin/env python3
"""Encode NFD management structures with python-ndn for Granary to decode.

Usage: mgmt_vectors.py            (writes JSONL to stdout)

Every record is one line:

    {"type": "...", "hex": "<wire>", "fields": {...}, "note": "..."}

type                 hex holds
-------------------  ---------------------------------------------------------------
control_parameters   a ControlParameters TLV (104)
control_response     a ControlResponse TLV (101); `fields.body` is the body
                     ControlParameters (or null)
face_status          one FaceStatus TLV (128)
fib_entry            one FibEntry TLV (128)
rib_entry            one RibEntry TLV (128)
strategy_choice      one StrategyChoice TLV (128)
cs_info              one CsInfo TLV (128)
general_status       the ForwarderStatus dataset payload: the GeneralStatus
                     fields with no enclosing TLV (as NFD puts them in Content)
dataset              several items of one kind back to back (a dataset payload);
                     `fields` is {"item_type": "<one of the item types>",
                     "items": [{...}, ...]}
command_v2           an Interest for make_command_v2's name, signed as a v0.3 signed
                     Interest with DigestSha256Signer(for_interest=True)
command_legacy       an Interest for make_command's name (legacy 4-component
                     signed form, DigestSha256), no ApplicationParameters

`fields` comes from parsing `hex` back with python-ndn's own models, so it
describes what is on the wire.  Keys are python-ndn's field names; every field of
the model is present, null when absent (including python-ndn's DNMP extension
fields of GeneralStatus, never set here).  A Name is given as the hex of its Name
TLV; a nested model (Strategy, NextHopRecord, Route, a response body) as an
object; strings as strings.  For commands, `fields` is {"prefix": <Name TLV hex>,
"module": str, "verb": str, "params": {...ControlParameters fields...}}.

Values come from a seeded random.Random plus fixed boundary values (NNI widths
1/2/4/8, empty strings and names, non-ASCII URIs); only the timestamps and nonces
python-ndn puts into signed commands change between runs.
"""
import json
import random
import sys

from ndn.app_support.nfd_mgmt import (
    ControlParameters, ControlParametersValue, ControlResponse, CsInfo, FaceStatus,
    FaceStatusMsg, FibEntry, FibStatus, GeneralStatus, NextHopRecord, RibEntry,
    RibStatus, Route, Strategy, StrategyChoice, StrategyChoiceMsg, make_command,
    make_command_v2)
from ndn.encoding import (
    BytesField, Component, InterestParam, ModelField, Name, NameField, RepeatedField, TlvModel,
    UintField, make_interest, parse_interest)
from ndn.security import DigestSha256Signer

SEED = 20250601

# NonNegativeInteger boundaries: every encoded width (1, 2, 4, 8 bytes) and its edges.
NNI_EDGES = [0, 1, 0xFC, 0xFD, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000,
             0xFFFFFFFFFFFFFFFF]

URIS = [
    "udp4://192.0.2.1:6363", "udp6://[2001:db8::1]:6363", "tcp4://198.51.100.7:6363",
    "unix:///run/nfd/nfd.sock", "ether://[01:00:5e:00:17:aa]", "dev://eth0",
    "udp6://[fe80::1068:dddb:fe26:fe3f%en0]:6363", "internal://", "null://",
    "ws://[::ffff:192.0.2.9]:54321", "fd://42", "unix:///tmp/caf\u00e9/\u00f1.sock", "",
]

NAMES = ["/", "/a", "/localhost/nfd", "/ndn/edu/ucla/%00%01%FF", "/example/v=7/seg=3",
         "/32=metadata/8=x/255=%00", "/sha256digest=" + "ab" * 32, "/.../a%20b"]

STRATEGIES = ["/localhost/nfd/strategy/best-route/v=5", "/localhost/nfd/strategy/multicast",
              "/localhost/nfd/strategy/asf/v=4/probing-interval~30000", "/"]


def text(s):
    """A string field value. python-ndn 0.5.2's BytesField(is_string=True) sizes a
    str by characters but writes its UTF-8 bytes, so a non-ASCII str fails to
    encode; given the UTF-8 bytes it writes exactly what it means to."""
    return s.encode("utf-8")


class CsInfoMsg(TlvModel):
    """One CsInfo inside its dataset TLV (python-ndn has no wrapper for it)."""
    info = ModelField(0x80, CsInfo)


class ControlResponseMsg(TlvModel):
    """ControlResponse with its outer TLV (python-ndn's model is the inner part)."""
    resp = ModelField(0x65, ControlResponse)


# ---------------------------------------------------------------------------
# Dumping a parsed python-ndn model to JSON
# ---------------------------------------------------------------------------

def dump_field(model, f):
    if isinstance(f, NameField):
        v = f.get_value(model)
        return None if v is None else bytes(Name.to_bytes(v)).hex()
    if isinstance(f, UintField):
        v = f.get_value(model)
        return None if v is None else int(v)
    if isinstance(f, BytesField):
        v = getattr(model, f.name)
        if v is None:
            return None
        return v if isinstance(v, str) else bytes(v).hex()
    if isinstance(f, ModelField):
        v = getattr(model, f.name)
        return None if v is None else dump(v)
    if isinstance(f, RepeatedField):
        v = getattr(model, f.name) or []
        return [dump(x) for x in v]
    raise TypeError(f"unhandled field {f.name}: {type(f).__name__}")


def dump(model):
    return {f.name: dump_field(model, f) for f in model._encoded_fields}


# ---------------------------------------------------------------------------
# Value generators
# ---------------------------------------------------------------------------

def nni(rng):
    return rng.choice(NNI_EDGES) if rng.random() < 0.5 else rng.randrange(0, 1 << rng.choice([8, 16, 32, 64]))


def maybe(rng, p, fn):
    return fn() if rng.random() < p else None


def random_cp_value(rng, p):
    cp = ControlParametersValue()
    cp.name = maybe(rng, p, lambda: rng.choice(NAMES))
    cp.face_id = maybe(rng, p, lambda: nni(rng))
    cp.uri = maybe(rng, p, lambda: text(rng.choice(URIS)))
    cp.local_uri = maybe(rng, p, lambda: text(rng.choice(URIS)))
    cp.origin = maybe(rng, p, lambda: rng.choice([0, 64, 65, 66, 128, 129, 255, nni(rng)]))
    cp.cost = maybe(rng, p, lambda: nni(rng))
    cp.capacity = maybe(rng, p, lambda: nni(rng))
    cp.count = maybe(rng, p, lambda: nni(rng))
    cp.base_congestion_mark_interval = maybe(rng, p, lambda: nni(rng))
    cp.default_congestion_threshold = maybe(rng, p, lambda: nni(rng))
    cp.mtu = maybe(rng, p, lambda: nni(rng))
    cp.flags = maybe(rng, p, lambda: nni(rng))
    cp.mask = maybe(rng, p, lambda: nni(rng))
    if rng.random() < p:
        cp.strategy = Strategy()
        cp.strategy.name = rng.choice(STRATEGIES)
    cp.expiration_period = maybe(rng, p, lambda: nni(rng))
    cp.face_persistency = maybe(rng, p, lambda: rng.choice([0, 1, 2]))
    return cp


def random_face_status(rng, p):
    fs = FaceStatus()
    fs.face_id = nni(rng)
    fs.uri = text(rng.choice(URIS))
    fs.local_uri = text(rng.choice(URIS))
    fs.expiration_period = maybe(rng, p, lambda: nni(rng))
    fs.face_scope = rng.choice([0, 1])
    fs.face_persistency = rng.choice([0, 1, 2])
    fs.link_type = rng.choice([0, 1, 2])
    fs.base_congestion_mark_interval = maybe(rng, p, lambda: nni(rng))
    fs.default_congestion_threshold = maybe(rng, p, lambda: nni(rng))
    fs.mtu = maybe(rng, p, lambda: nni(rng))
    for k in ("n_in_interests", "n_in_data", "n_in_nacks", "n_out_interests",
              "n_out_data", "n_out_nacks", "n_in_bytes", "n_out_bytes"):
        setattr(fs, k, nni(rng))
    fs.flags = rng.randrange(0, 8)  # FaceFlags is a python Flag: only defined bits
    return fs


def random_fib_entry(rng, n):
    e = FibEntry()
    e.name = rng.choice(NAMES)
    hops = []
    for _ in range(n):
        h = NextHopRecord()
        h.face_id = nni(rng)
        h.cost = nni(rng)
        hops.append(h)
    e.next_hop_records = hops
    return e


def random_rib_entry(rng, n):
    e = RibEntry()
    e.name = rng.choice(NAMES)
    routes = []
    for _ in range(n):
        r = Route()
        r.face_id = nni(rng)
        r.origin = rng.choice([0, 64, 65, 66, 128, 129, 255, nni(rng)])
        r.cost = nni(rng)
        r.flags = rng.randrange(0, 4)  # RouteFlags: CHILD_INHERIT | CAPTURE
        r.expiration_period = maybe(rng, 0.5, lambda: nni(rng))
        routes.append(r)
    e.routes = routes
    return e


def random_strategy_choice(rng):
    sc = StrategyChoice()
    sc.name = rng.choice(NAMES)
    sc.strategy = Strategy()
    sc.strategy.name = rng.choice(STRATEGIES)
    return sc


def random_cs_info(rng):
    ci = CsInfo()
    ci.capacity = nni(rng)
    ci.flags = rng.choice([0, 1, 2, 3, nni(rng)])
    ci.n_cs_entries = nni(rng)
    ci.n_hits = nni(rng)
    ci.n_misses = nni(rng)
    return ci


def random_general_status(rng):
    gs = GeneralStatus()
    gs.nfd_version = text(rng.choice(["22.12", "0.7.1-12-g3d1b5a0", "", "granary \u2603"]))
    gs.start_timestamp = rng.choice([0, 1_700_000_000_000, nni(rng)])
    gs.current_timestamp = rng.choice([1_700_000_123_456, nni(rng)])
    for k in ("n_name_tree_entries", "n_fib_entries", "n_pit_entries",
              "n_measurement_entries", "n_cs_entries", "n_in_interests", "n_in_data",
              "n_in_nacks", "n_out_interests", "n_out_data", "n_out_nacks",
              "n_satisfied_interests", "n_unsatisfied_interests"):
        setattr(gs, k, nni(rng))
    return gs


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------

def record(typ, wire, fields, note):
    return {"type": typ, "hex": bytes(wire).hex(), "fields": fields, "note": note}


def one_item(msg_cls, attr, item, repeated=True):
    """Encodes one dataset item inside its TLV 128 and parses it back."""
    msg = msg_cls()
    setattr(msg, attr, [item] if repeated else item)
    wire = bytes(msg.encode())
    back = getattr(msg_cls.parse(wire), attr)
    return wire, dump(back[0] if repeated else back)


def gen_control_parameters(rng, out):
    cases = [(0.0, "empty ControlParameters"), (1.0, "every field")]
    cases += [(p, f"random fields, p={p}") for p in (0.2, 0.5, 0.8) for _ in range(12)]
    for p, note in cases:
        cp = ControlParameters()
        cp.cp = random_cp_value(rng, p)
        wire = bytes(cp.encode())
        out.append(record("control_parameters", wire, dump(ControlParameters.parse(wire).cp), note))
    for v in NNI_EDGES:
        cp = ControlParameters()
        cp.cp = ControlParametersValue()
        cp.cp.face_id = v
        cp.cp.expiration_period = v
        wire = bytes(cp.encode())
        out.append(record("control_parameters", wire, dump(ControlParameters.parse(wire).cp),
                          f"NNI width boundary {v}"))


def gen_control_responses(rng, out):
    texts = ["OK", "", "Face with remote URI already exists", "authorization rejected",
             "caf\u00e9 \u2603"]
    for code in (200, 400, 403, 404, 406, 409, 500, 501, 504, 0, 0xFFFF, 0xFFFFFFFF):
        for with_body in (False, True):
            msg = ControlResponseMsg()
            msg.resp = ControlResponse()
            msg.resp.status_code = code
            msg.resp.status_text = text(rng.choice(texts))
            if with_body:
                msg.resp.body = random_cp_value(rng, 0.5)
            wire = bytes(msg.encode())
            back = ControlResponseMsg.parse(wire).resp
            out.append(record("control_response", wire, dump(back),
                              f"status {code}, {'with' if with_body else 'no'} body"))


def gen_datasets(rng, out):
    for i in range(20):
        fs = random_face_status(rng, [0.0, 1.0, 0.5][i % 3])
        wire, fields = one_item(FaceStatusMsg, "face_status", fs)
        out.append(record("face_status", wire, fields, "FaceStatus"))
    for n in [0, 1, 2, 5] * 3:
        wire, fields = one_item(FibStatus, "entries", random_fib_entry(rng, n))
        out.append(record("fib_entry", wire, fields, f"FibEntry with {n} NextHopRecords"))
    for n in [0, 1, 3] * 4:
        wire, fields = one_item(RibStatus, "entries", random_rib_entry(rng, n))
        out.append(record("rib_entry", wire, fields, f"RibEntry with {n} Routes"))
    for _ in range(10):
        wire, fields = one_item(StrategyChoiceMsg, "strategy_choices", random_strategy_choice(rng))
        out.append(record("strategy_choice", wire, fields, "StrategyChoice"))
    for _ in range(10):
        wire, fields = one_item(CsInfoMsg, "info", random_cs_info(rng), repeated=False)
        out.append(record("cs_info", wire, fields, "CsInfo"))
    for _ in range(10):
        gs = random_general_status(rng)
        wire = bytes(gs.encode())
        out.append(record("general_status", wire, dump(GeneralStatus.parse(wire)),
                          "GeneralStatus (ForwarderStatus payload)"))

    # Whole datasets: several items back to back.
    sets = [
        ("face_status", FaceStatusMsg, "face_status",
         [random_face_status(rng, 0.5) for _ in range(4)]),
        ("fib_entry", FibStatus, "entries", [random_fib_entry(rng, i) for i in range(4)]),
        ("rib_entry", RibStatus, "entries", [random_rib_entry(rng, i) for i in range(3)]),
        ("strategy_choice", StrategyChoiceMsg, "strategy_choices",
         [random_strategy_choice(rng) for _ in range(3)]),
        ("fib_entry", FibStatus, "entries", []),
    ]
    for item_type, cls, attr, items in sets:
        msg = cls()
        setattr(msg, attr, items)
        wire = bytes(msg.encode())
        back = getattr(cls.parse(wire), attr) or []
        out.append(record("dataset", wire,
                          {"item_type": item_type, "items": [dump(x) for x in back]},
                          f"{len(items)} x {item_type}"))


class RemoteFace:
    """Stands in for a python-ndn Face: make_command asks only isLocalFace()."""

    def isLocalFace(self):
        return False


def command_record(typ, wire, prefix, module, verb, note):
    interest_name = parse_interest(wire)[0]
    n = len(Name.from_str(prefix))
    # The component after module and verb holds a ControlParameters TLV.
    params_component = interest_name[n + 2]
    cp = ControlParameters.parse(bytes(Component.get_value(params_component))).cp
    return record(typ, wire, {
        "prefix": bytes(Name.to_bytes(Name.from_str(prefix))).hex(),
        "module": module, "verb": verb, "params": dump(cp)}, note)


def gen_commands(out):
    commands = [
        ("rib", "register", dict(name="/example/app", face_id=300, origin=0, cost=10,
                                 flags=1, expiration_period=3_600_000)),
        ("rib", "unregister", dict(name="/example/app", face_id=300, origin=0)),
        ("faces", "create", dict(uri="udp4://192.0.2.1:6363", face_persistency=0,
                                 mtu=1400, flags=4, mask=4)),
        ("faces", "update", dict(face_id=7, base_congestion_mark_interval=100_000_000,
                                 default_congestion_threshold=65536)),
        ("faces", "destroy", dict(face_id=0xFFFFFFFFFF)),
        ("fib", "add-nexthop", dict(name="/a/b", face_id=1, cost=0)),
        ("strategy-choice", "set", dict(name="/",
                                        strategy="/localhost/nfd/strategy/multicast")),
        ("strategy-choice", "unset", dict(name="/x/y/z")),
        ("cs", "config", dict(capacity=65536, flags=1, mask=3)),
        ("cs", "erase", dict(name="/a", count=10)),
        ("status", "general", dict()),
    ]
    for module, verb, kw in commands:
        # v0.3 form: the name from make_command_v2, then an Interest with empty
        # ApplicationParameters signed by DigestSha256 (SignatureNonce + Time).
        name = make_command_v2(module, verb, **kw)
        wire = make_interest(name, InterestParam(lifetime=4000), app_param=b"",
                             signer=DigestSha256Signer(for_interest=True))
        out.append(command_record("command_v2", bytes(wire), "/localhost/nfd", module, verb,
                                  f"make_command_v2 {module}/{verb}"))
        # Legacy form: timestamp/nonce/SignatureInfo/SignatureValue in the name.
        name = make_command(module, verb, **kw)
        wire = make_interest(name, InterestParam(lifetime=4000))
        out.append(command_record("command_legacy", bytes(wire), "/localhost/nfd", module, verb,
                                  f"make_command {module}/{verb}"))
    # Remote (non-local) face: the prefix becomes /localhop/nfd.
    name = make_command_v2("rib", "register", RemoteFace(), name="/remote", face_id=9)
    wire = make_interest(name, InterestParam(), app_param=b"",
                         signer=DigestSha256Signer(for_interest=True))
    out.append(command_record("command_v2", bytes(wire), "/localhop/nfd", "rib", "register",
                              "make_command_v2 on a non-local face (/localhop/nfd)"))
    name = make_command("rib", "register", RemoteFace(), name="/remote", face_id=9)
    wire = make_interest(name, InterestParam())
    out.append(command_record("command_legacy", bytes(wire), "/localhop/nfd", "rib", "register",
                              "make_command on a non-local face (/localhop/nfd)"))


def generate():
    rng = random.Random(SEED)
    out = []
    gen_control_parameters(rng, out)
    gen_control_responses(rng, out)
    gen_datasets(rng, out)
    gen_commands(out)
    return out


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    for r in generate():
        sys.stdout.write(json.dumps(r, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
