"""The app's process is tuned once: Arrow on the C heap, few heap arenas, large blocks mapped on their own, BLAS on
the calling thread; the server's start leaves the imports out of the cycle collections."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pyarrow
import pytest
from threadpoolctl import threadpool_info

from medhelm_core.tuning import fewer_heap_arenas, tune_process

REPO = Path(__file__).resolve().parents[1]


def test_the_tuned_process_allocates_arrow_from_the_c_heap_and_runs_blas_on_one_thread():
    tune_process()
    assert pyarrow.default_memory_pool().backend_name == "system"
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_heap_arenas_are_limited_where_the_c_library_is_glibc():
    assert fewer_heap_arenas() is True


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_large_blocks_stay_mapped_on_their_own_after_a_larger_one_was_freed():
    """glibc's moving threshold would have put the 5 MiB block on the heap after an 8 MiB one was freed."""
    script = """
import ctypes
import numpy as np
from medhelm_core.tuning import tune_process

class MallInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t)
                for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo
tune_process()
freed = np.ones(1 << 20)  # 8 MiB, mapped
del freed
before = libc.mallinfo2().hblkhd
kept = np.ones(5 << 17)  # 5 MiB
print(libc.mallinfo2().hblkhd - before >= 5 << 20)
"""
    assert _run(script) == "True"


def test_the_servers_start_freezes_the_pages_imports_before_anyone_is_served():
    """serve.py's lifespan imports what the pages import and freezes it, before the job worker and the first
    session (in a subprocess: a freeze lasts as long as the process). Those imports leave out scipy.stats (39 MB;
    agreement.special has what the engine needs) and alembic (12 MB; the server only checks the schema)."""
    script = """
import asyncio, contextlib, gc, sys
import serve

@contextlib.asynccontextmanager
async def no_worker(app):
    yield

serve.app_worker_lifespan = no_worker

async def main():
    before = gc.get_freeze_count()
    async with serve._lifespan(None):
        print(before, gc.get_freeze_count(), all(name in sys.modules for name in serve.PAGE_IMPORTS),
              "scipy.stats" in sys.modules, "alembic" in sys.modules)

asyncio.run(main())
"""
    before, after, imported, stats, alembic = _run(script).split()
    assert int(before) == 0 and int(after) > 100_000 and imported == "True"
    assert stats == "False" and alembic == "False"


def test_a_page_run_that_tunes_the_process_leaves_nothing_behind_it():
    """The first Agreement page run imports medhelm_core.figures.cache, which tunes the process. When that froze the
    objects alive at the time, the run's own namespace was frozen with them, and what the run assigned to it
    afterwards (the first visit's scores and figures) stayed for the life of the process."""
    script = """
import gc, weakref

class Figures:
    pass

page = compile(
    "from medhelm_core.tuning import tune_process\\n"
    "tune_process()\\n"
    "def draw():\\n"
    "    return figures\\n"
    "figures = Figures()\\n",
    "page.py", "exec")
namespace = {"Figures": Figures, "__name__": "__main__"}
exec(page, namespace)
drawn = weakref.ref(namespace["figures"])
del namespace
gc.collect()
print(drawn() is None)
"""
    assert _run(script) == "True"


def test_what_is_made_after_a_freeze_is_collected_as_usual():
    script = """
import gc
from medhelm_core.tuning import keep_imports_out_of_collections
keep_imports_out_of_collections(["pandas"])
cycle = []
cycle.append(cycle)
del cycle
print(gc.get_freeze_count() > 10_000, gc.collect() >= 1)
"""
    assert _run(script) == "True True"


def _run(script: str) -> str:
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
