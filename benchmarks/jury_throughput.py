"""Jury throughput at a loopback OpenAI-compatible server, beside bare litellm, the openai SDK and raw aiohttp.

In one run, at each latency (0 and 100 ms by default) and ``--concurrency`` calls at once (50), four ways to make
``--calls`` chat completions with the jury's own prompt against tests/support/fake_openai_server.py (in its own
process, waiting ``latency`` before every answer, like a provider):

- ``jury``: :func:`~medhelm_core.jury.run_jury` through its real path (plan, calls, parse, verdicts written to an
  SQLite file), one ``openai/...`` judge at the server;
- ``litellm``: bare ``litellm.acompletion`` calls (no parse, no database);
- ``openai_sdk``: bare ``openai.AsyncOpenAI`` calls over aiohttp, the client the jury uses for such a judge;
- ``aiohttp``: raw HTTP posts, what one Python process can do at all.

Each runs in a process of its own (so one's imports and threads do not slow another), after a warm-up of
``--warmup`` calls. The limit at latency L is concurrency / L calls a second (500 at 100 ms); ``--check`` exits 1 when
the jury makes fewer than ``--target`` (400) calls a second at 100 ms. ``--profile FILE`` also samples the jury's
call phase at the last latency with py-spy (if installed) and prints where its CPU goes.

    .venv/bin/python benchmarks/jury_throughput.py --check                  # issue 20: 2,000 calls, 0 and 100 ms, 50
    .venv/bin/python benchmarks/jury_throughput.py --calls 300 --latencies 0.1
    .venv/bin/python benchmarks/jury_throughput.py --profile /tmp/jury.prof
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

MODEL = "openai/bench-judge"
CONTENDERS = ("jury", "litellm", "openai_sdk", "aiohttp")


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "fake_openai_server.py"), "--latency",
                             str(latency)], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def jury_messages() -> list[dict[str, str]]:
    """The messages the jury sends for one bench item: the bare contenders send the same bytes."""
    from medhelm_core.jury.prompt import DEFAULT_TEMPLATE, render_prompt
    from medhelm_core.rubric import default_rubric

    return render_prompt(DEFAULT_TEMPLATE, default_rubric(), benchmark="medi_qa", input_text=ITEM["input_text"],
                         output_text=ITEM["output_text"], reference_text=ITEM["reference_text"]).messages


ITEM = {"input_text": "Question: can I take ibuprofen with food?", "output_text": "Yes, with food. SCENARIO=good",
        "reference_text": "Yes; take it with food to spare the stomach."}


# -- the contenders, each run in its own process -------------------------------------------------------------------

def run_jury_contender(base: str, calls: int, concurrency: int, warmup: int,
                       profile: str | None) -> tuple[float, float]:
    from support.helpers import study_named

    from medhelm_core.db.engine import make_engine, transaction
    from medhelm_core.db.migrate import upgrade_database
    from medhelm_core.db.models import Item
    from medhelm_core.jury import build_config, run_jury
    from medhelm_core.rubric import default_rubric
    from medhelm_core.studies import get_or_create_study

    os.environ.setdefault("OPENAI_API_KEY", "bench")
    config = replace(build_config(default_rubric(), [MODEL], api_base=base, concurrency=concurrency, timeout=30),
                     retry_base_seconds=0.05)
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        upgrade_database(engine)
        for name, n in (("warmup", warmup), ("bench", calls)):
            with transaction(engine) as session:
                study, _ = get_or_create_study(session, name)
                session.add_all([Item(study_id=study.id, benchmark="medi_qa", instance_id=f"i{i}", model="m",
                                      **{**ITEM, "input_text": f"{ITEM['input_text']} ({i})"}) for i in range(n)])
        run_jury(engine, study_named(engine, "warmup"), config)  # first-use costs: imports, the client, SQLite's pages
        spy = start_profiler(profile) if profile else None
        started, cpu = time.perf_counter(), time.process_time()
        summary = run_jury(engine, study_named(engine, "bench"), config)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        assert summary.done == calls and summary.failed == 0, summary
        engine.dispose()
    return calls / elapsed, cpu / calls


def start_profiler(path: str) -> subprocess.Popen:
    """py-spy sampling this process (the jury's run only), written as collapsed stacks to ``path``."""
    spy = subprocess.Popen([shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"), "record",
                            "--pid", str(os.getpid()), "--format", "raw", "--rate", "250", "--nonblocking",
                            "--output", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attach before the run starts
    return spy


async def bare_rate(call, calls: int, concurrency: int, warmup: int) -> tuple[float, float]:
    """(calls a second, CPU seconds of this process per call) of ``calls`` calls, ``concurrency`` at once."""
    limit = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with limit:
            await call()

    await asyncio.gather(*(one() for _ in range(warmup)))
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    return calls / (time.perf_counter() - started), (time.process_time() - cpu) / calls


async def litellm_contender(base: str, calls: int, concurrency: int, warmup: int) -> tuple[float, float]:
    from medhelm_core.jury.calls import load_litellm

    litellm = load_litellm()
    messages = jury_messages()

    async def call() -> None:
        await litellm.acompletion(model=MODEL, messages=messages, api_base=base, api_key="bench", temperature=0,
                                  max_tokens=4096, num_retries=0, max_retries=0)

    return await bare_rate(call, calls, concurrency, warmup)


async def openai_sdk_contender(base: str, calls: int, concurrency: int, warmup: int) -> tuple[float, float]:
    from medhelm_core.jury.config import JudgeSpec
    from medhelm_core.jury.openai_compatible import open_client

    client = open_client(JudgeSpec(MODEL, api_base=base, concurrency=concurrency, timeout=30), "bench")
    messages = jury_messages()

    async def call() -> None:
        await client.chat.completions.create(model=MODEL.split("/", 1)[1], messages=messages, temperature=0,
                                             max_tokens=4096)

    try:
        return await bare_rate(call, calls, concurrency, warmup)
    finally:
        await client.close()


async def aiohttp_contender(base: str, calls: int, concurrency: int, warmup: int) -> tuple[float, float]:
    import aiohttp

    body = {"model": MODEL.split("/", 1)[1], "messages": jury_messages(), "temperature": 0, "max_tokens": 4096}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency),
                                     headers={"Authorization": "Bearer bench"}) as session:
        async def call() -> None:
            async with session.post(f"{base}/chat/completions", json=body) as response:
                await response.json()

        return await bare_rate(call, calls, concurrency, warmup)


def run_one(args: argparse.Namespace) -> None:
    """``--only NAME``: one contender in this process; prints its calls a second."""
    if args.only == "jury":
        rate, cpu = run_jury_contender(args.base, args.calls, args.concurrency, args.warmup, args.profile_to)
    else:
        contender = {"litellm": litellm_contender, "openai_sdk": openai_sdk_contender,
                     "aiohttp": aiohttp_contender}[args.only]
        rate, cpu = asyncio.run(contender(args.base, args.calls, args.concurrency, args.warmup))
    print(json.dumps({"calls_per_s": rate, "cpu_ms_per_call": cpu * 1000}))


# -- the profile's shares ------------------------------------------------------------------------------------------

SDK = {"openai", "httpx", "httpx2", "httpcore", "httpcore2", "aiohttp", "anyio", "pydantic", "pydantic_core",
       "multidict", "yarl", "h11", "jiter", "aiohappyeyeballs", "propcache", "frozenlist", "sniffio", "distro"}
DATABASE = {"sqlalchemy", "sqlmodel", "sqlite3", "psycopg", "alembic"}


def profile_shares(path: str) -> dict[str, float]:
    """Share of the samples per part: each sample goes to the part of the innermost frame that is not the standard
    library (json, re, asyncio's helpers ... count for whoever called them); the event loop's own work (select,
    scheduling) and samples with only standard-library frames (a thread pool's worker) are
    ``event_loop_and_stdlib``."""
    counts: Counter[str] = Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        counts[_part(stack.split(";"))] += int(n)
    total = sum(counts.values()) or 1
    return {part: round(n / total, 3) for part, n in counts.most_common()}


def _part(frames: list[str]) -> str:
    names = [frame.split(" (")[0] for frame in frames]
    loop = max((i for i, name in enumerate(names) if name == "BaseEventLoop._run_once"), default=-1)
    if loop >= 0 and "Handle._run" not in names[loop:]:
        return "event_loop_and_stdlib"  # the loop itself (select, scheduling), not a callback it runs
    for frame in reversed(frames):
        where = frame[frame.rfind("(") + 1:].split(":")[0]
        top = where.split("/")[0].removesuffix(".py")
        if top == "litellm":
            return "litellm"
        if top in SDK:
            return "openai_sdk_and_http"
        if top in DATABASE or where.startswith("medhelm_core/jury/store.py") or "data_versions" in where:
            return "database_writes"
        if top in ("medhelm_core", "support"):
            return "our_code"
    return "event_loop_and_stdlib"


# -- the run -------------------------------------------------------------------------------------------------------

def contender_rate(name: str, base: str, args: argparse.Namespace, profile_to: str | None = None) -> dict[str, float]:
    """Run one contender in a process of its own: its calls a second and CPU milliseconds per call."""
    command = [sys.executable, __file__, "--only", name, "--base", base, "--calls", str(args.calls),
               "--concurrency", str(args.concurrency), "--warmup", str(args.warmup)]
    if profile_to:
        command += ["--profile-to", profile_to]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--latencies", default="0,0.1", help="seconds, comma-separated")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--target", type=float, default=400.0, help="calls/s the jury must reach at 100 ms")
    parser.add_argument("--check", action="store_true", help="exit 1 when the jury is under --target at 100 ms")
    parser.add_argument("--profile", help="py-spy the jury's run at the last latency, collapsed stacks to this file")
    parser.add_argument("--only", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--profile-to", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        run_one(args)
        return
    latencies = [float(x) for x in args.latencies.split(",")]
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    limit_100ms = args.concurrency / 0.1
    rows = []
    profile = None
    for latency in latencies:
        proc, base = start_server(latency)
        try:
            for name in names:
                measured = contender_rate(name, base, args)
                rate = measured["calls_per_s"]
                rows.append({"contender": name, "latency_s": latency, "calls_per_s": round(rate, 1),
                             "share_of_100ms_limit": round(rate / limit_100ms, 3),
                             "cpu_ms_per_call": round(measured["cpu_ms_per_call"], 2)})
                print(f"{name:>11} at {latency * 1000:>4.0f} ms: {rate:7.1f} calls/s "
                      f"({rate / limit_100ms:.0%} of the {limit_100ms:.0f}/s limit at 100 ms), "
                      f"{measured['cpu_ms_per_call']:.2f} ms CPU per call", file=sys.stderr)
            if args.profile and latency == latencies[-1] and "jury" in names:
                rate = contender_rate("jury", base, args, profile_to=args.profile)["calls_per_s"]
                profile = {"latency_s": latency, "calls_per_s_while_sampled": round(rate, 1),
                           "shares": profile_shares(args.profile)}
        finally:
            proc.terminate()
            proc.wait(10)
    jury_100 = next((r["calls_per_s"] for r in rows if r["contender"] == "jury" and r["latency_s"] == 0.1), None)
    print(json.dumps({
        "calls": args.calls, "concurrency": args.concurrency, "limit_at_100ms_calls_per_s": limit_100ms,
        "target_calls_per_s": args.target, "results": rows, "profile": profile,
        "python": platform.python_version(), "litellm": _version("litellm"), "openai": _version("openai"),
        "cpus": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2),
    }, indent=2))
    if args.check:
        if jury_100 is None:
            raise SystemExit("--check needs the jury at 0.1 s latency (--latencies ... ,0.1)")
        if jury_100 < args.target:
            raise SystemExit(f"the jury made {jury_100:.0f} calls/s at 100 ms, under the target of {args.target:.0f}")


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
