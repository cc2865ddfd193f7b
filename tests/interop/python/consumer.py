#!/usr/bin/env python3
"""A python-ndn consumer for Granary's forwarder tests (CONTRACT.md, section 4).

Usage: consumer.py SOCKET NAME [--can-be-prefix] [--must-be-fresh] [--lifetime MS]
                   [--count K] [--api appv2|app] [--forwarding-hint NAME ...]

Connects to the forwarder over the Unix stream socket SOCKET (or, when SOCKET is
udp://HOST:PORT, python-ndn's UdpFace to that address) and expresses K Interests
(default 1), one after the other (each waits for its outcome before the next is sent).
With K = 1 the Interest name is NAME; with K > 1 Interest i (0 <= i < K) is NAME plus a
GenericNameComponent holding the decimal digits of i (NAME/0, NAME/1, ...).

Interests are made by python-ndn's express()/express_interest(): a random Nonce,
InterestLifetime MS (default 4000, python-ndn writes it even then), CanBePrefix and
MustBeFresh only when the flags are given, no HopLimit.

One JSON line per Interest on stdout, in order:

  {"name": "<Interest name, Name.to_str>", "status": "data"|"nack"|"timeout",
   "data_name": "<Data name>"|null, "content_hex": "<Content>"|null,
   "nack_reason": <int>|null, "rtt_ms": <float>,
   "sig_type": <int>|null, "digest_ok": true|false|null, "freshness_period": <int>|null}

`rtt_ms` is the time from sending the Interest to its outcome.  python-ndn only
recognises a Nack that has a NackReason element: it takes a Nack without one for an
incoming Interest (logs "No route"), so that Interest ends as "timeout".
The last three keys are extras: the Data's
SignatureType, whether a DigestSha256 signature (sig_type 0) is correct (null for other
types), and the Data's FreshnessPeriod.  Data is accepted whatever its signature.

Each Interest gets at most lifetime + 2 s; past that it is reported as "timeout" even if
python-ndn has not given up yet, and the whole run is killed (exit 3) if it somehow
exceeds K * (lifetime + 2 s) + 5 s.

--forwarding-hint NAME (repeatable) puts a ForwardingHint with these names, in order,
on every Interest (python-ndn's InterestParam.forwarding_hint).

--app-param TEXT puts TEXT (UTF-8) in the Interest's ApplicationParameters (appv2
only), signed with DigestSha256 (python-ndn requires a signature there; a digest names
no key, so it authenticates nothing).

--api picks the python-ndn application API: appv2 (default, ndn.appv2.NDNApp.express)
or app (the older ndn.app.NDNApp.express_interest).

Exit status: 0 when every Interest got a line (whatever its status), 1 when the
connection to SOCKET fails or is lost, 2 on a usage error.
"""
import argparse
import asyncio
import json
import os
import sys
import threading
import time

from ndn.encoding import Component, Name
from ndn.security import DigestSha256Signer, sha256_digest_checker
from ndn.transport.stream_face import UnixFace
from ndn.transport.udp_face import UdpFace
from ndn.types import InterestCanceled, InterestNack, InterestTimeout

GRACE_MS = 2000


def parse_args(argv):
    ap = argparse.ArgumentParser(prog='consumer.py', description=__doc__.split('\n\n')[0])
    ap.add_argument('socket', help='path of the forwarder Unix stream socket')
    ap.add_argument('name', help='Interest name (K > 1: prefix of the names)')
    ap.add_argument('--can-be-prefix', action='store_true')
    ap.add_argument('--forwarding-hint', action='append', default=[], metavar='NAME',
                    help='ForwardingHint name (repeatable, in order)')
    ap.add_argument('--must-be-fresh', action='store_true')
    ap.add_argument('--lifetime', type=int, default=4000, help='InterestLifetime ms (default 4000)')
    ap.add_argument('--count', type=int, default=1, help='number of Interests (default 1)')
    ap.add_argument('--app-param', default=None, metavar='TEXT',
                    help='ApplicationParameters (UTF-8 text; appv2 only), DigestSha256-signed')
    ap.add_argument('--api', choices=['appv2', 'app'], default='appv2',
                    help='python-ndn application API (default appv2)')
    args = ap.parse_args(argv)
    if args.count < 1 or args.lifetime < 0:
        ap.error('--count must be >= 1 and --lifetime >= 0')
    try:
        base = Name.from_str(args.name)
    except Exception as e:
        ap.error(f'bad NAME {args.name!r}: {e}')
    if args.count == 1:
        args.names = [base]
    else:
        args.names = [base + [Component.from_str(str(i))] for i in range(args.count)]
    return args


class Lost(Exception):
    """The connection to the forwarder went away."""


class Consumer:
    def __init__(self, args):
        self.args = args
        self.lost = False

    def make_app(self, face):
        if self.args.api == 'appv2':
            from ndn.appv2 import NDNApp, pass_all
            app = NDNApp(face=face)

            async def express(name):
                data_name, content, ctx = await app.express(
                    name, validator=pass_all, lifetime=self.args.lifetime,
                    can_be_prefix=self.args.can_be_prefix, must_be_fresh=self.args.must_be_fresh,
                    forwarding_hint=self.args.forwarding_hint,
                    app_param=(self.args.app_param.encode()
                               if self.args.app_param is not None else None),
                    signer=(DigestSha256Signer(for_interest=True)
                            if self.args.app_param is not None else None))
                return data_name, ctx['meta_info'], content, ctx['sig_ptrs']
        else:
            from ndn.app import NDNApp
            from ndn.security import KeychainDigest
            app = NDNApp(face=face, keychain=KeychainDigest())
            sigs = {}

            async def keep_sig(name, sig):
                sigs[Name.to_bytes(name)] = sig
                return True

            async def express(name):
                data_name, meta_info, content = await app.express_interest(
                    name, validator=keep_sig, lifetime=self.args.lifetime,
                    can_be_prefix=self.args.can_be_prefix, must_be_fresh=self.args.must_be_fresh,
                    forwarding_hint=self.args.forwarding_hint)
                return data_name, meta_info, content, sigs.pop(Name.to_bytes(data_name), None)
        self.app = app
        return express

    async def one(self, express, name) -> dict:
        rec = {'name': Name.to_str(name), 'status': 'timeout', 'data_name': None,
               'content_hex': None, 'nack_reason': None, 'rtt_ms': None,
               'sig_type': None, 'digest_ok': None, 'freshness_period': None}
        if not self.app.face.running:
            raise Lost()
        start = time.perf_counter()
        try:
            data_name, meta_info, content, sig = await asyncio.wait_for(
                express(name), (self.args.lifetime + GRACE_MS) / 1000)
            rec['rtt_ms'] = (time.perf_counter() - start) * 1000
            rec['status'] = 'data'
            rec['data_name'] = Name.to_str(data_name)
            rec['content_hex'] = bytes(content).hex() if content is not None else ''
            if meta_info is not None:
                rec['freshness_period'] = meta_info.freshness_period
            if sig is not None and sig.signature_info is not None:
                rec['sig_type'] = sig.signature_info.signature_type
                if rec['sig_type'] == 0:
                    rec['digest_ok'] = bool(await sha256_digest_checker(data_name, sig))
        except InterestNack as e:
            rec['rtt_ms'] = (time.perf_counter() - start) * 1000
            rec['status'] = 'nack'
            rec['nack_reason'] = e.reason
        except (InterestTimeout, asyncio.TimeoutError):
            rec['rtt_ms'] = (time.perf_counter() - start) * 1000
        except InterestCanceled:
            raise Lost()
        return rec

    async def fetch_all(self, express):
        try:
            for name in self.args.names:
                rec = await self.one(express, name)
                print(json.dumps(rec, ensure_ascii=False), flush=True)
        except Lost:
            self.lost = True
        finally:
            self.app.shutdown()

    async def run(self) -> int:
        if self.args.socket.startswith('udp://'):
            host, port = self.args.socket[len('udp://'):].rsplit(':', 1)
            face = UdpFace(host, int(port))
        else:
            face = UnixFace(self.args.socket)
        express = self.make_app(face)
        try:
            await self.app.main_loop(self.fetch_all(express))
        except OSError as e:
            print(f'consumer.py: cannot connect to {self.args.socket}: {e}', file=sys.stderr)
            return 1
        if self.lost:
            print('consumer.py: the forwarder closed the connection', file=sys.stderr)
            return 1
        return 0


def watchdog(seconds: float):
    """Kill the process if it runs past the overall deadline, whatever it is doing."""
    def fire():
        print(f'consumer.py: overall deadline of {seconds:.1f} s passed', file=sys.stderr, flush=True)
        os._exit(3)
    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def main(argv) -> int:
    args = parse_args(argv[1:])
    watchdog(args.count * (args.lifetime + GRACE_MS) / 1000 + 5)
    return asyncio.run(Consumer(args).run())


if __name__ == '__main__':
    sys.exit(main(sys.argv))
