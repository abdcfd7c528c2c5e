"""How a long-lived process of the app computes: where Arrow allocates, how many heaps the C library keeps and
which blocks it maps on their own, how many threads BLAS uses, and what Python's cycle collector scans.

The app's process keeps every open study's scores and figures and recomputes them in background threads while
it serves clinicians' page runs (:mod:`medhelm_core.figures.cache`). Library defaults that suit a one-off script
cost it memory and time there; :func:`tune_process` changes them, once per process.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
from collections.abc import Iterable
from functools import lru_cache

#: glibc's ``mallopt`` parameters (malloc.h): the number of heap arenas, the size from which a block is mapped
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
#: heap arenas kept for the whole process: the page runs and one background update at a time on 2 cores
ARENAS = 2
#: blocks from this size on are mapped on their own and given back when freed (glibc's initial threshold is 128 KiB)
MMAP_THRESHOLD = 4 * 1024 * 1024


@lru_cache(maxsize=1)
def tune_process() -> None:
    """Arrow allocates from the C library's heap, in a few arenas that keep no large blocks, and BLAS runs on the
    calling thread (see below). Safe at any moment, also in the middle of a page run; the server's start also
    freezes its imports (:func:`keep_imports_out_of_collections`), which is not."""
    use_system_allocator()
    fewer_heap_arenas()
    fixed_mmap_threshold()
    single_threaded_blas()


def keep_imports_out_of_collections(modules: Iterable[str] = ()) -> None:
    """Import ``modules``, then move every object that exists now (the imported modules' functions, classes and
    tables: some 250,000 once the Agreement page's imports are in) out of the cycle collector's way.

    An update of a 20,000-item study allocates enough containers (rows read, records built) to set off a full
    collection or two, which walked all of them again: 0.135 s of full collections per update, measured in-process;
    0.015 s once they were frozen, and the update's median 2.0 s instead of 2.3 s (six interleaved runs each way:
    the collections also evict the computation's data from the CPU's caches). They live as long as the process
    does, so the collector could never free them; what later drops out of them is still freed by its reference
    count (``gc.freeze``; only cycles among them would stay).

    Call it once, when the server starts and before it serves anyone (``serve.py``). A frozen cycle is never
    collected: frozen in the middle of a page run, the run's own namespace (a cycle with the functions it defines)
    kept everything the run assigned to it afterwards for the life of the process. Measured when the Agreement
    page's first run froze: the first visit's scores and figures of a 20,000-item study (about 70 MB) stayed after
    every later rating, so the process held two versions of them.
    """
    for name in modules:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


def fewer_heap_arenas(arenas: int = ARENAS) -> bool:
    """Have glibc's malloc share ``arenas`` heaps between all threads, instead of up to 8 per core.

    Each background update runs in a thread of its own, and each new thread's allocations went to a heap of its
    own, whose free pages the process kept: measured on a 20,000-item study, the process grew by 25 MB with each
    new rating's update, and held 480 MB after three instead of 430 MB with two arenas. Threads that allocate at
    the same moment wait a little for a shared arena; on 2 cores they could not run at once anyway. False where
    the C library is not glibc (nothing is changed).
    """
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(_M_ARENA_MAX, arenas))


def fixed_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Have glibc map every block of ``threshold`` bytes or more on its own (and unmap it when freed), whatever was
    freed before.

    glibc's default threshold moves: each mapped block freed raises it to that block's size, up to 32 MiB, and the
    heap's trim threshold to twice that. An update of a 20,000-item study frees arrays and Arrow buffers of 1 to
    30 MB, so after the first few the updates' large temporaries were carved out of the heaps instead, and what they
    left stayed resident even after :func:`release_free_memory`: measured in the server (``streamlit run serve.py``,
    Chromium, a rating and the page's refresh at a time, then ``malloc_trim``), 360-400 MB after the first visit and
    430-480 MB after 4 to 6 ratings in six runs; with the threshold fixed at 4 MiB, 365-370 MB after 5 and 8
    ratings, flat. The update's time did not change (three interleaved pairs of six updates each, in-process:
    medians 1.60-1.80 s either way); fixed at 128 KiB or 1 MiB, many more of the update's arrays were mapped afresh
    (and their pages faulted in) and the update took 7% to 50% longer. False where the C library is not glibc.
    """
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold))


def release_free_memory() -> None:
    """Give the heap a computation freed back to the system (glibc's ``malloc_trim``; nothing elsewhere).

    A recompute of a 20,000-item study allocates and frees tens of MB of temporary frames in its own thread's
    heap arena; glibc keeps them, so the app's resident memory grew by the recompute's peak each time (by about
    35 MB per arena measured here) although the figures kept are small. A trim costs a few milliseconds. Called by
    :class:`~medhelm_core.figures.refresh.RefreshStore` after each computation.
    """
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has ``mallopt`` and ``malloc_trim``), else None."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def use_system_allocator() -> None:
    """Have Arrow (pandas' string columns) allocate from the C library's heap, which
    :func:`release_free_memory` can trim, instead of its own mimalloc pool, which keeps
    what it freed. Arrow memory already allocated is freed to the pool it came from."""
    import pyarrow

    pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def single_threaded_blas() -> None:
    """Run numpy's and scipy's BLAS (OpenBLAS) on the calling thread only.

    The agreement engine makes thousands of small matrix products per recompute. With OpenBLAS's own threads each
    waits for a core the server's other threads are using: on this project's 2-core machine, under load, a
    (1 x 20,000) by (20,000,) product took 8 ms instead of 0.005 ms, and a 20,000-item agreement table was about
    20% slower than with one thread. The app parallelises over sessions and background updates instead.
    """
    import numpy  # noqa: F401 - BLAS libraries are limited once loaded: numpy's and scipy's own
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
