"""A real MedHELM run folder imports with its jury's verdicts (a recorded jury run) and HELM's own metrics.

The folder is tests/data/helm_medication_qa (a copy of ../shared/data/helm_medication_qa, see its README):
10 MedicationQA outputs of GPT-4o, each judged by gpt, llama and claude on three criteria.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO
from sqlmodel import Session, select
from support.helpers import refused_import, run_cli, table_counts

from medhelm_core.agreement.judges import judge_subset_agreement
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, MetricScore, Role, User
from medhelm_core.errors import ValidationError
from medhelm_core.figures import compute_agreement, load_dashboard_data
from medhelm_core.figures.jury_versions_data import study_version_agreement
from medhelm_core.frames import judge_scores_frame, jury_means, metric_scores_frame
from medhelm_core.importers import import_paths
from medhelm_core.importers.helm_jury import MISSING_VERDICT, NULL_VERDICT
from medhelm_core.jury.run_versions import run_versions
from medhelm_core.metrics import RougeSpec, compute_metrics
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_or_create_study, get_study

SUITE = REPO / "tests" / "data" / "helm_medication_qa" / "runs" / "TEST"
RUN = SUITE / "medication_qa"
SHARED = REPO.parent / "shared" / "data" / "helm_medication_qa" / "runs" / "TEST"
JUDGES = ("gpt", "llama", "claude")
CRITERIA = ("accuracy", "completeness", "clarity")
GPT = "openai/gpt-4o-2024-05-13"


def file_states(run: Path = RUN) -> list[dict]:
    return json.loads((run / "scenario_state.json").read_text(encoding="utf-8"))["request_states"]


def run_import(engine, paths, study="s", **options):
    with transaction(engine) as s:
        target, _ = get_or_create_study(s, study)
        return import_paths(s, target, paths, **options)


def copy_run(tmp_path: Path, edit=None) -> Path:  # noqa: ANN001 - edit: a function of the request states
    """A copy of the suite whose request states ``edit`` changed in place."""
    suite = tmp_path / "TEST"
    shutil.copytree(SUITE, suite)
    if edit is not None:
        path = suite / "medication_qa" / "scenario_state.json"
        state = json.loads(path.read_text(encoding="utf-8"))
        edit(state["request_states"])
        path.write_text(json.dumps(state), encoding="utf-8")
    return suite


def the_run(session: Session) -> JuryRun:
    return session.exec(select(JuryRun)).one()


def test_the_bundled_copy_equals_the_shared_folder_on_what_the_importer_reads():
    shared = next(SHARED.iterdir(), None) if SHARED.is_dir() else None
    if shared is None:
        pytest.skip("../shared/data/helm_medication_qa is not here (a clean clone)")
    for name in ("run_spec.json", "per_instance_stats.json"):
        assert json.loads((shared / name).read_text()) == json.loads((RUN / name).read_text())
    original = file_states(shared)
    for state in original:
        for completion in state["result"]["completions"]:
            completion["tokens"] = []
    assert original == file_states()


def test_the_jury_becomes_a_recorded_run_of_3_judges_10_items_3_criteria_with_the_files_scores(engine):
    report = run_import(engine, [SUITE])
    assert (report.items_created, report.verdicts_written, report.verdicts_failed) == (10, 30, 0)
    states = {s["instance"]["id"]: s for s in file_states()}
    with Session(engine) as s:
        run = the_run(s)
        verdicts = s.exec(select(JudgeVerdict, Item.instance_id).join(Item)).all()
    assert (run.source, run.status, run.name) == ("recorded", "recorded", "MedHELM jury (recorded), HELM suite TEST")
    assert (run.calls_done, run.calls_failed, run.config["judges"]) == (30, 0, list(JUDGES))
    assert len(verdicts) == 30 and {v.judge for v, _ in verdicts} == set(JUDGES)  # named as in the file
    for verdict, instance_id in verdicts:
        block = states[instance_id]["annotations"]["medication_qa"]
        said = block[verdict.judge]
        assert verdict.status == "ok"
        assert verdict.scores == {c: said[c]["score"] for c in CRITERIA}
        assert verdict.explanations == {c: said[c]["explanation"] for c in CRITERIA}
        assert verdict.prompt == block["prompt_text"] and json.loads(verdict.raw_response) == said
    labels = run_versions(run)
    assert labels.recorded and labels.prompt_label == "HELM's, kept with each verdict"
    assert "gpt + llama + claude" in labels.short_label


def test_re_importing_changes_nothing(engine):
    run_import(engine, [SUITE])
    before = table_counts(engine)
    again = run_import(engine, [SUITE])
    assert (again.items_created, again.items_updated, again.verdicts_written, again.metric_scores_written) == (0,) * 4
    assert (again.items_unchanged, again.verdicts_unchanged, again.metric_scores_unchanged) == (10, 30, 40)
    assert table_counts(engine) == before


def test_the_jury_mean_of_each_item_is_the_mean_of_its_judges(sqlite_engine):
    run_import(sqlite_engine, [SUITE])
    with Session(sqlite_engine) as s:
        ids = dict(s.exec(select(Item.id, Item.instance_id)).all())
        means = jury_means(judge_scores_frame(s, the_run(s).id))
    assert len(means) == 30 and (means["n_judges"] == 3).all()
    for state in file_states():
        block = state["annotations"]["medication_qa"]
        for criterion in CRITERIA:
            row = means[(means["item_id"].map(ids) == state["instance"]["id"]) & (means["criterion"] == criterion)]
            expected = sum(block[j][criterion]["score"] for j in JUDGES) / 3
            assert row["score"].item() == pytest.approx(expected, abs=1e-12)


def test_helms_rouge_l_equals_the_apps_own_and_both_are_kept_with_their_origin(sqlite_engine):
    run_import(sqlite_engine, [SUITE])
    with transaction(sqlite_engine) as s:
        study = get_study(s, "s")
    compute_metrics(sqlite_engine, study, [RougeSpec("rougeL", use_stemmer=True)])
    with Session(sqlite_engine) as s:
        scores = metric_scores_frame(s, study)
    origin = scores["settings"].map(lambda settings: settings.get("source", "app"))
    rouge = scores[scores["metric"] == "rougeL_f"].assign(origin=origin).pivot(index="item_id", columns="origin",
                                                                               values="value")
    assert len(rouge) == 10 and rouge.notna().all().all()
    assert (rouge["helm"] - rouge["app"]).abs().max() <= 1e-12
    helm_bert = scores[(origin == "helm") & (scores["metric"] == "bertscore_f1")]
    assert len(helm_bert) == 10 and {s["model"] for s in helm_bert["settings"]} == {"distilbert-base-uncased"}
    stats = json.loads((RUN / "per_instance_stats.json").read_text())
    from_file = {e["instance_id"]: s["mean"] for e in stats for s in e["stats"] if s["name"]["name"] == "rouge_l"}
    with Session(sqlite_engine) as s:
        helm = {iid: value for iid, value, settings in s.exec(
            select(Item.instance_id, MetricScore.value, MetricScore.settings).join(Item)
            .where(MetricScore.metric == "rougeL_f")).all() if settings.get("source") == "helm"}
    assert helm == from_file


def test_a_verdict_in_prose_a_missing_judge_and_a_null_one_are_stored_failed_and_counted(sqlite_engine, tmp_path):
    prose = "The answer is accurate and clear, though it could say more about timing. I would rate it highly."

    def edit(states):
        states[2]["annotations"]["medication_qa"]["claude"] = prose
        del states[4]["annotations"]["medication_qa"]["llama"]
        states[5]["annotations"]["medication_qa"]["gpt"] = None

    report = run_import(sqlite_engine, [copy_run(tmp_path, edit)])
    assert (report.verdicts_written, report.verdicts_failed) == (30, 3)
    states = file_states()
    with Session(sqlite_engine) as s:
        run = the_run(s)
        failed = {(iid, v.judge): v for v, iid in s.exec(select(JudgeVerdict, Item.instance_id).join(Item)
                                                          .where(JudgeVerdict.status == "failed")).all()}
        means = jury_means(judge_scores_frame(s, run.id))
        ids = dict(s.exec(select(Item.instance_id, Item.id)).all())
    assert (run.calls_done, run.calls_failed) == (30, 3)
    assert set(failed) == {(states[2]["instance"]["id"], "claude"), (states[4]["instance"]["id"], "llama"),
                           (states[5]["instance"]["id"], "gpt")}
    said = failed[(states[2]["instance"]["id"], "claude")]
    assert said.raw_response == prose and said.scores == {} and "no JSON object" in said.error
    assert failed[(states[4]["instance"]["id"], "llama")].error == MISSING_VERDICT
    assert failed[(states[5]["instance"]["id"], "gpt")].error == NULL_VERDICT
    n_judges = means.groupby("item_id")["n_judges"].max()
    assert n_judges[ids[states[2]["instance"]["id"]]] == 2 and n_judges[ids[states[0]["instance"]["id"]]] == 3


def test_judges_are_named_as_told_as_the_run_spec_says_or_as_in_the_file(sqlite_engine, tmp_path):
    with pytest.raises(ValidationError, match="'gtp', which no jury annotation"):
        run_import(sqlite_engine, [SUITE], judge_names={"gtp": GPT})
    run_import(sqlite_engine, [SUITE], judge_names={"gpt": GPT})
    with Session(sqlite_engine) as s:
        assert the_run(s).config["judge_names"] == {"gpt": GPT, "llama": "llama", "claude": "claude"}
        assert {v.judge for v in s.exec(select(JudgeVerdict)).all()} == {GPT, "llama", "claude"}
    before = table_counts(sqlite_engine)
    with pytest.raises(ValidationError, match="names judge 'gpt' 'openai/gpt-4o-2024-05-13', this import names it"):
        run_import(sqlite_engine, [SUITE])  # the same run, with the file's names: refused, nothing changed
    assert table_counts(sqlite_engine) == before
    suite = copy_run(tmp_path)
    spec_path = suite / "medication_qa" / "run_spec.json"
    spec = json.loads(spec_path.read_text())
    spec["annotators"][0]["args"] = {"annotator_models": {"llama": {"model_name": "meta/llama-3.3-70b-instruct",
                                                                    "model_deployment": "x/llama"}}}
    spec_path.write_text(json.dumps(spec))
    run_import(sqlite_engine, [suite], study="from-spec")
    with Session(sqlite_engine) as s:
        run = s.exec(select(JuryRun).where(JuryRun.study_id == get_study(s, "from-spec").id)).one()
        assert run.config["judges"] == ["gpt", "meta/llama-3.3-70b-instruct", "claude"]


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda st: st[1].__setitem__("annotations", ["gpt"]), "request_states[1].annotations",
         "instance 'id585': expected an object of annotations, found a list"),
        (lambda st: st[3]["annotations"].__setitem__("medication_qa", "5/5/5"),
         "request_states[3].annotations.medication_qa", "instance 'id417': expected the jury's object"),
        (lambda st: st[6]["annotations"]["medication_qa"].__setitem__("prompt_text", 42),
         "request_states[6].annotations.medication_qa.prompt_text", "instance 'id500': expected text, found a number"),
        (lambda st: st[0]["annotations"]["medication_qa"].__setitem__("prompt_text", "a\x00b"),
         "request_states[0].annotations.medication_qa.prompt_text", "instance 'id14': holds a NUL character"),
        (lambda st: st[0]["annotations"]["medication_qa"].__setitem__("gpt\x1b[31m", {}),
         "request_states[0].annotations.medication_qa (a judge's key)", "instance 'id14': holds the control"),
        (lambda st: st[9]["annotations"]["medication_qa"].__setitem__(" ", {}),
         "request_states[9].annotations.medication_qa (a judge's key)", "instance 'id589': a judge's key is empty"),
    ],
)
def test_a_malformed_annotation_block_names_the_file_the_instance_and_the_field(sqlite_engine, tmp_path, edit, field,
                                                                                  message):
    error = refused_import(sqlite_engine, [copy_run(tmp_path, edit)])
    assert error.path.endswith("scenario_state.json") and error.field == field
    assert str(error).startswith(f"{error.path}, field '{field}': {message}")


def test_a_bad_helm_metric_names_the_file_and_field(sqlite_engine, tmp_path):
    suite = copy_run(tmp_path)
    path = suite / "medication_qa" / "per_instance_stats.json"
    stats = json.loads(path.read_text())
    stats[1]["stats"][2]["mean"] = "high"  # instance id585's rouge_l
    path.write_text(json.dumps(stats))
    error = refused_import(sqlite_engine, [suite])
    assert error.path == str(path) and error.field == "[1].stats[2].mean"
    assert "instance 'id585': rouge_l is 'high', not a finite number" in str(error)


def test_the_agreement_engine_reads_the_recorded_run_as_it_reads_a_live_one(sqlite_engine):
    run_import(sqlite_engine, [SUITE])
    with transaction(sqlite_engine) as s:
        study = get_study(s, "s")
        rubric = rubric_spec(s, study.rubric_id)
        raters = [User(username=f"dr{n}", role=Role.clinician.value) for n in range(2)]
        s.add_all(raters)
        s.flush()
        for n, item in enumerate(s.exec(select(Item).order_by(Item.id)).all()):
            for k, rater in enumerate(raters):
                level = 1 + (n * 3 + k) % 5
                record_rating(s, item=item, rater=rater, rubric=rubric, scores=dict.fromkeys(CRITERIA, level))
    with Session(sqlite_engine) as s:
        data = load_dashboard_data(s, study)
        versions = study_version_agreement(s, study, n_resamples=200)
    assert data.jury_run.recorded and data.jury_run.judges == tuple(sorted(JUDGES)) and data.jury_run.n_failed == 0
    assert set(data.long.loc[data.long["rater_kind"] == "judge", "rater_id"]) == set(JUDGES)
    table = compute_agreement(data.long, n_resamples=200)
    jury = table[(table["comparison"] == "jury-clinician") & (table["benchmark"] == "pooled")].set_index("criterion")
    assert (jury["n_items"] == 10).all()
    subsets = judge_subset_agreement(data.long).set_index("subset")
    assert {f"judge: {j}" for j in JUDGES} | {f"without: {j}" for j in JUDGES} <= set(subsets.index)
    assert (subsets.loc[[f"judge: {j}" for j in JUDGES], "n_items"] == 10).all()
    # One jury, three readings of it: the headline, the all-judges subset and the run as a version agree.
    assert subsets.loc["all judges", "estimate"] == pytest.approx(jury.loc["composite", "estimate"], abs=1e-12)
    assert versions["source"].tolist() == ["recorded"] and versions["n_items"].tolist() == [10]
    assert versions["estimate"].item() == pytest.approx(jury.loc["composite", "estimate"], abs=1e-12)


def test_the_cli_imports_a_helm_folder_with_its_jury_and_names_a_judge(sqlite_engine, capsys):
    url = sqlite_engine.url.render_as_string(hide_password=False)
    result = run_cli(capsys, url, "import", "cli", str(SUITE), "--judge-name", f"gpt={GPT}")
    assert result.returncode == 0, result.stderr
    assert "recorded jury scores: 30 written, 0 unchanged" in result.stdout
    assert "recorded metric scores (HELM's own): 40 written, 0 unchanged" in result.stdout
    bad = run_cli(capsys, url, "import", "cli", str(SUITE), "--judge-name", "gpt")
    assert bad.returncode != 0 and "--judge-name expects KEY=NAME" in bad.stderr
