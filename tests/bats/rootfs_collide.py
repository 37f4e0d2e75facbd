#!/usr/bin/env python3
"""Make directory B's old --rootfs cache key equal directory A's.

The old key (layerstore/rootfs.c before content keys) was the first 64
bits of the XOR of SHA-256("PATH\\nMODE SIZE SEC.NSEC\\nTARGET") over every
entry: metadata only, and linear. B gets 100 empty files pad/fN whose
mtimes are each one of two values; each choice flips the key by a known
64-bit vector, so solving one linear system over GF(2) picks the mtimes
that turn B's key into A's.

    rootfs_collide.py A B      prints the key both now have
"""
import hashlib
import os
import stat
import sys

T0, T1 = 1000000000, 1000000001
PADS = 100


def line_hash(path, st, mtime_ns=None):
    ns = st.st_mtime_ns if mtime_ns is None else mtime_ns
    target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
    line = "%s\n%o %d %d.%09d\n%s" % (path, st.st_mode, st.st_size, ns // 10**9, ns % 10**9,
                                      target)
    return int.from_bytes(hashlib.sha256(line.encode()).digest(), "big")


def old_key(root):
    acc = 0
    stack = [root]
    while stack:
        p = stack.pop()
        st = os.lstat(p)
        acc ^= line_hash(p, st)
        if stat.S_ISDIR(st.st_mode):
            stack.extend(os.path.join(p, n) for n in os.listdir(p))
    return acc >> 192  # the first 64 bits: 16 hex digits


def main():
    a, b = sys.argv[1], sys.argv[2]
    pad = os.path.join(b, "pad")
    os.mkdir(pad)
    files = [os.path.join(pad, "f%d" % i) for i in range(PADS)]
    for f in files:
        open(f, "w").close()
        os.utime(f, ns=(T0 * 10**9, T0 * 10**9))
    # Directories last: creating the files changed their mtimes.
    for d in (pad, b):
        os.utime(d, ns=(T0 * 10**9, T0 * 10**9))
    want = old_key(a) ^ old_key(b)
    # Row i: the change of the key when pad file i moves from T0 to T1.
    rows = []
    for i, f in enumerate(files):
        st = os.lstat(f)
        d = (line_hash(f, st, T0 * 10**9) ^ line_hash(f, st, T1 * 10**9)) >> 192
        rows.append((d, 1 << i))
    # Gaussian elimination: a basis with the subset that makes each vector.
    basis = {}
    for d, m in rows:
        for bit in range(63, -1, -1):
            if not d >> bit & 1:
                continue
            if bit in basis:
                d ^= basis[bit][0]
                m ^= basis[bit][1]
            else:
                basis[bit] = (d, m)
                break
    chosen = 0
    for bit in range(63, -1, -1):
        if want >> bit & 1:
            if bit not in basis:
                sys.exit("no solution: add pad files")
            want ^= basis[bit][0]
            chosen ^= basis[bit][1]
    for i, f in enumerate(files):
        if chosen >> i & 1:
            os.utime(f, ns=(T1 * 10**9, T1 * 10**9))
    ka, kb = old_key(a), old_key(b)
    if ka != kb:
        sys.exit("keys differ: %016x %016x" % (ka, kb))
    print("%016x" % ka)


main()
