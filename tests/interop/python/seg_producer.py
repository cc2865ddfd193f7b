#!/usr/bin/env python3
"""A python-ndn segmented-object producer for Granary's fetch tests (CONTRACT.md, section 6).

Usage: seg_producer.py SOCKET PREFIX FILE [--version V] [--chunk N] [--no-metadata]
                       [--corrupt SEG[:TIMES]]

Connects to the forwarder over the Unix stream socket SOCKET (python-ndn UnixFace,
ndn.appv2.NDNApp), registers PREFIX and serves the bytes of FILE as a segmented object, named as
the NDN-DPDK file server names files:

  PREFIX/32=metadata   (CanBePrefix + MustBeFresh) RDR metadata Data named
                       PREFIX/32=metadata/v=<now>/seg=0, FreshnessPeriod 1; Content = the
                       versioned Name, then NDN-DPDK FileMetadata fields FinalBlockId (26),
                       SegmentSize (0xF500) and Size (0xF502). Not served with --no-metadata.
  PREFIX (CanBePrefix) segment 0 (version discovery by CanBePrefix).
  PREFIX/v=V/seg=i     N bytes of FILE per segment (default 8000), FinalBlockId = last segment,
                       FreshnessPeriod 10000.

Every Data is signed with DigestSha256 (python-ndn's DigestSha256Signer). Any other Interest
gets no answer.

--corrupt SEG[:TIMES] flips one content byte of segment SEG after signing (so its digest no
longer matches) in the first TIMES answers for it (default: every answer); a corrupted answer
has FreshnessPeriod 0 so a cache does not serve it to a MustBeFresh Interest.

stdout: `ready` once the registration succeeded, then `served <uri>` per Data. Exits 0 on
SIGTERM/SIGINT or when the forwarder closes the connection; 1 on a failure; 2 on a usage error.
"""
import argparse
import asyncio
import signal
import sys
import time

from ndn.encoding import Component, Name
from ndn.security import DigestSha256Signer
from ndn.transport.stream_face import UnixFace


def var_num(n: int) -> bytes:
    if n < 253:
        return bytes([n])
    if n <= 0xFFFF:
        return b'\xfd' + n.to_bytes(2, 'big')
    if n <= 0xFFFFFFFF:
        return b'\xfe' + n.to_bytes(4, 'big')
    return b'\xff' + n.to_bytes(8, 'big')


def nni(n: int) -> bytes:
    for size in (1, 2, 4, 8):
        if n < (1 << (8 * size)):
            return n.to_bytes(size, 'big')
    raise ValueError(n)


def tlv(t: int, v: bytes) -> bytes:
    return var_num(t) + var_num(len(v)) + v


def parse_args(argv):
    ap = argparse.ArgumentParser(prog='seg_producer.py', description=__doc__.split('\n\n')[0])
    ap.add_argument('socket')
    ap.add_argument('prefix')
    ap.add_argument('file')
    ap.add_argument('--version', type=int, default=None)
    ap.add_argument('--chunk', type=int, default=8000)
    ap.add_argument('--no-metadata', action='store_true')
    ap.add_argument('--corrupt', default=None)
    args = ap.parse_args(argv)
    if args.chunk <= 0:
        ap.error('--chunk must be positive')
    try:
        args.prefix_name = Name.from_str(args.prefix)
    except Exception as e:
        ap.error(f'bad PREFIX {args.prefix!r}: {e}')
    args.corrupt_seg, args.corrupt_times = None, None
    if args.corrupt is not None:
        try:
            parts = args.corrupt.split(':')
            args.corrupt_seg = int(parts[0])
            args.corrupt_times = int(parts[1]) if len(parts) > 1 else None
        except ValueError:
            ap.error('--corrupt wants SEG or SEG:TIMES')
    if args.version is None:
        args.version = int(time.time() * 1e6)
    return args


def say(line: str):
    print(line, flush=True)


def main(argv) -> int:
    args = parse_args(argv[1:])
    try:
        with open(args.file, 'rb') as f:
            body = f.read()
    except OSError as e:
        print(f'seg_producer.py: cannot read {args.file}: {e}', file=sys.stderr)
        return 1
    from ndn.appv2 import NDNApp, pass_all
    prefix = args.prefix_name
    versioned = prefix + [Component.from_version(args.version)]
    chunks = [body[i:i + args.chunk] for i in range(0, len(body), args.chunk)] or [b'']
    last = len(chunks) - 1
    final = Component.from_segment(last)
    app = NDNApp(face=UnixFace(args.socket))
    corrupted = {'n': 0}
    failed = {'why': None}

    def segment(i):
        name = versioned + [Component.from_segment(i)]
        bad = (i == args.corrupt_seg and chunks[i]
               and (args.corrupt_times is None or corrupted['n'] < args.corrupt_times))
        wire = app.make_data(name, chunks[i], DigestSha256Signer(),
                             freshness_period=0 if bad else 10000, final_block_id=final)
        if bad:
            corrupted['n'] += 1
            wire = bytearray(wire)
            at = bytes(wire).find(chunks[i])
            wire[at + len(chunks[i]) // 2] ^= 0x01
            wire = bytes(wire)
        return name, wire

    def on_interest(name, _app_param, reply, context):
        try:
            answer(name, reply, context)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            print(f'seg_producer.py: {type(e).__name__}: {e}', file=sys.stderr, flush=True)

    def answer(name, reply, context):
        param = context.get('int_param')
        can_be_prefix = bool(param is not None and param.can_be_prefix)
        n = len(prefix)
        if Name.is_prefix(prefix, name) is False:
            return
        rest = name[n:]
        wire = None
        out_name = name
        if (len(rest) == 1 and rest[0] == Component.from_str('32=metadata')
                and not args.no_metadata and can_be_prefix):
            out_name = name + [Component.from_version(int(time.time() * 1e6)),
                               Component.from_segment(0)]
            content = (Name.encode(versioned) + tlv(26, bytes(final))
                       + tlv(0xF500, nni(args.chunk)) + tlv(0xF502, nni(len(body))))
            wire = app.make_data(out_name, content, DigestSha256Signer(), freshness_period=1)
        elif len(rest) == 0 and can_be_prefix:
            out_name, wire = segment(0)
        elif (len(rest) == 2 and rest[0] == versioned[-1]
              and Component.get_type(rest[1]) == Component.TYPE_SEGMENT):
            i = Component.to_number(rest[1])
            if i <= last:
                out_name, wire = segment(i)
        if wire is not None and reply(wire) is not False:
            say(f'served {Name.to_str(out_name)}')

    app.attach_handler(prefix, on_interest, validator=pass_all)

    async def after_start():
        try:
            ok = await app.register(prefix)
        except Exception as e:  # noqa: BLE001
            ok = False
            failed['why'] = f'{type(e).__name__}: {e}'
        if ok:
            say('ready')
        else:
            failed['why'] = failed['why'] or 'registration failed'
            app.shutdown()

    async def run():
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await app.main_loop(after_start())
        except asyncio.CancelledError:
            return 0
        except OSError as e:
            print(f'seg_producer.py: cannot connect to {args.socket}: {e}', file=sys.stderr)
            return 1
        if failed['why']:
            print(f'seg_producer.py: {failed["why"]}', file=sys.stderr)
            return 1
        return 0

    return asyncio.run(run())


if __name__ == '__main__':
    sys.exit(main(sys.argv))
