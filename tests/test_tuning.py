"""The app's process is tuned once: Arrow on the C heap, few heap arenas, BLAS on the calling thread."""

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
