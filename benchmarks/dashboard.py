"""How long a researcher waits for the Agreement page of a study of 20,000 items, in a running study where
ratings arrive all the time. Target: under 2 s to the first chart, also on the first page run after a change.

The study: 20,000 items (4 benchmarks, 3 models), 50 clinicians, every item rated by 2 of them on 3
criteria (120,000 scores), a jury run of 3 judges (60,000 verdicts) and ROUGE-L and BERTScore (40,000
scores), all written with bulk inserts. Measured in one run, so the figures are comparable as ratios:

- ``data_version``: what every page run reads to know whether its figures are current (a counter now; the
  baseline's fingerprint of aggregate scans, timed in the baseline subprocess);
- after a new rating, without the page: the scores read again (the rated benchmark only), the current figures the
  page draws first (``fresh_figures``: only the touched scopes) and the extra tables it refreshes on their own;
- the full recompute after a change: loading the scores, the agreement table and the composite's views
  (leniency, item means, distributions), here and, in a subprocess on the same database, with the code of
  ``--baseline-rev`` (the commit before the data version counters; ``git archive`` of its ``medhelm_core``), as ratios;
- ``page``: pages/agreement.py under Streamlit's AppTest (the whole script, an upper bound on the time to the
  first chart, which comes second): the first run (nothing computed yet, so it computes and waits), warm
  reruns, and, ``--changes`` times, the run right after a new rating (it draws the figures it has, marked
  stale, and starts the update) and the time from that run's start until a rerun draws the current figures;
- with ``--browser``: a real Chromium against ``streamlit run serve.py`` (as deployed), from the click on
  "Agreement" to the first drawn chart: the first visit, later visits, the visit after a new rating, and until the
  page has refreshed itself with the current figures (the stale note gone); then the app process's memory.

    .venv/bin/python benchmarks/dashboard.py [--items 20000] [--clinicians 50] [--changes 3] [--browser]
                                              [--baseline-rev REV | --no-baseline] [--database-url URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from baseline_code import extract_package
from sqlalchemy import insert, select
from sqlmodel import Session

from medhelm_core.accounts.auth import sign_in
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.db.models import (
    Item,
    JudgeVerdict,
    JuryRun,
    MetricScore,
    Rating,
    RatingSubmission,
    Study,
    User,
    utcnow,
)
from medhelm_core.figures import (
    FigureKey,
    compute_agreement,
    compute_figures,
    criterion_views,
    data_version,
    fresh_figures,
    load_dashboard_data,
    wait_for_updates,
)
from medhelm_core.figures.cache import FIGURE_STORE, changed_benchmarks, clinicians_only
from medhelm_core.figures.data import reload_dashboard_data
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_or_create_study
from medhelm_core.tuning import keep_imports_out_of_collections

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the page imports pages.common
CRITERIA = ("accuracy", "completeness", "clarity")
JUDGES = ("openai/judge-a", "anthropic/judge-b", "meta/judge-c")
TARGET_S = 2.0
#: the commit before the data version counters and the per-scope recompute: the baseline the ratios are taken against
BASELINE_REV = "6736ad5"
STALE_NOTE = "Figures as of"
#: what the baseline subprocess runs: the previous code's full recompute after a change, on the same database
BASELINE_SCRIPT = """
import json, sys, time
from sqlmodel import Session
from medhelm_core.db.engine import make_engine
from medhelm_core.db.models import Study
from medhelm_core.figures import (clinician_leniency, compute_agreement, filter_long, item_means,
                                    largest_disagreements, load_dashboard_data, score_distribution)
from medhelm_core.frames import data_version
engine = make_engine(sys.argv[1])
with Session(engine) as session:
    study = session.get(Study, int(sys.argv[2]))
    times = []
    for _ in range(5):
        t = time.perf_counter()
        data_version(session, study)
        times.append(time.perf_counter() - t)
    version = sorted(times)[2]
    t = time.perf_counter()
    data = load_dashboard_data(session, study)
    load = time.perf_counter() - t
t = time.perf_counter()
compute_agreement(data.long)
agreement = time.perf_counter() - t
t = time.perf_counter()  # what the page's views() computed for the composite
long = filter_long(data.long, (), ())
means = item_means(long, "composite", data.criteria)
clinician_leniency(long, "composite", data.criteria)
score_distribution(long, data.criteria)
largest_disagreements(means, data.items, 10)
views = time.perf_counter() - t
print(json.dumps({"data_version_s": version, "load_s": load, "agreement_s": agreement, "views_s": views}))
"""


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


def baseline(url: str, study_id: int, rev: str) -> dict[str, float] | str:
    """The full recompute timed with ``medhelm_core`` as of git revision ``rev`` (in a subprocess, on the same
    database), or why it could not be."""
    with tempfile.TemporaryDirectory() as folder:
        failure = extract_package(rev, folder)
        if failure:
            return failure
        run = subprocess.run([sys.executable, "-c", BASELINE_SCRIPT, url, str(study_id)], cwd=folder,
                             env={**os.environ, "PYTHONPATH": folder}, capture_output=True, text=True)
        if run.returncode:
            return f"the baseline at {rev} failed: {run.stderr.strip().splitlines()[-1:]}"
        return json.loads(run.stdout.strip().splitlines()[-1])


def add_rating(engine, study_id: int, n: int, n_clinicians: int) -> None:
    """A new rating: a third clinician rates item ``n`` (the page's data version changes)."""
    with transaction(engine) as s:
        study = s.get(Study, study_id)
        items = s.execute(select(Item.id).where(Item.study_id == study_id).order_by(Item.id)).scalars().all()
        item = s.get(Item, items[n])
        raters = set(s.execute(select(Rating.rater_id).where(Rating.item_id == item.id)).scalars())
        users = s.execute(select(User).where(User.username.like("bench0%")).order_by(User.id)).scalars().all()
        rater = next(u for u in users[(n + 7) % n_clinicians:] + users if u.id not in raters)
        record_rating(s, item=item, rater=rater, rubric=rubric_spec(s, study.rubric_id),
                      scores=dict.fromkeys(CRITERIA, 1 + n % 5))


def page_runs(url: str, token: str, warm_runs: int, changes: int, engine, study_id: int,
              n_clinicians: int) -> dict[str, float]:
    """Seconds of the page under AppTest: the first run (nothing computed yet), warm reruns (median), and after
    each of ``changes`` new ratings the run that draws the older figures marked stale and the time from its start
    until a rerun draws the current ones (medians)."""
    from streamlit.testing.v1 import AppTest

    from pages.common import TOKEN_KEY

    def notes(at: AppTest) -> list[str]:
        return [w.value for w in at.warning if STALE_NOTE in w.value]

    def check(at: AppTest, stale: bool) -> None:
        if at.exception or not at.get("vega_lite_chart"):
            raise SystemExit(f"the page did not draw its charts: {at.exception or [i.value for i in at.info]}")
        if bool(notes(at)) != stale:
            raise SystemExit(f"expected {'stale' if stale else 'current'} figures, the page said {notes(at)}")

    os.environ["MEDHELM_DATABASE_URL"] = url
    at = AppTest.from_file(str(REPO / "pages" / "agreement.py"), default_timeout=900)
    at.session_state[TOKEN_KEY] = token
    first, _ = timed(at.run)
    check(at, stale=False)
    wait_for_updates(timeout=900)  # the extra tables and versions the first run left to the background
    warm, _ = timed(at.run, repeat=warm_runs)
    check(at, stale=False)
    stale_runs, fresh_after = [], []
    for n in range(changes):
        add_rating(engine, study_id, n, n_clinicians)
        t = time.perf_counter()
        at.run()
        stale_runs.append(time.perf_counter() - t)
        check(at, stale=True)
        FIGURE_STORE.wait_all(timeout=900)  # what the page's poll waits for, without its 1 s period
        at.run()
        fresh_after.append(time.perf_counter() - t)
        check(at, stale=False)
        wait_for_updates(timeout=900)  # the extra tables and the versions follow, untimed, before the next rating
        at.run()
    return {"first": first, "warm": warm, "after_change": statistics.median(stale_runs),
            "fresh_after_change": statistics.median(fresh_after)}


def browser_runs(url: str, warm_runs: int, changes: int, engine, study_id: int,
                 n_clinicians: int) -> dict[str, float]:
    """Seconds from clicking "Agreement" to the first drawn chart in Chromium against `streamlit run serve.py`: the
    first visit (nothing computed yet), later visits (median), and after each new rating the visit (first chart,
    older figures marked stale) and until the page has refreshed itself with the current figures (medians)."""
    import socket
    import urllib.request

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # No file watcher, as in a deployment: in a working tree that other jobs edit, it re-scans the tree and takes
    # the CPU (and the GIL) from the page and its background update.
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(REPO / "serve.py"), "--server.port", str(port),
         "--server.headless", "true", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=REPO, env={**os.environ, "MEDHELM_DATABASE_URL": url}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://localhost:{port}"
    drawn = "[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.3)
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = chromium.new_page(viewport={"width": 1280, "height": 800})
            page.goto(base)
            page.get_by_label("Username").fill("bench-researcher")
            page.get_by_role("textbox", name="Password").fill("bench-researcher-pw")
            with page.expect_navigation(timeout=60_000):  # the reload that hands the session to the cookie
                page.get_by_role("button", name="Sign in").click()
            page.get_by_text("Signed in as").wait_for(timeout=60_000)

            def visit() -> float:
                page.get_by_role("link", name="Studies").click()
                page.get_by_role("heading", name="Studies").wait_for(timeout=60_000)
                t = time.perf_counter()
                page.get_by_role("link", name="Agreement").click()
                page.locator(drawn).first.wait_for(timeout=900_000)
                return time.perf_counter() - t

            def settled(appears_within: float = 120.0) -> None:
                """Wait until the page has drawn what it left to the background or is updating (it reruns itself)."""
                waiting = page.get_by_text(re.compile("in the background|is being computed|before the latest changes"))
                try:
                    waiting.first.wait_for(timeout=appears_within * 1000)  # the rest of the page is drawn
                except PlaywrightTimeout:
                    return  # computed before the page got there
                for _ in range(1800):
                    if not waiting.count():
                        return
                    time.sleep(0.5)
                raise SystemExit("the page's background tables never appeared")

            visits = [visit()]
            settled()  # warm visits are timed with nothing computing beside them
            visits += [visit() for _ in range(warm_runs)]
            stale, fresh = [], []
            for n in range(changes):
                add_rating(engine, study_id, 100 + n, n_clinicians)
                stale.append(visit())
                t = time.perf_counter() - stale[-1]
                note = page.get_by_text(STALE_NOTE)
                if not note.count():
                    raise SystemExit("the visit after a new rating did not say its figures were older")
                note.first.wait_for(state="detached", timeout=900_000)  # the page reran itself
                page.locator(drawn).first.wait_for(timeout=900_000)
                fresh.append(time.perf_counter() - t)
                settled(5.0)  # the extra tables and the versions follow before the next rating, as between real ones
            chromium.close()
        rss_mb, peak_mb = app_memory(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"first": visits[0], "warm": statistics.median(visits[1:]), "after_change": statistics.median(stale),
            "fresh_after_change": statistics.median(fresh), "rss_mb": rss_mb, "peak_rss_mb": peak_mb}


def app_memory(pid: int) -> tuple[float, float]:
    """The app process's resident memory now and at its peak (VmRSS, VmHWM), in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return tuple(round(int(fields[k].split()[0]) / 1024, 1) for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def same_as_whole(reloaded, whole, figures) -> None:
    """Stop unless the reloaded scores equal a whole load and the updated tables (agreement, AC2/kappa, judge
    subsets, each recomputed only where the rating touched) equal those computed whole from it, to the last bit."""
    import pandas as pd

    pd.testing.assert_frame_equal(reloaded.long, whole.long, check_exact=True)
    pd.testing.assert_frame_equal(figures.data.long, whole.long, check_exact=True)
    fresh = compute_figures(whole, figures.protocol)
    for name, updated, computed in (("agreement", figures.table, fresh.table),
                                    ("robust", figures.robust(), fresh.robust()),
                                    ("judge subsets", figures.judge_subsets(), fresh.judge_subsets())):
        try:
            pd.testing.assert_frame_equal(updated, computed, check_exact=True)
        except AssertionError as error:
            raise SystemExit(f"the updated {name} table differs from one computed whole: {error}") from error


def incremental_runs(engine, study_id: int, changes: int, n_clinicians: int) -> dict[str, float]:
    """Seconds to the current figures after a new rating, without the page, medians over ``changes`` new ratings:
    the scores read again (only the rated item's benchmark's clinician ratings, :func:`reload_dashboard_data`), the
    figures the page draws first (``fresh_figures``: data version, scores, the agreement table's touched scopes, the
    views viewed) and then the extra tables, which the page refreshes on their own (AC2/kappa and the judge subsets,
    their touched scopes). Each update is checked equal to a whole recompute (:func:`same_as_whole`), untimed."""
    with Session(engine) as s:
        study = s.get(Study, study_id)
        key = FigureKey.of(engine, study, None, study.agreement_protocol)
    figures = fresh_figures(engine, key)
    figures.robust(), figures.judge_subsets()
    reloads, primary, extras = [], [], []
    for n in range(changes):
        with Session(engine) as s:
            study = s.get(Study, study_id)
            before, previous = data_version(s, study), load_dashboard_data(s, study)
        add_rating(engine, study_id, 200 + n, n_clinicians)
        with Session(engine) as s:
            study = s.get(Study, study_id)
            after = data_version(s, study)
            changed = changed_benchmarks(before, after)  # as the page's update reads them: a rating, clinicians only
            took, reloaded = timed(reload_dashboard_data, s, study, previous, changed, None,
                                   clinicians_only(before, after, changed))
            reloads.append(took)
            whole = load_dashboard_data(s, study)  # untimed: what the reload and the updates must equal
        del previous
        t = time.perf_counter()
        figures = fresh_figures(engine, key)
        primary.append(time.perf_counter() - t)
        t = time.perf_counter()
        figures.robust(), figures.judge_subsets()
        extras.append(time.perf_counter() - t)
        same_as_whole(reloaded, whole, figures)
    return {"reload": statistics.median(reloads), "fresh_after_change": statistics.median(primary),
            "extras_after_change": statistics.median(extras)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--clinicians", type=int, default=50)
    parser.add_argument("--warm-runs", type=int, default=5)
    parser.add_argument("--changes", type=int, default=3, help="new ratings to time the page after (default 3)")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--baseline-rev", default=BASELINE_REV,
                        help=f"git revision whose code is the baseline of the ratios (default {BASELINE_REV})")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline (absolute figures only)")
    parser.add_argument("--browser", action="store_true",
                        help="also time a real Chromium (/usr/bin/chromium) from the click to the first chart")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # As the server does when it starts (serve.py), before anything is computed: without it, the full collections an
    # update sets off walk every import's objects (a whole load of 20,000 items took 1.55 s instead of 1.05 s).
    keep_imports_out_of_collections()
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
    views_s, _ = timed(criterion_views, data)
    old = "skipped (--no-baseline)" if args.no_baseline else baseline(url, study_id, args.baseline_rev)
    with transaction(engine) as s:
        token = sign_in(s, "bench-researcher", "bench-researcher-pw").token
    page = page_runs(url, token, args.warm_runs, args.changes, engine, study_id, args.clinicians)
    direct = incremental_runs(engine, study_id, args.changes, args.clinicians)
    recompute = load_s + agreement_s + views_s
    result = {
        "database": engine.url.get_backend_name(),
        "items": args.items,
        "clinicians": args.clinicians,
        "scores": len(data.long),
        "seed_s": round(seeded, 1),
        "data_version_ms": round(version_s * 1000, 1),
        "load_s": round(load_s, 2),
        "agreement_s": round(agreement_s, 2),
        "views_s": round(views_s, 2),
        "recompute_s": round(recompute, 2),
        "reload_s": round(direct["reload"], 2),
        "fresh_figures_after_change_s": round(direct["fresh_after_change"], 2),
        "extras_after_change_s": round(direct["extras_after_change"], 2),
        "page_first_run_s": round(page["first"], 2),
        "page_warm_run_s": round(page["warm"], 2),
        "page_after_change_s": round(page["after_change"], 2),
        "fresh_after_change_s": round(page["fresh_after_change"], 2),
        "after_change_vs_target": round(page["after_change"] / TARGET_S, 2),
        "target_met": page["after_change"] < TARGET_S and page["warm"] < TARGET_S,
    }
    if isinstance(old, dict):
        old_recompute = old["load_s"] + old["agreement_s"] + old["views_s"]
        result.update(
            baseline_rev=args.baseline_rev,
            baseline_data_version_ms=round(old["data_version_s"] * 1000, 1),
            baseline_load_s=round(old["load_s"], 2),
            baseline_agreement_s=round(old["agreement_s"], 2),
            baseline_views_s=round(old["views_s"], 2),
            baseline_recompute_s=round(old_recompute, 2),
            load_speedup=round(old["load_s"] / load_s, 1),
            agreement_speedup=round(old["agreement_s"] / agreement_s, 1),
            recompute_speedup=round(old_recompute / recompute, 1),
        )
    else:
        result["baseline"] = old
    if args.browser:
        browser = browser_runs(url, args.warm_runs, args.changes, engine, study_id, args.clinicians)
        result.update({f"browser_{k}" if k.endswith("_mb") else f"browser_{k}_s": round(v, 2)
                       for k, v in browser.items()})
        result["browser_target_met"] = browser["after_change"] < TARGET_S and browser["warm"] < TARGET_S
    if args.json:
        print(json.dumps(result, indent=2))
        return
    report(result, args)


def fresh_target(items: int) -> float:
    """Seconds within which current figures should follow a new rating: 2 s up to 20,000 items, 10 s beyond."""
    return 2.0 if items <= 20_000 else 10.0


def report(r: dict, args: argparse.Namespace) -> None:
    """The figures as text; ratios against the baseline when it ran."""
    print(f"{r['database']}: {args.items} items, {args.clinicians} clinicians, {r['scores']:,} scores "
          f"(seeded in {r['seed_s']} s)")
    old_version = f" (the scanned fingerprint of {r['baseline_rev']}: {r['baseline_data_version_ms']} ms)" \
        if "baseline_rev" in r else ""
    print(f"  data version (every run):        {r['data_version_ms']} ms{old_version}")
    print(f"  scores after a rating:           {r['reload_s']} s (the rated benchmark's ratings read again; a whole "
          f"load: {r['load_s']} s)")
    print(f"  current figures after a rating:  {r['fresh_figures_after_change_s']} s (data version, scores, the "
          f"touched scopes, the views viewed; target {fresh_target(r['items']):g} s), then the extra tables "
          f"{r['extras_after_change_s']} s more; each equal to a whole recompute, to the last bit")
    print(f"  full recompute after a change:   load {r['load_s']} s + agreement table {r['agreement_s']} s + "
          f"views {r['views_s']} s = {r['recompute_s']} s")
    if "baseline_rev" in r:
        print(f"  the same with {r['baseline_rev']}:         load {r['baseline_load_s']} s + agreement table "
              f"{r['baseline_agreement_s']} s + views {r['baseline_views_s']} s = {r['baseline_recompute_s']} s")
        print(f"  speed-up:                        load {r['load_speedup']}x, agreement table "
              f"{r['agreement_speedup']}x, full recompute {r['recompute_speedup']}x")
    else:
        print(f"  baseline: {r['baseline']}")
    print(f"  page, first run (computes):      {r['page_first_run_s']} s")
    print(f"  page, warm (whole run):          {r['page_warm_run_s']} s")
    print(f"  page after a new rating:         {r['page_after_change_s']} s to the whole run with the older figures "
          f"(marked stale) = {r['after_change_vs_target']} x the {TARGET_S:g} s target")
    print(f"  current figures drawn after:     {r['fresh_after_change_s']} s from that run's start")
    if args.browser:
        print(f"  Chromium, click to first chart:  first visit {r['browser_first_s']} s, later visits "
              f"{r['browser_warm_s']} s, after a new rating {r['browser_after_change_s']} s; current figures "
              f"drawn {r['browser_fresh_after_change_s']} s after the click")
        print(f"  app process memory:              {r['browser_rss_mb']} MB resident after the visits, peak "
              f"{r['browser_peak_rss_mb']} MB (target < 400 MB at 20,000 items)")
    met = r["target_met"] and r.get("browser_target_met", True)
    print(f"  target (< {TARGET_S:g} s to the first chart, also right after a change): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
