"""Jury-clinician agreement per jury version: each run on the items every run scored, and the change from a
baseline with a paired bootstrap interval; reproduced from stored verdicts and from the command line."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest
from sqlmodel import Session, select
from support.jury_support import LOCAL_A, LOCAL_B, make_study

from medhelm_core.accounts.users import add_user
from medhelm_core.agreement import pair_agreement, version_agreement
from medhelm_core.cli import main
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, Rating, User, utcnow
from medhelm_core.errors import AgreementInputError
from medhelm_core.figures.jury_versions_data import load_version_inputs, study_version_agreement
from medhelm_core.jury.config import build_config
from medhelm_core.jury.prompt import DEFAULT_TEMPLATE
from medhelm_core.jury.templates import save_template_version
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study

CRITERIA = ("accuracy", "completeness", "clarity")
LONG = ["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark"]


def synthetic(n: int = 40, noises: dict[int, float] | None = None, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two clinicians and one jury per run around a per-item truth; a run's noise sets how well it agrees."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(3, 1, n)
    clin = pd.DataFrame(
        [(f"i{i:02d}", c, "clinician", k, float(np.clip(np.rint(truth[i] + rng.normal(0, 0.6)), 1, 5)), "medi_qa")
         for i in range(n) for c in ("c1", "c2") for k in CRITERIA], columns=LONG)
    juries = pd.DataFrame(
        [(run, f"i{i:02d}", k, float(np.clip(truth[i] + rng.normal(0, noise), 1, 5)))
         for run, noise in (noises or {1: 1.0, 2: 0.4}).items() for i in range(n) for k in CRITERIA],
        columns=["run_id", "item_id", "criterion", "score"])
    return clin, juries


def clinician_mean(clin: pd.DataFrame, criterion: str = "composite") -> pd.Series:
    part = clin if criterion == "composite" else clin[clin["criterion"] == criterion]
    per_rater = part.groupby(["item_id", "rater_id"])["score"].mean()
    return per_rater.groupby("item_id").mean()


def jury_composite(juries: pd.DataFrame, run: object) -> pd.Series:
    wide = juries[juries["run_id"] == run].pivot(index="item_id", columns="criterion", values="score")
    return wide.reindex(columns=list(CRITERIA)).dropna().mean(axis=1)


def test_each_version_is_a_direct_pair_agreement_on_the_items_every_run_scored():
    clin, juries = synthetic()
    juries = juries[~((juries["run_id"] == 2) & juries["item_id"].isin(["i00", "i01", "i02"]))]
    # Run 1 lacks one criterion on item i05: no composite there.
    juries = juries[~((juries["run_id"] == 1) & (juries["item_id"] == "i05") & (juries["criterion"] == "clarity"))]
    table = version_agreement(clin, juries, n_resamples=300).set_index("run_id")
    common = sorted(set(clin["item_id"]) - {"i00", "i01", "i02", "i05"})
    assert (table["n_items"] == len(common)).all()
    assert table.loc[1, "n_items_run"] == 39 and table.loc[2, "n_items_run"] == 37
    for run in (1, 2):
        direct = pair_agreement(clinician_mean(clin).loc[common], jury_composite(juries, run).loc[common],
                                bootstrap="bca", n_resamples=300)
        f_row, boot = direct.iloc[0], direct.iloc[1]
        got = table.loc[run]
        for ours, theirs in [(got["estimate"], f_row["estimate"]), (got["ci_low"], f_row["ci_low"]),
                             (got["ci_high"], f_row["ci_high"]), (got["pearson_r"], f_row["pearson_r"]),
                             (got["spearman_rho"], f_row["spearman_rho"]), (got["boot_ci_low"], boot["ci_low"]),
                             (got["boot_ci_high"], boot["ci_high"])]:
            assert abs(ours - theirs) < 1e-9
    assert "on the 36 items the clinicians and every compared run scored" in table.loc[1, "note"]
    assert abs(table.loc[2, "diff"] - (table.loc[2, "estimate"] - table.loc[1, "estimate"])) < 1e-12


def test_the_paired_difference_interval_holds_the_point_difference_and_shows_a_real_change():
    clin, juries = synthetic(noises={1: 2.0, 2: 0.3})
    table = version_agreement(clin, juries, n_resamples=1000).set_index("run_id")
    base, better = table.loc[1], table.loc[2]
    assert base["baseline"] and base["diff"] == 0 and np.isnan(base["diff_ci_low"]) and base["change"] == ""
    assert better["diff_ci_low"] <= better["diff"] <= better["diff_ci_high"]
    assert better["diff_ci_low"] > 0 and better["change"] == "higher"
    flipped = version_agreement(clin, juries, baseline=2, n_resamples=1000).set_index("run_id")
    assert flipped.loc[1, "change"] == "lower" and flipped.loc[1, "diff"] == pytest.approx(-better["diff"], abs=1e-12)


def test_identical_runs_differ_by_exactly_zero():
    clin, juries = synthetic(noises={1: 0.8})
    twin = juries.assign(run_id=2)
    table = version_agreement(clin, pd.concat([juries, twin]), n_resamples=500).set_index("run_id")
    same = table.loc[2]
    assert (same["diff"], same["diff_ci_low"], same["diff_ci_high"]) == (0.0, 0.0, 0.0)
    assert same["change"] == "no clear change" and same["estimate"] == table.loc[1, "estimate"]


def test_pairing_makes_the_difference_far_surer_than_either_run():
    # Two runs that differ by a hair: each run's own interval is wide, the paired difference's is narrow.
    clin, juries = synthetic(noises={1: 1.0})
    rng = np.random.default_rng(5)
    nudged = juries.assign(run_id=2, score=juries["score"] + rng.normal(0, 0.05, len(juries)))
    table = version_agreement(clin, pd.concat([juries, nudged]), n_resamples=1000).set_index("run_id")
    own_width = table.loc[2, "boot_ci_high"] - table.loc[2, "boot_ci_low"]
    diff_width = table.loc[2, "diff_ci_high"] - table.loc[2, "diff_ci_low"]
    assert diff_width < own_width / 5


def test_per_criterion_blocks_follow_the_composite_when_asked():
    clin, juries = synthetic()
    table = version_agreement(clin, juries.assign(label=juries["run_id"].map({1: "prompt v1", 2: "prompt v2"})),
                              by_criterion=True, n_resamples=200)
    assert table["criterion"].tolist() == ["composite"] * 2 + [c for c in CRITERIA for _ in range(2)]
    assert table["label"].tolist()[:2] == ["prompt v1", "prompt v2"]
    row = table[(table["criterion"] == "accuracy") & (table["run_id"] == 2)].iloc[0]
    direct = pair_agreement(clinician_mean(clin, "accuracy"),
                            juries[(juries["run_id"] == 2) & (juries["criterion"] == "accuracy")]
                            .set_index("item_id")["score"]).iloc[0]
    assert abs(row["estimate"] - direct["estimate"]) < 1e-9


@pytest.mark.parametrize(("change", "message"), [
    (lambda c, j: (c, j.drop(columns="run_id")), "juries lack column\\(s\\) run_id"),
    (lambda c, j: (c, j.iloc[:0]), "no jury scores"),
    (lambda c, j: (c.iloc[:0], j), "no clinician ratings"),
    (lambda c, j: (c, pd.concat([j, j.iloc[:1]])), "has two scores for item"),
    (lambda c, j: (c, j.assign(score=np.where(j.index == 0, np.nan, j["score"]))), "missing or not finite"),
])
def test_bad_input_names_what_is_wrong(change, message):
    clin, juries = change(*synthetic(n=10))
    with pytest.raises(AgreementInputError, match=message):
        version_agreement(clin, juries, n_resamples=10)


def test_an_unknown_baseline_is_refused():
    clin, juries = synthetic(n=10)
    with pytest.raises(AgreementInputError, match="baseline run 7 is not among the compared runs \\(1, 2\\)"):
        version_agreement(clin, juries, baseline=7, n_resamples=10)


# --- from the database -------------------------------------------------------------------------------------

@pytest.fixture
def versions_db(engine):
    """30 items rated by two of three clinicians, and three jury runs: prompt v1 (a failed verdict), prompt v2
    (missing three items, closer to the clinicians) and the same judges' recorded scores."""
    study = make_study(engine, ["good"] * 30, name="v")
    rng = random.Random(3)
    with transaction(engine) as s:
        target = get_study(s, study)
        rubric = rubric_spec(s, target.rubric_id)
        users = [add_user(s, f"c{k}", "clinician", None) for k in range(3)]
        items = s.exec(select(Item).where(Item.study_id == target.id).order_by(Item.id)).all()
        truth = {i.id: rng.uniform(1.5, 4.5) for i in items}
        for n, item in enumerate(items):
            for user in (users[n % 3], users[(n + 1) % 3]):
                record_rating(s, item=item, rater=user, rubric=rubric,
                              scores={c: min(5, max(1, round(truth[item.id] + rng.gauss(0, 0.7)))) for c in CRITERIA})
        v2, _ = save_template_version(s, "medhelm", DEFAULT_TEMPLATE + "\nBe strict.\n", note="stricter")
        configs = [build_config(rubric, [LOCAL_A, LOCAL_B]), build_config(rubric, [LOCAL_A, LOCAL_B], template=v2)]
        run_ids = []
        for k, (config, noise) in enumerate(zip(configs, (1.2, 0.4), strict=True)):
            run = JuryRun(study_id=target.id, name=config.display_name(), source="litellm", config=config.to_dict(),
                          config_hash=config.config_hash, status="finished", finished_at=utcnow())
            s.add(run)
            s.flush()
            run_ids.append(run.id)
            for n, item in enumerate(items):
                if k == 1 and n < 3:
                    continue
                for judge in (LOCAL_A, LOCAL_B):
                    if k == 0 and n == 5 and judge == LOCAL_B:
                        s.add(JudgeVerdict(jury_run_id=run.id, item_id=item.id, judge=judge, status="failed",
                                           raw_response="no numbers", error="no JSON object in the answer"))
                        continue
                    scores = {c: min(5, max(1, round(truth[item.id] + rng.gauss(0, noise)))) for c in CRITERIA}
                    s.add(JudgeVerdict(jury_run_id=run.id, item_id=item.id, judge=judge, status="ok", scores=scores))
        s.add(JuryRun(study_id=target.id, name="never started", source="litellm", config=configs[0].to_dict(),
                      config_hash="ef" * 32, status="pending"))
    return {"engine": engine, "study": study, "runs": run_ids}


def direct_from_tables(engine, study: str, run_ids: list[int]) -> dict[int, pd.Series]:
    """The protocol computed straight from the Rating and JudgeVerdict rows, without the loader."""
    with Session(engine) as s:
        target = get_study(s, study)
        ratings = s.exec(select(Rating.item_id, User.username, Rating.criterion, Rating.score)
                         .join(User, User.id == Rating.rater_id).join(Item, Item.id == Rating.item_id)
                         .where(Item.study_id == target.id)).all()
        verdicts = {rid: s.exec(select(JudgeVerdict).where(JudgeVerdict.jury_run_id == rid,
                                                           JudgeVerdict.status == "ok")).all() for rid in run_ids}
    ratings = pd.DataFrame(ratings, columns=["item_id", "rater", "criterion", "score"])
    clin = ratings.groupby(["item_id", "rater"])["score"].mean().groupby("item_id").mean()
    clin.index = clin.index.astype(str)
    juries = {}
    for rid, rows in verdicts.items():
        flat = pd.DataFrame([(str(v.item_id), c, float(x)) for v in rows for c, x in v.scores.items()],
                            columns=["item_id", "criterion", "score"])
        per_criterion = flat.groupby(["item_id", "criterion"])["score"].mean().unstack()
        juries[rid] = per_criterion.dropna().mean(axis=1)
    return {"clinicians": clin, **juries}


def test_per_version_agreement_is_reproduced_from_the_stored_verdicts(versions_db):
    engine, study, (run1, run2) = versions_db["engine"], versions_db["study"], versions_db["runs"]
    with Session(engine) as s:
        inputs = load_version_inputs(s, get_study(s, study))
        table = study_version_agreement(s, get_study(s, study), n_resamples=500).set_index("run_id")
    assert [r.run_id for r in inputs.runs] == [run1, run2]  # the run without verdicts is left out
    assert table.loc[run2, "label"] == f"run {run2}: {LOCAL_A} + {LOCAL_B}; rubric medhelm v1; prompt medhelm v2"
    assert (table.loc[run1, "prompt_version"], table.loc[run2, "prompt_version"]) == (1, 2)
    assert table.loc[run1, "judges"] == (LOCAL_A, LOCAL_B)
    direct = direct_from_tables(engine, study, [run1, run2])
    common = sorted(set(direct["clinicians"].index) & set(direct[run1].index) & set(direct[run2].index))
    assert len(common) == 27 and (table["n_items"] == 27).all()
    assert (table.loc[run1, "n_items_run"], table.loc[run2, "n_items_run"]) == (30, 27)
    for rid in (run1, run2):
        expected = pair_agreement(direct["clinicians"].loc[common], direct[rid].loc[common]).iloc[0]
        for column in ("estimate", "ci_low", "ci_high", "pearson_r", "spearman_rho"):
            assert abs(table.loc[rid, column] - expected[column]) < 1e-9, column
    change = table.loc[run2]
    assert change["diff_ci_low"] <= change["diff"] <= change["diff_ci_high"]


def cli(engine, capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["--database-url", engine.url.render_as_string(hide_password=False), *args])
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_the_cli_compares_every_run_with_the_baseline(versions_db, capsys):
    engine, (run1, run2) = versions_db["engine"], versions_db["runs"]
    code, out, err = cli(engine, capsys, "agreement", "v", "--versions", "--resamples", "300", "--json")
    assert code == 0, err
    records = json.loads(out)
    assert [(r["run_id"], r["baseline"], r["prompt_version"]) for r in records] == [(run1, True, 1), (run2, False, 2)]
    assert records[0]["diff_ci_low"] is None and records[1]["diff_ci_method"].startswith("bootstrap-percentile")
    code, out, err = cli(engine, capsys, "agreement", "v", "--versions", "--baseline", str(run2), "--resamples",
                         "300", "-c", "accuracy")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("study v: jury-clinician agreement per jury run") and "on the 27 items" in lines[0]
    assert f"{run2} (baseline)" in out and "prompt medhelm v2" in out
    assert sum(1 for line in lines if " accuracy " in line) == 2 and "paired 95% interval" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--baseline", "99"], "has no jury run 99 with verdicts"),
    (["--jury-run", "1"], "leave out --jury-run"),
    (["--protocol", "full"], "leave out --protocol full"),
])
def test_cli_mistakes_with_versions_are_one_clear_line(versions_db, capsys, args, message):
    code, _, err = cli(versions_db["engine"], capsys, "agreement", "v", "--versions", *args)
    assert code == 1 and len(err.strip().splitlines()) == 1 and message in err


def test_a_baseline_without_versions_is_refused(versions_db, capsys):
    code, _, err = cli(versions_db["engine"], capsys, "agreement", "v", "--baseline", "1")
    assert code == 1 and "--baseline goes with --versions" in err


def test_the_papers_recorded_jury_is_a_version_with_its_0474(sqlite_engine, medhelm_ratings_csv):
    from medhelm_core.importers import import_paths
    from medhelm_core.studies import get_or_create_study

    with transaction(sqlite_engine) as s:
        study, _ = get_or_create_study(s, "mh")
        import_paths(s, study, [medhelm_ratings_csv], "medhelm-ratings")
    with Session(sqlite_engine) as s:
        table = study_version_agreement(s, get_study(s, "mh"), benchmarks=["aci_bench", "medi_qa"], n_resamples=200)
    (row,) = table.to_dict("records")
    assert round(row["estimate"], 3) == 0.474 and (round(row["ci_low"], 2), round(row["ci_high"], 2)) == (0.10, 0.69)
    assert row["n_items"] == 56 and row["source"] == "recorded" and row["label"].endswith("prompt not recorded")
