#!/usr/bin/env python3
"""A python-ndn fetcher for Granary's repository tests (CONTRACT.md, section 5).

Usage: fetch.py SOCKET NAME OUT [--pipeline N] [--lifetime MS] [--retries R] [--timeout S]

Connects to the node over the Unix stream socket SOCKET (python-ndn UnixFace, ndn.appv2.NDNApp)
and fetches the newest version of the file NAME into OUT:

1. Version discovery with RDR: express NAME/32=metadata with CanBePrefix and MustBeFresh.
   The Content is the versioned Name followed by NDN-DPDK's FileMetadata fields, parsed with a
   python-ndn TlvModel: FinalBlockId (26), SegmentSize (0xF500), Size (0xF502), Mode (0xF504),
   Atime/Btime/Ctime/Mtime (0xF506..0xF50C); unknown elements are ignored, as RDR says. The
   versioned name must be NAME plus one VersionNameComponent.
2. Segments VERSIONED/seg=0 .. seg=FinalBlockId (from the metadata; from segment 0's
   FinalBlockId if the metadata has none), at most N (default 16) Interests outstanding.
   Each Data must have exactly the segment's name and the same FinalBlockId.

Every Data (metadata included) goes through a python-ndn validator that requires SignatureType
DigestSha256 (0) and python-ndn's own checker, ndn.security.sha256_digest_checker (which on its
own would pass any other SignatureType). A Data that fails it raises python-ndn's
ValidationFailure, which ends the run.

Interests: InterestLifetime MS (default 4000), a random Nonce; an Interest that times out is
sent again up to R times (default 2). A Nack ends the run at once: for the discovery Interest it
means the node has no such object (a name the node does not have fails in milliseconds).

stdout: exactly one JSON line (also on failure, a usage error excepted):

  {"versioned": "<Name.to_str of the versioned name>"|null, "bytes": n|null, "segments": k,
   "verified": true|false, "sha256": "<hex of OUT>"|null, "error": null|"<message>",
   "metadata": {"data_name": "...", "final_block_id": n|null, "segment_size": n|null,
                "size": n|null, "mode": n|null, "atime": ns|null, "btime": ns|null,
                "ctime": ns|null, "mtime": ns|null}|null}

`verified` is true only when the metadata Data and every segment passed the validator.

Exit status: 0 on success; 1 on any failure (cannot connect, Nack, timeout, bad signature, bad
metadata, wrong segment, size mismatch), with the message on stderr too and OUT removed; 2 on a
usage error; 3 when the overall deadline (--timeout S, default 60) passes.
"""
import argparse
import asyncio
import hashlib
import json
import os
import sys
import threading

from ndn.appv2 import NDNApp
from ndn.encoding import (BytesField, Component, Name, NameField, SignatureType,
                          TlvModel, UintField)
from ndn.security import sha256_digest_checker
from ndn.transport.stream_face import UnixFace
from ndn.types import (InterestCanceled, InterestNack, InterestTimeout, ValidationFailure,
                       ValidResult)

METADATA = Component.from_str('32=metadata')
TYPE_SEGMENT = Component.TYPE_SEGMENT
TYPE_VERSION = Component.TYPE_VERSION


class FileMetadata(TlvModel):
    """RDR metadata Content as NDN-DPDK's file server writes it (ndn6file.Metadata)."""
    name = NameField()
    final_block_id = BytesField(0x1a)
    segment_size = UintField(0xF500)
    size = UintField(0xF502)
    mode = UintField(0xF504)
    atime = UintField(0xF506)
    btime = UintField(0xF508)
    ctime = UintField(0xF50A)
    mtime = UintField(0xF50C)


FILE_FIELDS = ['segment_size', 'size', 'mode', 'atime', 'btime', 'ctime', 'mtime']


class Failure(Exception):
    """The fetch failed; the message says why."""


def parse_args(argv):
    ap = argparse.ArgumentParser(prog='fetch.py', description=__doc__.split('\n\n')[0])
    ap.add_argument('socket', help='path of the node Unix stream socket')
    ap.add_argument('name', help='file name, without version (e.g. /a/b)')
    ap.add_argument('out', help='output file')
    ap.add_argument('--pipeline', type=int, default=16, help='outstanding Interests (default 16)')
    ap.add_argument('--lifetime', type=int, default=4000, help='InterestLifetime ms (default 4000)')
    ap.add_argument('--retries', type=int, default=2,
                    help='retransmissions of an Interest that timed out (default 2)')
    ap.add_argument('--timeout', type=float, default=60, help='overall deadline in s (default 60)')
    args = ap.parse_args(argv)
    if args.pipeline < 1 or args.lifetime < 1 or args.retries < 0 or args.timeout <= 0:
        ap.error('--pipeline and --lifetime must be >= 1, --retries >= 0, --timeout > 0')
    try:
        args.base = Name.normalize(Name.from_str(args.name))
    except Exception as e:
        ap.error(f'bad NAME {args.name!r}: {e}')
    if args.base and bytes(args.base[-1]) == bytes(METADATA):
        args.base = args.base[:-1]
    return args


def final_seg(comp, what) -> int:
    if comp is None:
        return None
    comp = bytes(comp)
    if Component.get_type(comp) != TYPE_SEGMENT:
        raise Failure(f'{what} FinalBlockId {Component.to_str(comp)} is not a segment number')
    return Component.to_number(comp)


class Fetcher:
    def __init__(self, args):
        self.args = args
        self.result = {'versioned': None, 'bytes': None, 'segments': 0, 'verified': False,
                       'sha256': None, 'error': None, 'metadata': None}
        self.n_verified = 0
        self.out_created = False
        self.app = None

    async def validator(self, name, sig, _context):
        """DigestSha256 only, checked by python-ndn's sha256_digest_checker."""
        info = sig.signature_info
        if info is None or info.signature_type != SignatureType.DIGEST_SHA256:
            return ValidResult.FAIL
        if not await sha256_digest_checker(name, sig):
            return ValidResult.FAIL
        self.n_verified += 1
        return ValidResult.PASS

    async def express(self, name, what, **kwargs):
        """Express with retransmission on timeout; returns (data_name, content, context)."""
        uri = Name.to_str(name)
        for attempt in range(self.args.retries + 1):
            try:
                return await self.app.express(name, self.validator, lifetime=self.args.lifetime,
                                              **kwargs)
            except InterestTimeout:
                continue
            except InterestNack as e:
                if what == 'discovery':
                    raise Failure(f'no such object: {uri} was answered with a Nack '
                                  f'reason {e.reason}')
                raise Failure(f'{what} Interest {uri} was answered with a Nack reason {e.reason}')
            except ValidationFailure:
                raise Failure(f'signature check failed: the Data for {uri} is not a valid '
                              f'DigestSha256 packet')
            except InterestCanceled:
                raise Failure('the node closed the connection')
        raise Failure(f'{what} Interest {uri} timed out {self.args.retries + 1} times')

    async def discover(self):
        discovery = self.args.base + [METADATA]
        data_name, content, _ctx = await self.express(discovery, 'discovery',
                                                      can_be_prefix=True, must_be_fresh=True)
        try:
            md = FileMetadata.parse(bytes(content or b''), ignore_critical=True)
        except Exception as e:
            raise Failure(f'cannot parse the metadata Content of {Name.to_str(data_name)}: {e}')
        if md.name is None:
            raise Failure(f'the metadata Content of {Name.to_str(data_name)} has no Name')
        versioned = [bytes(c) for c in md.name]
        self.result['versioned'] = Name.to_str(versioned)
        meta = {'data_name': Name.to_str(data_name),
                'final_block_id': final_seg(md.final_block_id, 'metadata')}
        for key in FILE_FIELDS:
            meta[key] = getattr(md, key)
        self.result['metadata'] = meta
        base = [bytes(c) for c in self.args.base]
        if (len(versioned) != len(base) + 1 or versioned[:-1] != base
                or Component.get_type(versioned[-1]) != TYPE_VERSION):
            raise Failure(f'metadata names {Name.to_str(versioned)}, which is not '
                          f'{Name.to_str(base)}/v=<version>')
        self.md_verified = self.n_verified == 1
        return versioned, meta

    async def segment(self, versioned, seg):
        name = versioned + [Component.from_segment(seg)]
        data_name, content, ctx = await self.express(name, 'segment')
        if [bytes(c) for c in data_name] != name:
            raise Failure(f'segment {seg} came as {Name.to_str(data_name)}, expected '
                          f'{Name.to_str(name)}')
        meta_info = ctx['meta_info']
        fbi = final_seg(meta_info.final_block_id if meta_info else None, f'segment {seg}')
        return bytes(content or b''), fbi

    async def fetch(self):
        versioned, meta = await self.discover()
        last = meta['final_block_id']
        first = {}
        if last is None:
            # no FinalBlockId in the metadata: learn it from segment 0
            first[0] = await self.segment(versioned, 0)
            last = first[0][1]
            if last is None:
                raise Failure('neither the metadata nor segment 0 has a FinalBlockId')
        self.expected_last = last

        out = open(self.args.out, 'wb')
        self.out_created = True
        hasher = hashlib.sha256()
        total = 0
        ready = dict(first)
        next_write = 0
        next_seg = len(first)

        async def worker():
            nonlocal next_seg
            while next_seg <= last:
                seg = next_seg
                next_seg += 1
                ready[seg] = await self.segment(versioned, seg)
                wakeup.set()

        wakeup = asyncio.Event()
        workers = [asyncio.create_task(worker()) for _ in range(min(self.args.pipeline, last + 1))]
        try:
            while next_write <= last:
                while next_write in ready:
                    content, fbi = ready.pop(next_write)
                    if fbi != last:
                        raise Failure(f'segment {next_write} has FinalBlockId '
                                      f'{"seg=" + str(fbi) if fbi is not None else "(none)"}, '
                                      f'metadata says seg={last}')
                    hasher.update(content)
                    out.write(content)
                    total += len(content)
                    next_write += 1
                if next_write > last:
                    break
                done = [w for w in workers if w.done() and w.exception() is not None]
                if done:
                    raise done[0].exception()
                wakeup.clear()
                waiter = asyncio.create_task(wakeup.wait())
                await asyncio.wait([waiter, *[w for w in workers if not w.done()]],
                                   return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
        finally:
            self.result['segments'] = next_write
            for w in workers:
                w.cancel()
            out.close()
        self.result['bytes'] = total
        self.result['sha256'] = hasher.hexdigest()
        self.result['verified'] = self.md_verified and self.n_verified == last + 2
        if meta['size'] is not None and total != meta['size']:
            raise Failure(f'got {total} bytes, metadata Size says {meta["size"]}')
        if not self.result['verified']:
            raise Failure('not every packet went through the validator')

    async def body(self):
        try:
            await self.fetch()
        except Failure as e:
            self.result['error'] = str(e)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            self.result['error'] = f'{type(e).__name__}: {e}'
        finally:
            self.app.shutdown()

    async def run(self) -> int:
        self.app = NDNApp(face=UnixFace(self.args.socket))
        try:
            await self.app.main_loop(self.body())
        except OSError as e:
            self.result['error'] = f'cannot connect to {self.args.socket}: {e}'
        return self.finish()

    def finish(self, code=None) -> int:
        if self.result['error'] is not None:
            print(f'fetch.py: {self.result["error"]}', file=sys.stderr, flush=True)
            if self.out_created:
                try:
                    os.unlink(self.args.out)
                except OSError:
                    pass
            code = code or 1
        print(json.dumps(self.result), flush=True)
        return code or 0


def watchdog(fetcher: Fetcher, seconds: float):
    """End the process past the overall deadline, whatever it is doing."""
    def fire():
        fetcher.result['error'] = f'overall deadline of {seconds:g} s passed'
        os._exit(fetcher.finish(3))
    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def main(argv) -> int:
    args = parse_args(argv[1:])
    fetcher = Fetcher(args)
    watchdog(fetcher, args.timeout)
    return asyncio.run(fetcher.run())


if __name__ == '__main__':
    sys.exit(main(sys.argv))
