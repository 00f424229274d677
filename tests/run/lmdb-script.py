#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lmdb-script.py: an unmodified py-lmdb program for the `pmguard run` tests.

  lmdb-script.py write DIR TXNS PER [--grow]
                                       TXNS transactions of PER records
                                       (--grow: the map grows to 2 GiB
                                       half-way)
  lmdb-script.py verify DIR N          exactly N records, each intact
                                       (N "any": as many as there are)
The environment is opened with writemap=True.  Records as tests/run/
lmdb-prog.c writes them (key k%08u, value v%08u x 4), so either program
verifies the other's.  Exit 0 fine, 1 wrong data, 2 usage or LMDB error.
"""
import sys

import lmdb


def kv(i):
    i %= 100000000
    return (b"k%08u" % i, (b"v%08u" % i) * 4)


def main(argv):
    if len(argv) < 4:
        return 2
    env = lmdb.open(argv[2], map_size=1 << 30, writemap=True)
    if argv[1] == "write" and len(argv) in (5, 6):
        txns, per = int(argv[3]), int(argv[4])
        for t in range(txns):
            if len(argv) == 6 and argv[5] == "--grow" and t == txns // 2:
                env.set_mapsize(2 << 30)    # LMDB remaps
            with env.begin(write=True) as txn:
                for i in range(t * per, (t + 1) * per):
                    k, v = kv(i)
                    txn.put(k, v)
        print("lmdb-script: wrote %d records" % (txns * per))
        return 0
    if argv[1] != "verify":
        return 2
    with env.begin() as txn:
        n = txn.stat()["entries"] if argv[3] == "any" else int(argv[3])
        for i in range(n):
            k, v = kv(i)
            if txn.get(k) != v:
                print("lmdb-script: record %d missing or corrupted" % i)
                return 1
        entries = txn.stat()["entries"]
        if entries != n:
            print("lmdb-script: %d entries, expected %d" % (entries, n))
            return 1
    print("lmdb-script: %d records intact" % n)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except lmdb.Error as e:
        print("lmdb-script: %s" % e)
        sys.exit(2)
