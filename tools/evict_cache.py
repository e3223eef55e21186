#!/usr/bin/env python3
"""Drops the page cache of the given files (folders: every file under them) with
posix_fadvise(POSIX_FADV_DONTNEED) after an fsync, so that the next read comes from storage.
Needs no privileges (unlike /proc/sys/vm/drop_caches) and touches only these files' pages.
Prints how many bytes it evicted.  Used by tools/checkpoint_bench.sh (docs/checkpoint.md)."""
import os
import sys


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages are not dropped: write them first
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def main(args):
    total = 0
    for a in args:
        if os.path.isdir(a):
            for root, _, files in os.walk(a):
                total += sum(evict(os.path.join(root, f)) for f in files)
        else:
            total += evict(a)
    print(f"evicted {total} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
