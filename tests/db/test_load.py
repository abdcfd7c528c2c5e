"""Load: 50 simulated clinicians rate against PostgreSQL while the jury writes verdicts; no rating is lost
or doubled, nothing deadlocks, and the p95 write latency is reported.

The issue asks for 2 minutes (``benchmarks/load.py --seconds 120``, figures in docs/benchmarks.md); in the
test run the duration is MEDHELM_LOAD_SECONDS, 20 s by default, so the suite stays bounded.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

LOAD_SECONDS = float(os.environ.get("MEDHELM_LOAD_SECONDS", "20"))
_spec = importlib.util.spec_from_file_location("benchmarks_load", Path(__file__).parents[2] / "benchmarks" / "load.py")
load = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = load  # dataclasses look their module up while the class is built
_spec.loader.exec_module(load)


@pytest.mark.postgres
@pytest.mark.timeout(LOAD_SECONDS + 240)
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_fifty_clinicians_and_the_jury_at_once_lose_nothing_and_never_deadlock(engine):
    result = load.run_load(engine, clinicians=50, seconds=LOAD_SECONDS, items=300, overlap=3)
    print(f"\nload: {result.page_runs} page runs, {result.submissions_written} submissions written, "
          f"{result.double_clicks_refused} double clicks refused, {result.verdicts_written} verdicts; "
          f"write p50 {result.write_p50_ms} ms, p95 {result.write_p95_ms} ms, max {result.write_max_ms} ms")
    assert result.problems == []
    assert result.stuck_threads == 0 and result.database_errors == 0
    assert result.submissions_written >= 50 and result.verdicts_written > 0
    assert result.double_clicks_refused > 0
