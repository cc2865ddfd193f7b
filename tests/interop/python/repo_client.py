#!/usr/bin/env python3
"""ndn-python-repo's own client classes as a CLI, for Granary's repo tests.

Usage:
  repo_client.py SOCKET put    REPO_NAME FILE NAME [--client-prefix P] [--segment-size N]
                 [--freshness MS] [--cpu N] [--forwarding-hint H] [--register-prefix R]
                 [--check-prefix C] [--keychain digest|default] [--timeout S] [-v]
  repo_client.py SOCKET get    REPO_NAME NAME OUT [--overwrite] [--timeout S] [-v]
  repo_client.py SOCKET delete REPO_NAME NAME [--client-prefix P] [--start N] [--end N]
                 [--register-prefix R] [--check-prefix C] [--keychain digest|default]
                 [--timeout S] [-v]

SOCKET is the forwarder's Unix stream socket (python-ndn UnixFace, as producer.py);
REPO_NAME and NAME are NDN URIs (/testrepo, /data/file1); FILE and OUT are local paths.

Environment: a venv with exactly these pins (ndn-python-repo 0.3 is the newest release
on PyPI and installs beside python-ndn 0.5.2 without changing it):

    python3 -m venv /tmp/repo-venv
    /tmp/repo-venv/bin/pip install python-ndn==0.5.2 ndn-python-repo==0.3
    /tmp/repo-venv/bin/python tests/interop/python/repo_client.py SOCK put /testrepo f /f

(`tests/interop/.venv/bin/pip install ndn-python-repo==0.3` into the interop venv works
too: pip keeps python-ndn 0.5.2, ndn-python-repo only adds PyYAML.)

What runs: the unmodified classes of ndn_python_repo.clients on an ndn.app.NDNApp (the
legacy python-ndn API those classes need), connected to SOCKET:
  put     PutfileClient(app, CLIENT_PREFIX, REPO_NAME).insert_file(FILE, NAME, ...)
  get     GetfileClient(app, REPO_NAME).fetch_file(NAME, OUT)
  delete  DeleteClient(app, CLIENT_PREFIX, REPO_NAME).delete_file(NAME, ...)
The protocol they speak is described in docs/repo-protocol.md.

Only three things are added around them, none of which changes a packet's layout:
  * --keychain digest (default): the app signs with python-ndn's KeychainDigest
    (DigestSha256), and PutfileClient's segment-encoding worker processes get the same
    (its module global `app_to_create_packet` is set before the worker pool forks; the
    stock code calls NDNApp() there, which needs a ~/.ndn keychain and fails without
    one).  --keychain default uses the user's python-ndn keychain (client.conf/~/.ndn)
    exactly as the stock clients would, and then needs one to exist.
  * observation: the results of app.register, PubSub.publish and CommandChecker._check
    (and, for get, the Data yielded by concurrent_fetcher) are recorded on their way
    through, so the JSON line can report status codes and counts.
  * --timeout S (default 300): the whole operation is abandoned after S seconds (the
    stock clients poll for ever while the repo answers 300, DeleteClient also while the
    check Interests time out).

stdout: exactly one JSON line, also on failure, e.g.
  {"op": "put", "ok": true, "repo": "/testrepo", "name": "/f", "file": "f", "bytes": 20000,
   "segment_size": 8000, "segments": 3, "insert_num": 3, "status_code": 200,
   "process_id": "1a2b3c4d", "notify_acked": true, "checks": 2,
   "registrations": {"/f": true, "/repo_client/5f3e": true}, "elapsed_ms": 1234.5,
   "error": null}
  get:    "bytes", "sha256", "segments", "final_block_id", "out" (and "note" when the
          object is empty: GetfileClient writes no file for 0 bytes, so this script
          creates the empty OUT itself)
  delete: "delete_num", "status_code", "process_id", "notify_acked", "checks"
"ok" is true when: put: the repo answered 200 and insert_num == segments; get: OUT was
written and its segments run 0..FinalBlockId without a gap; delete: the repo answered 200
(delete_num may be 0 when nothing was stored under NAME).

Exit status: 0 ok; 1 failure (message on stderr as well as in "error"); 2 usage error.
-v prints the library's INFO logs on stderr.
"""
import argparse
import asyncio
import hashlib
import json
import logging
import multiprocessing
import os
import sys
import time

from ndn.app import NDNApp
from ndn.encoding import Component, Name
from ndn.security import KeychainDigest
from ndn.transport.stream_face import UnixFace

try:
    import ndn_python_repo.clients.getfile as getfile_mod
    import ndn_python_repo.clients.putfile as putfile_mod
    from ndn_python_repo.clients import (CommandChecker, DeleteClient, GetfileClient,
                                         PutfileClient)
except ImportError as e:  # wrong venv
    print(f'repo_client.py: cannot import ndn_python_repo ({e}); install '
          f'python-ndn==0.5.2 ndn-python-repo==0.3 (see the top of this file)', file=sys.stderr)
    sys.exit(2)


class Failure(Exception):
    pass


def parse_name(ap, what, uri):
    try:
        return Name.from_str(uri)
    except Exception as e:  # a bad URI is a usage error
        ap.error(f'bad {what} {uri!r}: {e}')


def parse_args(argv):
    ap = argparse.ArgumentParser(prog='repo_client.py',
                                 description=__doc__.split('\n\n')[0])
    ap.add_argument('socket', help='path of the forwarder Unix stream socket')
    sub = ap.add_subparsers(dest='op', required=True)

    def common(p, with_prefix):
        p.add_argument('--timeout', type=float, default=300.0,
                       help='give up after this many seconds (default 300)')
        p.add_argument('-v', '--verbose', action='store_true', help='library INFO logs on stderr')
        if with_prefix:
            p.add_argument('--client-prefix', default=None,
                           help='the client\'s own prefix (PubSub publisher; default '
                                '/repo_client/<random 8 hex>)')
            p.add_argument('--register-prefix', default=None,
                           help='RegisterPrefix in the command (default: absent/empty)')
            p.add_argument('--check-prefix', default=None,
                           help='CheckPrefix in the command (default: the client prefix)')
            p.add_argument('--keychain', choices=['digest', 'default'], default='digest',
                           help='digest: DigestSha256 everywhere (default); default: the '
                                'user\'s python-ndn keychain')

    p = sub.add_parser('put', help='insert FILE into the repo under NAME')
    p.add_argument('repo_name')
    p.add_argument('file')
    p.add_argument('name')
    p.add_argument('--segment-size', type=int, default=8000,
                   help='Content bytes per segment (default 8000, as ndn-python-repo\'s '
                        'putfile example)')
    p.add_argument('--freshness', type=int, default=0,
                   help='FreshnessPeriod of the segments in ms (default 0)')
    p.add_argument('--cpu', type=int, default=os.cpu_count() or 1,
                   help='worker processes that encode segments (default: all cores)')
    p.add_argument('--forwarding-hint', default=None,
                   help='ForwardingHint in the command (default: absent/empty)')
    common(p, True)

    p = sub.add_parser('get', help='fetch NAME from the repo into OUT')
    p.add_argument('repo_name')
    p.add_argument('name')
    p.add_argument('out')
    p.add_argument('--overwrite', action='store_true',
                   help='replace OUT if it exists (it is removed before fetching)')
    common(p, False)

    p = sub.add_parser('delete', help='delete NAME from the repo')
    p.add_argument('repo_name')
    p.add_argument('name')
    p.add_argument('--start', type=int, default=None, help='StartBlockId (default: absent)')
    p.add_argument('--end', type=int, default=None, help='EndBlockId (default: absent)')
    common(p, True)

    args = ap.parse_args(argv)
    args.repo = parse_name(ap, 'REPO_NAME', args.repo_name)
    args.obj = parse_name(ap, 'NAME', args.name)
    if args.timeout <= 0:
        ap.error('--timeout must be positive')
    if args.op == 'put':
        if args.segment_size < 1 or args.freshness < 0 or args.cpu < 1:
            ap.error('--segment-size and --cpu must be >= 1, --freshness >= 0')
        args.fwd_hint = (parse_name(ap, '--forwarding-hint', args.forwarding_hint)
                         if args.forwarding_hint else None)
    if args.op == 'delete' and any(v is not None and v < 0 for v in (args.start, args.end)):
        ap.error('--start and --end must be >= 0')
    if args.op in ('put', 'delete'):
        if args.client_prefix is None:
            args.client_prefix = f'/repo_client/{os.urandom(4).hex()}'
        args.client = parse_name(ap, '--client-prefix', args.client_prefix)
        args.reg = (parse_name(ap, '--register-prefix', args.register_prefix)
                    if args.register_prefix else None)
        args.check = (parse_name(ap, '--check-prefix', args.check_prefix)
                      if args.check_prefix else None)
    return args


class Observer:
    """Records what passes through the client classes without changing it."""

    def __init__(self, app, result):
        self.result = result
        self.result['registrations'] = {}
        orig_register = app.register

        async def register(name, *a, **kw):
            ok = await orig_register(name, *a, **kw)
            self.result['registrations'][Name.to_str(name)] = bool(ok)
            return ok
        app.register = register

        orig_check = CommandChecker._check

        async def check(checker, method, repo_name, process_id):
            response = await orig_check(checker, method, repo_name, process_id)
            self.result['checks'] = self.result.get('checks', 0) + 1
            self.result['process_id'] = bytes(process_id).hex()
            if response is not None:
                self.result['status_code'] = response.status_code
            return response
        CommandChecker._check = check

    def watch_pubsub(self, pb):
        orig_publish = pb.publish

        async def publish(topic, msg):
            ok = await orig_publish(topic, msg)
            self.result['notify_acked'] = bool(ok)
            return ok
        pb.publish = publish

    def watch_fetcher(self):
        orig = getfile_mod.concurrent_fetcher

        async def fetcher(*a, **kw):
            async for item in orig(*a, **kw):
                _, meta_info, _, _ = item
                self.result['segments'] = self.result.get('segments', 0) + 1
                if meta_info is not None and meta_info.final_block_id is not None:
                    self.result['final_block_id'] = Component.to_number(meta_info.final_block_id)
                yield item
        getfile_mod.concurrent_fetcher = fetcher


def use_digest_for_segment_workers(socket_path):
    """PutfileClient encodes segments in a multiprocessing pool whose workers call NDNApp()
    (default keychain) unless the module global is already set; forked workers inherit it."""
    putfile_mod.app_to_create_packet = NDNApp(face=UnixFace(socket_path),
                                              keychain=KeychainDigest())
    if 'fork' in multiprocessing.get_all_start_methods():
        multiprocessing.set_start_method('fork', force=True)


async def do_put(app, args, result, obs):
    size = os.path.getsize(args.file)
    segments = (size + args.segment_size - 1) // args.segment_size
    result.update(file=args.file, bytes=size, segment_size=args.segment_size,
                  segments=segments, insert_num=None, status_code=None, process_id=None,
                  notify_acked=None, checks=0, client_prefix=Name.to_str(args.client))
    if size == 0:
        raise Failure('FILE is empty: PutfileClient.insert_file returns 0 for an empty file '
                      'without sending any command, so it cannot be stored this way')
    client = PutfileClient(app, args.client, args.repo)
    obs.watch_pubsub(client.pb)
    try:
        insert_num = await client.insert_file(
            args.file, args.obj, args.segment_size, args.freshness, args.cpu,
            forwarding_hint=args.fwd_hint, register_prefix=args.reg, check_prefix=args.check)
    except AssertionError as e:  # PutfileClient asserts on a status other than 200/300/404
        raise Failure(f'the repo answered the insert check with status '
                      f'{result.get("status_code")} ({e})') from e
    result['insert_num'] = insert_num
    if not result['notify_acked']:
        raise Failure('the repo did not acknowledge the insert notify Interest '
                      f'{Name.to_str(args.repo + ["insert", "notify"])} (3 tries: 4 s timeouts, or '
                      'Nacks with 1 s pauses)')
    if insert_num is None:
        raise Failure('no insert check got a status from the repo (5 tries: timeouts, Nacks '
                      f'or 404), last status {result.get("status_code")}')
    if result.get('status_code') != 200 or insert_num != segments:
        raise Failure(f'insert incomplete: status {result.get("status_code")}, insert_num '
                      f'{insert_num} of {segments} segments')


async def do_get(app, args, result, obs):
    result.update(out=args.out, bytes=None, sha256=None, segments=0, final_block_id=None)
    if os.path.lexists(args.out):
        if not args.overwrite:
            raise Failure(f'OUT {args.out} exists (use --overwrite)')
        os.remove(args.out)   # so that a failed fetch cannot leave the old file behind
    obs.watch_fetcher()
    client = GetfileClient(app, args.repo)
    await client.fetch_file(args.obj, local_filename=args.out, overwrite=True)
    if (not os.path.isfile(args.out) and result['segments'] > 0
            and result['final_block_id'] == result['segments'] - 1):
        # every segment came and all were empty: GetfileClient writes no file for 0 bytes
        open(args.out, 'wb').close()
        result['note'] = 'empty object: GetfileClient wrote no file, repo_client.py created OUT'
    if not os.path.isfile(args.out):
        raise Failure(f'nothing fetched: {Name.to_str(args.obj)}/seg=0 got no Data (3 tries: '
                      '1 s timeouts or Nacks); GetfileClient writes no file then')
    with open(args.out, 'rb') as f:
        data = f.read()
    result['bytes'] = len(data)
    result['sha256'] = hashlib.sha256(data).hexdigest()
    final = result['final_block_id']
    if final is None:
        raise Failure('no segment carried a FinalBlockId; GetfileClient stops only on a '
                      'failed segment then, so the file may be incomplete')
    if result['segments'] != final + 1:
        raise Failure(f'fetch stopped after {result["segments"]} segments but FinalBlockId is '
                      f'{final}: OUT is truncated')


async def do_delete(app, args, result, obs):
    result.update(delete_num=None, status_code=None, process_id=None, notify_acked=None,
                  checks=0, client_prefix=Name.to_str(args.client))
    client = DeleteClient(app, args.client, args.repo)
    obs.watch_pubsub(client.pb)
    try:
        delete_num = await client.delete_file(args.obj, start_block_id=args.start,
                                              end_block_id=args.end, register_prefix=args.reg,
                                              check_prefix=args.check)
    except AssertionError as e:
        raise Failure(f'the repo answered the delete check with status '
                      f'{result.get("status_code")}') from e
    result['delete_num'] = delete_num
    if not result['notify_acked']:
        raise Failure('the repo did not acknowledge the delete notify Interest '
                      f'{Name.to_str(args.repo + ["delete", "notify"])} (3 tries: 4 s timeouts, or '
                      'Nacks with 1 s pauses)')
    if delete_num is None or result.get('status_code') != 200:
        raise Failure('no delete check got status 200 (3 tries answered 404), last status '
                      f'{result.get("status_code")}')


def run(args):
    result = {'op': args.op, 'ok': False, 'repo': Name.to_str(args.repo),
              'name': Name.to_str(args.obj)}
    if args.op == 'put':
        if not os.path.isfile(args.file):
            result['error'] = f'FILE {args.file} does not exist or is not a regular file'
            return result
    keychain = KeychainDigest() if getattr(args, 'keychain', 'digest') == 'digest' else None
    try:
        app = NDNApp(face=UnixFace(args.socket), keychain=keychain)
    except Exception as e:  # default keychain missing or unreadable
        result['error'] = f'cannot create the python-ndn app: {type(e).__name__}: {e}'
        return result
    if args.op == 'put' and keychain is not None:
        use_digest_for_segment_workers(args.socket)
    obs = Observer(app, result)
    op = {'put': do_put, 'get': do_get, 'delete': do_delete}[args.op]
    started = time.monotonic()

    async def after_start():
        try:
            await asyncio.wait_for(op(app, args, result, obs), args.timeout)
            result['ok'] = True
        except asyncio.TimeoutError:
            result['error'] = f'timed out after {args.timeout:g} s'
        except Failure as e:
            result['error'] = str(e)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            result['error'] = f'{type(e).__name__}: {e}'
        finally:
            result['elapsed_ms'] = round((time.monotonic() - started) * 1000, 1)
            app.shutdown()

    async def main():
        try:
            await app.main_loop(after_start())
        except OSError as e:
            result['error'] = f'cannot connect to {args.socket}: {e}'
        if 'elapsed_ms' not in result and 'error' not in result:
            result['error'] = 'the forwarder closed the connection'
    asyncio.run(main())
    return result


def main(argv) -> int:
    args = parse_args(argv[1:])
    logging.basicConfig(format='[%(asctime)s] %(levelname)s: %(message)s',
                        level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr)
    result = run(args)
    result.setdefault('error', None)
    print(json.dumps(result), flush=True)
    if not result['ok']:
        print(f'repo_client.py: {args.op} failed: {result["error"]}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
