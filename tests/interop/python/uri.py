#!/usr/bin/env python3
"""Parse NDN URIs with python-ndn and print them back (CONTRACT.md, section 3).

Usage: uri.py IN.txt OUT.jsonl

IN.txt holds one URI per line.  Each line gives one output line: the Name TLV
python-ndn encodes for it and python-ndn's re-printed URI, or the error text.
"""
import json
import sys

from ndn.encoding import Name


def convert(line: str) -> dict:
    try:
        name = Name.from_str(line)
        wire = Name.to_bytes(name)
        uri = Name.to_str(Name.from_bytes(wire))
    except Exception as e:  # a bad URI is reported on its own line
        return {'input': line, 'ok': False, 'hex': None, 'uri': None,
                'error': f'{type(e).__name__}: {e}'}
    return {'input': line, 'ok': True, 'hex': wire.hex(), 'uri': uri, 'error': None}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print('usage: uri.py IN.txt OUT.jsonl', file=sys.stderr)
        return 2
    with open(argv[1], encoding='utf-8', newline='') as src:
        lines = src.read().split('\n')
    if lines and lines[-1] == '':
        lines.pop()   # the newline that ends the last line does not start another
    with open(argv[2], 'w', encoding='utf-8') as dst:
        for line in lines:
            dst.write(json.dumps(convert(line.removesuffix('\r')), ensure_ascii=False) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
