"""Jury throughput against the loopback OpenAI-compatible server, in one run: this jury vs a plain loop.

The server (tests/support/fake_openai_server.py) runs in its own process and waits ``--latency`` seconds before
every answer, like a provider. The jury makes ``--calls`` calls (one judge, one call per item) at
``--concurrency``, writing every verdict to an SQLite file as it arrives; the ceiling is concurrency /
latency calls per second. The baseline is a plain sequential ``litellm.acompletion`` loop (no parsing, no
database) over ``--sequential-calls`` calls, and the jury again at concurrency 1. Bare litellm calls at the
same concurrency show what litellm itself allows on the machine (its own CPU cost per call bounds one
process well below the ceiling on a small machine).

    .venv/bin/python benchmarks/jury_throughput.py                     # issue 4: 2,000 calls, 100 ms, 50 at once
    .venv/bin/python benchmarks/jury_throughput.py --calls 400 --latency 0.05 --concurrency 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from support.helpers import study_named  # noqa: E402
from support.jury_support import make_study  # noqa: E402

from medhelm_core.db.engine import make_engine  # noqa: E402
from medhelm_core.db.migrate import upgrade_database  # noqa: E402
from medhelm_core.jury import build_config, run_jury  # noqa: E402
from medhelm_core.jury.calls import load_litellm  # noqa: E402
from medhelm_core.rubric import default_rubric  # noqa: E402

MODEL = "openai/bench-judge"


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "fake_openai_server.py"), "--latency",
                             str(latency)], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def jury_rate(base: str, calls: int, concurrency: int, folder: Path, name: str) -> tuple[float, int]:
    engine = make_engine(f"sqlite:///{folder / (name + '.db')}")
    upgrade_database(engine)
    make_study(engine, ["good"] * calls, name=name)
    config = replace(build_config(default_rubric(), [MODEL], api_base=base, concurrency=concurrency, timeout=30),
                     retry_base_seconds=0.05)
    started = time.perf_counter()
    summary = run_jury(engine, study_named(engine, name), config)
    elapsed = time.perf_counter() - started
    assert summary.done == calls and summary.failed == 0, summary
    engine.dispose()
    return calls / elapsed, summary.done


async def plain_litellm_rate(litellm, base: str, calls: int, concurrency: int) -> float:
    """Bare ``litellm.acompletion`` calls (no prompt, parsing or database): what litellm alone allows."""
    messages = [{"role": "user", "content": "Rate this answer. SCENARIO=good " + "x" * 3000}]
    limit = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with limit:
            await litellm.acompletion(model=MODEL, messages=messages, api_base=base, api_key="bench",
                                      temperature=0, max_tokens=4096, num_retries=0, max_retries=0)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return calls / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--sequential-calls", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "bench")
    litellm = load_litellm()
    proc, base = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            jury_rate(base, 20, args.concurrency, folder, "warmup")  # first-use costs of litellm and sqlite
            plain = asyncio.run(plain_litellm_rate(litellm, base, args.sequential_calls, 1))
            plain_many = asyncio.run(plain_litellm_rate(litellm, base, args.calls, args.concurrency))
            one, _ = jury_rate(base, args.sequential_calls, 1, folder, "c1")
            many, done = jury_rate(base, args.calls, args.concurrency, folder, "cn")
    finally:
        proc.terminate()
        proc.wait(10)
    limit = args.concurrency / args.latency
    result = {
        "calls": done,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "limit_calls_per_s": round(limit, 1),
        "jury_calls_per_s": round(many, 1),
        "jury_share_of_limit": round(many / limit, 3),
        "jury_concurrency_1_calls_per_s": round(one, 2),
        "plain_sequential_litellm_calls_per_s": round(plain, 2),
        "plain_concurrent_litellm_calls_per_s": round(plain_many, 1),
        "jury_share_of_plain_concurrent_litellm": round(many / plain_many, 3),
        "speedup_vs_plain_loop": round(many / plain, 1),
        "speedup_vs_concurrency_1": round(many / one, 1),
        "python": platform.python_version(),
        "litellm": getattr(litellm, "__version__", None) or _version("litellm"),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
