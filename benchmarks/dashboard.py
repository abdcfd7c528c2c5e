"""How long a researcher waits for the Agreement page of a study of 20,000 items. Target: under 2 s to the
first chart with the cache warm, i.e. on every rerun and every visit until the data changes.

The study: 20,000 items (4 benchmarks, 3 models), 50 clinicians, every item rated by 2 of them on 3
criteria (120,000 scores), a jury run of 3 judges (60,000 verdicts) and ROUGE-L and BERTScore (40,000
scores), all written with bulk inserts. Measured in one run, so the figures are comparable as ratios:

- ``data_version``: the fingerprint every page run queries to key its cache;
- ``cold``: loading the scores and computing the agreement table (what a page run after a change does);
- ``page``: pages/agreement.py under Streamlit's AppTest, first with an empty cache, then warm (the whole
  script, so an upper bound on the time to the first chart, which comes second on the page);
- with ``--browser``: a real Chromium against ``streamlit run``, from the click on "Agreement" to the first
  drawn chart, on the first visit and on later ones.

    .venv/bin/python benchmarks/dashboard.py [--items 20000] [--clinicians 50] [--browser] [--database-url URL]
                                              [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert, select
from sqlmodel import Session

from medhelm_core.auth import sign_in
from medhelm_core.dashboard import compute_agreement, data_version, load_dashboard_data
from medhelm_core.db import make_engine, transaction
from medhelm_core.models import Item, JudgeVerdict, JuryRun, MetricScore, Rating, RatingSubmission, Study, User, utcnow
from medhelm_core.schema import upgrade_database
from medhelm_core.studies import get_or_create_study
from medhelm_core.users import add_user

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the page imports pages.common
CRITERIA = ("accuracy", "completeness", "clarity")
JUDGES = ("openai/judge-a", "anthropic/judge-b", "meta/judge-c")
TARGET_S = 2.0


def _score(rng: random.Random, truth: float, noise: float) -> int:
    return int(min(5, max(1, round(truth + rng.gauss(0, noise)))))


def seed(engine, n_items: int, n_clinicians: int) -> int:
    """Write the study with bulk inserts; returns its id."""
    rng = random.Random(0)
    now = utcnow()
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, f"bench-{n_items}")
        s.execute(insert(Item), [
            {"study_id": study.id, "benchmark": f"b{i % 4}", "instance_id": str(i), "model": f"m{i % 3}",
             "input_text": "question", "output_text": "answer", "reference_text": "reference", "meta": {},
             "created_at": now}
            for i in range(n_items)
        ])
        s.execute(insert(User), [{"username": f"bench{i:03d}", "role": "clinician", "display_name": "", "meta": {},
                                  "is_active": True, "failed_logins": 0, "created_at": now}
                                 for i in range(n_clinicians)])
        add_user(s, "bench-researcher", "researcher", "bench-researcher-pw")
        items = s.execute(select(Item.id).where(Item.study_id == study.id).order_by(Item.id)).scalars().all()
        users = s.execute(select(User.id).where(User.username.like("bench0%")).order_by(User.id)).scalars().all()
        truth = {i: rng.uniform(1.5, 4.5) for i in items}
        submissions = []
        for n, item in enumerate(items):
            first = n % n_clinicians
            second = (first + 1 + (n // n_clinicians) % (n_clinicians - 1)) % n_clinicians  # never the first
            for rater in (users[first], users[second]):
                scores = {c: _score(rng, truth[item], 0.8) for c in CRITERIA}
                submissions.append({"item_id": item, "rater_id": rater, "revision": 1, "scores": scores,
                                    "comment": "", "submitted_at": now})
        s.execute(insert(RatingSubmission), submissions)
        stored = s.execute(select(RatingSubmission.id, RatingSubmission.item_id, RatingSubmission.rater_id,
                                  RatingSubmission.scores)).all()
        s.execute(insert(Rating), [
            {"item_id": item, "rater_id": rater, "criterion": c, "score": v, "submission_id": sid, "updated_at": now}
            for sid, item, rater, scores in stored for c, v in scores.items()
        ])
        run = JuryRun(study_id=study.id, name="bench jury", source="litellm", config={}, status="done")
        s.add(run)
        s.flush()
        s.execute(insert(JudgeVerdict), [
            {"jury_run_id": run.id, "item_id": item, "judge": judge, "status": "ok", "cache_key": "",
             "scores": {c: _score(rng, truth[item], 0.6 + 0.3 * j) for c in CRITERIA}, "explanations": {},
             "prompt": "", "raw_response": "", "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
             "created_at": now}
            for item in items for j, judge in enumerate(JUDGES)
        ])
        s.execute(insert(MetricScore), [
            {"item_id": item, "metric": metric, "value": min(1.0, max(0.0, (truth[item] - 1) / 4 + rng.gauss(0, 0.2))),
             "settings": {"family": metric}, "settings_hash": metric, "computed_at": now}
            for item in items for metric in ("rougeL_f", "bertscore_f1")
        ])
        return int(study.id)


def timed(fn, *args, repeat: int = 1):
    """(median seconds, last result) over ``repeat`` calls."""
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def page_runs(url: str, token: str, warm_runs: int) -> tuple[float, float]:
    """Seconds of the page's first run (empty cache) and the median of the warm reruns, under AppTest."""
    from streamlit.testing.v1 import AppTest

    from pages.common import TOKEN_KEY

    os.environ["MEDHELM_DATABASE_URL"] = url
    at = AppTest.from_file(str(REPO / "pages" / "agreement.py"), default_timeout=900)
    at.session_state[TOKEN_KEY] = token
    cold, _ = timed(at.run)
    if at.exception or not at.get("vega_lite_chart"):
        raise SystemExit(f"the page did not draw its charts: {at.exception or [i.value for i in at.info]}")
    warm, _ = timed(at.run, repeat=warm_runs)
    return cold, warm


def browser_runs(url: str, warm_runs: int) -> tuple[float, float]:
    """Seconds from clicking "Agreement" to the first drawn chart in Chromium against `streamlit run`:
    the first visit (empty cache) and the median of later visits (warm)."""
    import socket
    import subprocess
    import urllib.request

    from playwright.sync_api import sync_playwright

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.port", str(port),
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=REPO, env={**os.environ, "MEDHELM_DATABASE_URL": url}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://localhost:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.3)
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
            page = chromium.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(base)
            page.get_by_label("Username").fill("bench-researcher")
            page.get_by_role("textbox", name="Password").fill("bench-researcher-pw")
            page.get_by_role("button", name="Sign in").click()
            page.get_by_text("Signed in as").wait_for(timeout=60_000)
            visits = []
            for _ in range(1 + warm_runs):
                page.get_by_role("link", name="Studies").click()
                page.get_by_role("heading", name="Studies").wait_for(timeout=60_000)
                t = time.perf_counter()
                page.get_by_role("link", name="Agreement").click()
                drawn = "[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg"
                page.locator(drawn).first.wait_for(timeout=900_000)
                visits.append(time.perf_counter() - t)
            chromium.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return visits[0], statistics.median(visits[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--clinicians", type=int, default=50)
    parser.add_argument("--warm-runs", type=int, default=5)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--browser", action="store_true",
                        help="also time a real Chromium (/usr/bin/chromium) from the click to the first chart")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    engine = make_engine(url)
    upgrade_database(engine)
    t = time.perf_counter()
    study_id = seed(engine, args.items, args.clinicians)
    seeded = time.perf_counter() - t
    with Session(engine) as s:
        study = s.get(Study, study_id)
        version_s, _ = timed(data_version, s, study, repeat=20)
        load_s, data = timed(load_dashboard_data, s, study)
    agreement_s, _ = timed(compute_agreement, data.long)
    with transaction(engine) as s:
        token = sign_in(s, "bench-researcher", "bench-researcher-pw").token
    page_cold, page_warm = page_runs(url, token, args.warm_runs)
    result = {
        "database": engine.url.get_backend_name(),
        "items": args.items,
        "clinicians": args.clinicians,
        "scores": len(data.long),
        "seed_s": round(seeded, 1),
        "data_version_ms": round(version_s * 1000, 1),
        "cold_load_s": round(load_s, 2),
        "cold_agreement_s": round(agreement_s, 2),
        "page_first_run_s": round(page_cold, 2),
        "page_warm_run_s": round(page_warm, 2),
        "warm_vs_target": round(page_warm / TARGET_S, 2),
    }
    if args.browser:
        first, warm = browser_runs(url, args.warm_runs)
        result.update(browser_first_visit_s=round(first, 2), browser_warm_visit_s=round(warm, 2),
                      browser_warm_vs_target=round(warm / TARGET_S, 2))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['database']}: {args.items} items, {args.clinicians} clinicians, {result['scores']:,} scores "
          f"(seeded in {result['seed_s']} s)")
    print(f"  data version (every run):     {result['data_version_ms']} ms")
    print(f"  cold load + agreement table:  {result['cold_load_s']} s + {result['cold_agreement_s']} s")
    print(f"  page, empty cache:            {result['page_first_run_s']} s")
    print(f"  page, warm cache (whole run): {result['page_warm_run_s']} s = {result['warm_vs_target']} x the "
          f"{TARGET_S:g} s target to the first chart")
    if args.browser:
        print(f"  Chromium, click to first chart: first visit {result['browser_first_visit_s']} s, later visits "
              f"{result['browser_warm_visit_s']} s = {result['browser_warm_vs_target']} x the target")


if __name__ == "__main__":
    main()
