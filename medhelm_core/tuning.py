"""How a long-lived process of the app computes: where Arrow allocates, and how many threads BLAS uses.

The app's process keeps every open study's scores and figures and recomputes them in background threads while
it serves clinicians' page runs (:mod:`medhelm_core.figures.cache`). Two library defaults that suit a one-off
script cost it memory and time there; :func:`tune_process` changes both, once per process.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def tune_process() -> None:
    """Arrow allocates from the C library's heap, and BLAS runs on the calling thread (see the two below)."""
    use_system_allocator()
    single_threaded_blas()


def use_system_allocator() -> None:
    """Have Arrow (pandas' string columns) allocate from the C library's heap, which
    :func:`~medhelm_core.figures.refresh.release_free_memory` can trim, instead of its own mimalloc pool, which keeps
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
