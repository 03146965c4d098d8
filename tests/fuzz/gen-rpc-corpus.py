#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# gen-rpc-corpus.py -- (re)write tests/fuzz/corpus/rpc-frame/: ring messages
# of the rpc (objects/rpc_frame.h), well-formed and broken. Run by hand.
import os
import struct
import sys

d = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'rpc-frame')
os.makedirs(d, exist_ok=True)


def frame(kind, payload, hid=0x1234, slot=3, ret_cap=16, tag=77, rsv=0):
    h = struct.pack('<IB3sIIIIQ', len(payload), kind, bytes(3), hid, slot, ret_cap, rsv, tag)
    b = h + payload
    return b + bytes((-len(b)) % 8)


def pull(off, ln):
    return struct.pack('<QQ', off, ln)


def tree(origin, subs, args):
    return struct.pack('<II', origin, len(subs)) + b''.join(struct.pack('<I', n) for n in subs) + args


def vec(args):
    # args: (len, addr, rkey, how, copied bytes or b'')
    t = struct.pack('<II', len(args), 0)
    t += b''.join(struct.pack('<QQII', ln, ad, rk, how) for ln, ad, rk, how, _ in args)
    return t + b''.join(c for _, _, _, _, c in args)


seeds = {
    'vec': frame(6, vec([(3, 0, 0, 0, b'abc'), (4096, 0x7f0000002000, 7, 1, b''), (2, 0, 0, 0, b'xy')])),
    'vec-one-read': frame(6, vec([(1 << 20, 0x7f0000000000, 9, 1, b'')])),
    'vec-too-many': frame(6, vec([(1, 0, 0, 0, b'a')] * 9)),
    'vec-zero-args': frame(6, vec([])),
    'vec-empty-arg': frame(6, vec([(0, 0, 0, 0, b'')])),
    'vec-copied-short': frame(6, vec([(8, 0, 0, 0, b'abc')])),
    'vec-copied-long': frame(6, vec([(2, 0, 0, 0, b'abcd')])),
    'vec-total-over': frame(6, vec([(1 << 20, 0x1000, 1, 1, b''), (1, 0, 0, 0, b'z')])),
    'vec-bad-how': frame(6, vec([(8, 0x1000, 1, 2, b'')])),
    'vec-copy-addr': frame(6, vec([(1, 0x1000, 0, 0, b'q')])),
    'vec-wrap': frame(6, vec([(16, 2**64 - 8, 1, 1, b'')])),
    'vec-bad-slot': frame(6, vec([(1, 0, 0, 0, b'q')]), slot=64),
    'dest': frame(5, struct.pack('<QQII', 0x7f0000001000, 64, 0x1234, 0)),
    'dest-zero': frame(5, struct.pack('<QQII', 0x1000, 0, 1, 0)),
    'dest-wrap': frame(5, struct.pack('<QQII', 2**64 - 8, 16, 1, 0)),
    'dest-rsv': frame(5, struct.pack('<QQII', 0x1000, 8, 1, 1)),
    'dest-bad-slot': frame(5, struct.pack('<QQII', 0x1000, 8, 1, 0), slot=64),
    'treev': frame(7, tree(3, [5, 6, 7], vec([(65536, 0x7f0000004000, 11, 1, b'')]))),
    'treev-leaf': frame(7, tree(3, [], vec([(4096, 0x7f0000004000, 11, 1, b'')]))),
    'treev-no-vec': frame(7, tree(3, [5], b'')),
    'treev-vec-short': frame(7, tree(3, [5], vec([(8, 0x1000, 1, 1, b'')])[:-4])),
    'treev-bad-slot': frame(7, tree(3, [], vec([(8, 0x1000, 1, 1, b'')])), slot=64),
    'treev-count-too-big': frame(7, struct.pack('<II', 3, 50) + vec([(8, 0x1000, 1, 1, b'')])),
    'tree': frame(4, tree(3, [5, 6, 7], b'args')),
    'tree-empty': frame(4, tree(3, [], b'')),
    'tree-count-too-big': frame(4, struct.pack('<II', 3, 5) + struct.pack('<I', 9)),
    'tree-count-huge': frame(4, struct.pack('<II', 3, 0xffffffff)),
    'tree-short': frame(4, b'\x01\x00\x00'),
    'call': frame(1, b'hello'),
    'ret': frame(2, struct.pack('<QQ', 5, 16)),
    'pull': frame(3, pull(0, 4096)),
    'batch': frame(1, b'a') + frame(2, b'bb' * 9) + frame(3, pull(64, (1 << 20) - 64)) + frame(1, b''),
    'cut-padding': frame(1, b'xyz')[:32 + 3],
    'empty': b'',
    'short-header': frame(1, b'')[:20],
    'plen-too-long': frame(1, b'abc')[:-8] + b'',
    'bad-kind': frame(9, b''),
    'bad-slot': frame(2, b'', slot=64),
    'pull-out-of-range': frame(3, pull((1 << 20) - 8, 16)),
    'pull-zero': frame(3, pull(0, 0)),
    'pull-wrap': frame(3, pull(2**64 - 8, 16)),
    'pull-bad-plen': frame(3, pull(0, 8) + b'12345678'),
    'rsv-set': frame(1, b'', rsv=1),
    'tail-garbage': frame(1, b'ok') + b'\x01\x02\x03',
}
for name, b in seeds.items():
    with open(os.path.join(d, name), 'wb') as f:
        f.write(b)
print('wrote %d seeds into %s' % (len(seeds), d), file=sys.stderr)
