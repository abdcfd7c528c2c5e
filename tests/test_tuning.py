"""The app's process is tuned once: Arrow on the C heap, few heap arenas, BLAS on the calling thread, the imports
left out of the cycle collections."""

from __future__ import annotations

import platform

import pyarrow
import pytest
from threadpoolctl import threadpool_info

from medhelm_core.tuning import fewer_heap_arenas, tune_process


def test_the_tuned_process_allocates_arrow_from_the_c_heap_and_runs_blas_on_one_thread():
    tune_process()
    assert pyarrow.default_memory_pool().backend_name == "system"
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_heap_arenas_are_limited_where_the_c_library_is_glibc():
    assert fewer_heap_arenas() is True


def test_the_imported_modules_objects_are_kept_out_of_the_cycle_collectors_way():
    import gc

    tune_process()
    assert gc.get_freeze_count() > 10_000  # every module imported so far: pandas, numpy, the engine
    # what is made later is collected as usual
    cycle: list = []
    cycle.append(cycle)
    assert gc.is_tracked(cycle)
    del cycle
    assert gc.collect() >= 1
