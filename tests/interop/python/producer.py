#!/usr/bin/env python3
"""A python-ndn producer for Granary's forwarder tests (CONTRACT.md, section 4).

Usage: producer.py SOCKET PREFIX [--size N] [--freshness MS] [--api appv2|app]

Connects to the forwarder over the Unix stream socket SOCKET, registers PREFIX with
python-ndn's own prefix registration (an NFD rib/register control command), then
answers every Interest under PREFIX with a Data packet:

  Name             exactly the Interest name
  Content          N bytes (default 100): sha256(Name.to_str(name) as UTF-8) repeated
                   and cut to N bytes
  FreshnessPeriod  MS (default 1000)
  Signature        DigestSha256 (python-ndn's DigestSha256Signer)

stdout: `ready` once the forwarder accepted the registration (ControlResponse 200),
then `served <uri>` for each Data sent (uri = Name.to_str of the name).  Both lines
are flushed at once.

--api picks the python-ndn application API, as a real application would:
  appv2 (default)  ndn.appv2.NDNApp: rib/register is a signed Interest v0.3
                   (/localhost/nfd/rib/register/<ControlParameters>/<ParamsDigest>,
                   empty ApplicationParameters, InterestSignatureInfo with
                   DigestSha256, SignatureNonce and SignatureTime); Data replies carry
                   the Interest's PIT token (LpPacket) when the forwarder sent one.
  app              the older ndn.app.NDNApp: rib/register is the legacy signed command
                   (/localhost/nfd/rib/register/<ControlParameters>/<timestamp>/<nonce>
                   /<SignatureInfo>/<SignatureValue>, DigestSha256); Data replies are
                   bare (this API ignores PIT tokens).

Exits 0 on SIGTERM/SIGINT or when the forwarder closes the connection; exits 1 with a
message on stderr if the connection or the registration fails; 2 on a usage error.
"""
import argparse
import asyncio
import signal
import sys
from hashlib import sha256

from ndn.encoding import Name
from ndn.security import DigestSha256Signer
from ndn.transport.stream_face import UnixFace


def make_content(uri: str, size: int) -> bytes:
    """sha256 of the URI's UTF-8 bytes, repeated and cut to `size` bytes."""
    digest = sha256(uri.encode('utf-8')).digest()
    return (digest * (size // len(digest) + 1))[:size]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog='producer.py', description=__doc__.split('\n\n')[0])
    ap.add_argument('socket', help='path of the forwarder Unix stream socket')
    ap.add_argument('prefix', help='name prefix to register and serve')
    ap.add_argument('--size', type=int, default=100, help='Content size in bytes (default 100)')
    ap.add_argument('--freshness', type=int, default=1000,
                    help='FreshnessPeriod in ms (default 1000)')
    ap.add_argument('--api', choices=['appv2', 'app'], default='appv2',
                    help='python-ndn application API (default appv2)')
    args = ap.parse_args(argv)
    if args.size < 0 or args.freshness < 0:
        ap.error('--size and --freshness must be non-negative')
    try:
        args.prefix_name = Name.from_str(args.prefix)
    except Exception as e:  # a bad URI is a usage error
        ap.error(f'bad PREFIX {args.prefix!r}: {e}')
    return args


def say(line: str):
    print(line, flush=True)


class Producer:
    def __init__(self, args):
        self.args = args
        self.failed = None   # error text when the registration failed

    def content_for(self, name) -> bytes:
        return make_content(Name.to_str(name), self.args.size)

    async def register(self, registration):
        """Await python-ndn's registration coroutine; print `ready` or stop the app."""
        uri = Name.to_str(self.args.prefix_name)
        try:
            ok = await registration
        except Exception as e:  # noqa: BLE001 - see below
            # python-ndn 0.5.2's parse_response() raises AttributeError on a
            # ControlResponse without a ControlParameters body (how NFD answers an
            # error), instead of returning the status code.
            ok = False
            self.failed = (f'registration of {uri} failed: python-ndn raised '
                           f'{type(e).__name__}: {e}')
        if ok:
            say('ready')
        else:
            self.failed = self.failed or f'registration of {uri} failed (see python-ndn log above)'
            self.app.shutdown()

    # -- ndn.appv2 ------------------------------------------------------------

    def make_appv2(self, face):
        from ndn.appv2 import NDNApp, pass_all
        self.app = app = NDNApp(face=face)

        def on_interest(name, _app_param, reply, _context):
            data = app.make_data(name, self.content_for(name), DigestSha256Signer(),
                                 freshness_period=self.args.freshness)
            if reply(data) is not False:   # False: the Interest's lifetime had passed
                say(f'served {Name.to_str(name)}')

        # pass_all: also answer Interests that carry ApplicationParameters or a signature
        # (python-ndn still drops those whose ParametersSha256DigestComponent is wrong).
        app.attach_handler(self.args.prefix_name, on_interest, validator=pass_all)

        async def after_start():
            await self.register(app.register(self.args.prefix_name))
        return after_start

    # -- ndn.app (legacy API) -------------------------------------------------

    def make_app(self, face):
        from ndn.app import NDNApp
        from ndn.security import KeychainDigest
        self.app = app = NDNApp(face=face, keychain=KeychainDigest())

        async def accept_all(_name, _sig):
            return True
        app.int_validator = accept_all

        def on_interest(name, _param, _app_param):
            app.put_data(name, self.content_for(name), signer=DigestSha256Signer(),
                         freshness_period=self.args.freshness)
            say(f'served {Name.to_str(name)}')

        async def after_start():
            await self.register(app.register(self.args.prefix_name, on_interest))
        return after_start

    async def run(self) -> int:
        face = UnixFace(self.args.socket)
        after_start = (self.make_appv2 if self.args.api == 'appv2' else self.make_app)(face)
        loop = asyncio.get_running_loop()
        main_task = asyncio.current_task()
        stopping = False

        def stop():
            nonlocal stopping
            stopping = True
            main_task.cancel()   # NDNApp.main_loop treats this as Ctrl+C: closes the face
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        try:
            await self.app.main_loop(after_start())
        except asyncio.CancelledError:
            pass   # cancelled while connecting
        except OSError as e:
            print(f'producer.py: cannot connect to {self.args.socket}: {e}', file=sys.stderr)
            return 1
        if stopping:
            return 0
        if self.failed:
            print(f'producer.py: {self.failed}', file=sys.stderr)
            return 1
        print('producer.py: the forwarder closed the connection', file=sys.stderr)
        return 0


def main(argv) -> int:
    args = parse_args(argv[1:])
    return asyncio.run(Producer(args).run())


if __name__ == '__main__':
    sys.exit(main(sys.argv))
