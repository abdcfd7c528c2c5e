"""How long ``medhelm`` takes to answer before it does any work: ``--help``, and ``users list`` on a small SQLite
database (start-up, schema check, one query). Everything a researcher types pays this first.

Each command runs ``--runs`` times in a fresh interpreter, with this code and with the code of ``--baseline-rev``
(the commit before the commands imported pandas, scipy and the agreement engine only when they use them),
alternating, so the two see the same machine load; the figures are medians and their ratio.

    .venv/bin/python benchmarks/cli_startup.py [--runs 7] [--baseline-rev REV] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from baseline_code import REPO, extract_package

BASELINE_REV = "7c6764c"
ENTRY = "from medhelm_core.cli import main; main()"
COMMANDS = {"medhelm --help": ["--help"], "medhelm users list": ["users", "list"]}


def once(args: list[str], pythonpath: str, database_url: str) -> float:
    env = {**os.environ, "PYTHONPATH": pythonpath, "MEDHELM_DATABASE_URL": database_url}
    start = time.perf_counter()
    # run from the code's own folder: `python -c` puts the working directory first on sys.path
    subprocess.run([sys.executable, "-c", ENTRY, *args], env=env, cwd=pythonpath, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline-rev", default=BASELINE_REV)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        failure = extract_package(args.baseline_rev, Path(folder) / "old")
        if failure:
            sys.exit(failure)
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        subprocess.run([sys.executable, "-m", "medhelm_core", "init"], env={**os.environ, "MEDHELM_DATABASE_URL": url},
                       check=True, capture_output=True)
        results = {}
        for label, command in COMMANDS.items():
            now, before = [], []
            for _ in range(args.runs):
                now.append(once(command, str(REPO), url))
                before.append(once(command, str(Path(folder) / "old"), url))
            results[label] = {"now_s": statistics.median(now), "before_s": statistics.median(before)}
            results[label]["ratio"] = results[label]["before_s"] / results[label]["now_s"]
    if args.json:
        print(json.dumps({"baseline_rev": args.baseline_rev, "runs": args.runs, "results": results}))
        return
    print(f"median of {args.runs} runs, fresh interpreter each; before = {args.baseline_rev}")
    for label, r in results.items():
        print(f"{label:22s} before {r['before_s']:.2f} s   now {r['now_s']:.2f} s   {r['ratio']:.1f}x")


if __name__ == "__main__":
    main()
