"""The C heap of a broker process: keep what a request freed for the next one.

A produce frame is a buffer of up to a megabyte or more, grown while it arrives and
dropped once the records are on disk; a TLS fetch reads its slices in chunks of 256 KiB.
glibc hands freed memory at the top of its heap back to the kernel as soon as more than
its trim threshold (twice the largest block it recently freed: about 2 MiB here) lies
free, so every such request took fresh pages from the kernel and faulted each one in:
570 page faults per MB produced, and on a VM whose first touch of a page is dear (see
docs/performance.md) more than half the broker's CPU for a produce. A trim threshold of
16 MiB keeps a few requests' worth of heap for reuse; blocks of 4 MiB and more still get
their own mapping, returned to the kernel when freed, so one huge request is not kept.

Set through `mallopt` once at start-up. A user who set glibc's own variables
(MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_) keeps them; another C library (musl)
has no such thresholds and is left alone.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

TRIM_THRESHOLD = 16 << 20  # free heap top kept for reuse
MMAP_THRESHOLD = 4 << 20  # blocks from this size up are mapped apart and unmapped when freed
_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_USER_SET = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")


def keep_freed_memory() -> bool:
    """Raise glibc's trim threshold (and fix its mmap threshold); False when the C library
    is not glibc, or the user tuned it through the environment."""
    if any(name in os.environ for name in _USER_SET):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; musl's stub returns 0 for everything
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
    log.debug("malloc trim threshold %d, mmap threshold %d: %s",
              TRIM_THRESHOLD, MMAP_THRESHOLD, "set" if done else "not available")
    return done
