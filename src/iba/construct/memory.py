"""Hand freed heap pages back to the OS between the build's phases."""

from __future__ import annotations

import contextlib
import gc


def release_free_memory() -> None:
    """Collect garbage and return freed heap pages to the OS (glibc keeps them otherwise), so the
    phase that follows does not stack on the last one's high-water mark, and a worker forked next
    does not inherit them. A no-op where there is no glibc."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
