"""``medhelm agreement`` and ``medhelm icc``: the MedHELM figures from the command line, and clear failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medhelm_core.cli import main

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")

# Shrout & Fleiss (1979), Table 2: six targets rated by four judges.
SHROUT_FLEISS = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
SHROUT_FLEISS_ICC = {"ICC1": 0.17, "ICC2": 0.29, "ICC3": 0.71, "ICC1k": 0.44, "ICC2k": 0.62, "ICC3k": 0.91}


def medhelm(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEDHELM_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "medhelm_core", *args], capture_output=True, text=True, env=env, timeout=120
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI in this process (faster than a subprocess), as (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err


def one_error_line(code: int, err: str, message: str) -> None:
    lines = err.strip().splitlines()
    assert code != 0
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err


@pytest.fixture(scope="module")
def medhelm_db(tmp_path_factory: pytest.TempPathFactory, medhelm_ratings_csv: Path) -> str:
    """A fresh SQLite database holding MedHELM's released ratings, made with the CLI itself."""
    url = f"sqlite:///{tmp_path_factory.mktemp('agreement') / 'mh.db'}"
    for args in (["init"], ["import", "mh", str(medhelm_ratings_csv)]):
        result = medhelm(url, *args)
        assert result.returncode == 0, result.stderr
    return url


def pick(records: list[dict], comparison: str, benchmark: str = "pooled", criterion: str = "composite") -> dict:
    hits = [
        r
        for r in records
        if (r["comparison"], r["benchmark"], r["criterion"], r["method"], r["ci_method"])
        == (comparison, benchmark, criterion, "ICC3k", "F")
    ]
    assert len(hits) == 1, hits
    return hits[0]


def test_agreement_cli_reproduces_the_papers_jury_clinician_icc(medhelm_db: str) -> None:
    result = medhelm(medhelm_db, "agreement", "mh", "--benchmark", "aci_bench", "--benchmark", "medi_qa", "--json")
    assert result.returncode == 0, result.stderr
    assert "NaN" not in result.stdout  # NaN is not JSON: undefined figures are null
    records = json.loads(result.stdout)
    # MedHELM: ICC 0.474 (95% CI 0.10 to 0.69), aci_bench and medi_qa pooled.
    jury = pick(records, "jury-clinician")
    assert round(jury["estimate"], 3) == 0.474
    assert (round(jury["ci_low"], 2), round(jury["ci_high"], 2)) == (0.10, 0.69)
    assert jury["n_items"] == 56 and jury["n_available"] == 56
    # Koo & Li's bands are not printed for ICC(C,k) of two z-scored sides; the form is named instead.
    assert jury["reading"] == "" and jury["form"].startswith("ICC(C,k)")
    assert {r["benchmark"] for r in records} == {"aci_bench", "medi_qa", "pooled"}
    # medi_qa's best-sharing pair includes a clinician who gave every item the same score.
    constant = pick(records, "clinician-clinician", benchmark="medi_qa")
    assert constant["estimate"] is None and "same score to every item" in constant["note"]
    assert isinstance(constant["raters_used"], list)


def test_agreement_cli_prints_an_aligned_table(
    medhelm_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDHELM_DATABASE_URL", medhelm_db)
    code, out, err = run(capsys, "agreement", "mh", "-b", "aci_bench", "-b", "medi_qa")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("study mh: protocol medhelm, jury run 1") and "pooled = aci_bench, medi_qa" in lines[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("comparison"))
    assert lines[header].split()[:6] == ["comparison", "benchmark", "criterion", "method", "estimate", "95%"]
    body = lines[header + 2 : header + 2 + 3 * 4 * 5]
    assert all(len(line.split()) >= 13 for line in body)
    # Aligned: every row starts its estimate in the same column as the header.
    at = lines[header].index("estimate")
    assert all(line[at - 1] == " " for line in body)
    jury = next(line for line in body if line.split()[:3] == ["jury-clinician", "pooled", "composite"])
    assert "0.474  0.10 to 0.69" in jury and "56 of 56" in jury and "poor" not in jury
    one_way = next(line for line in body if line.split()[:4] == ["all", "clinicians", "pooled", "composite"])
    assert "ICC1_unbalanced" in one_way and "poor" in one_way  # Koo & Li apply to the raw-scale one-way ICC
    assert "n/a" in out and "Koo & Li" in out and "ICC3k = ICC(C,k)" in out


def test_agreement_cli_and_report_default_to_the_studys_saved_view(
    tmp_path: Path, medhelm_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without -b or -p, the CLI pools what the Agreement page opens on (the study's saved view), not everything."""
    from medhelm_core.db.engine import make_engine, transaction
    from medhelm_core.studies import get_study, update_settings

    copy = tmp_path / "mh.db"
    copy.write_bytes(Path(medhelm_db.removeprefix("sqlite:///")).read_bytes())
    url = f"sqlite:///{copy}"
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    code, out, _ = run(capsys, "agreement", "mh", "--json")
    assert code == 0 and round(pick(json.loads(out), "jury-clinician")["estimate"], 3) != 0.474  # every benchmark
    engine = make_engine(url)
    with transaction(engine) as session:
        update_settings(session, get_study(session, "mh"), agreement_benchmarks=["aci_bench", "medi_qa"])
    engine.dispose()
    code, out, err = run(capsys, "agreement", "mh")
    assert code == 0, err
    assert "protocol medhelm" in out.splitlines()[0] and "pooled = aci_bench, medi_qa" in out.splitlines()[0]
    code, out, _ = run(capsys, "agreement", "mh", "--json")
    assert round(pick(json.loads(out), "jury-clinician")["estimate"], 3) == 0.474
    code, out, _ = run(capsys, "agreement", "mh", "-b", "medi_qa", "--json")  # what is given wins
    assert {r["benchmark"] for r in json.loads(out)} == {"medi_qa", "pooled"}


def test_agreement_cli_full_protocol_is_seeded(
    medhelm_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDHELM_DATABASE_URL", medhelm_db)
    args = ["agreement", "mh", "--protocol", "full", "-b", "medi_qa", "-c", "accuracy", "--resamples", "200"]
    code, first, err = run(capsys, *args, "--seed", "3", "--json")
    assert code == 0, err
    _, again, _ = run(capsys, *args, "--seed", "3", "--json")
    _, other, _ = run(capsys, *args, "--seed", "4", "--json")
    assert first == again and first != other
    records = json.loads(first)
    # The seed drives the generalized intervals of absolute agreement (F intervals need none).
    gci = [r for r in records if r["comparison"] == "jury-clinician" and r["ci_method"] == "GCI (raters fixed)"]
    assert {r["method"] for r in gci} == {"ICC2", "ICC2k"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["agreement", "nostudy"], "no study named 'nostudy' (studies: mh)"),
        (["agreement", "mh", "--jury-run", "99"], "study 'mh' has no jury run 99 (its runs: 1)"),
        (["agreement", "mh", "-b", "mimic"], "benchmark(s) mimic have no ratings"),
        (["agreement", "mh", "-c", "safety"], "criterion/criteria safety not rated by clinicians"),
        (["agreement", "mh", "--protocol", "helm"], "--protocol 'helm' unknown"),
        (["agreement", "mh", "--resamples", "0"], "--resamples must be at least 1"),
    ],
)
def test_agreement_cli_failures_are_one_clear_line(
    medhelm_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setenv("MEDHELM_DATABASE_URL", medhelm_db)
    one_error_line(*run(capsys, *args)[::2], message)


def shrout_fleiss_long() -> pd.DataFrame:
    x = np.asarray(SHROUT_FLEISS, dtype=float)
    return pd.DataFrame(
        {
            "wine": np.repeat([f"w{i}" for i in range(6)], 4),
            "judge": np.tile(list("ABCD"), 6),
            "points": x.ravel(),
        }
    )


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "parquet"])
def test_icc_cli_prints_every_form_of_any_long_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    path = tmp_path / f"wine.{suffix}"
    long = shrout_fleiss_long()
    {
        "csv": lambda: long.to_csv(path, index=False),
        "jsonl": lambda: long.to_json(path, orient="records", lines=True),
        "parquet": lambda: long.to_parquet(path),
    }[suffix]()
    code, out, err = run(
        capsys, "icc", str(path), "--target", "wine", "--rater", "judge", "--score", "points", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["n_targets_used"], result["n_raters"]) == (6, 4)
    assert {r["type"]: round(r["icc"], 2) for r in result["icc"]} == SHROUT_FLEISS_ICC
    assert all(r["ci_low"] < r["icc"] < r["ci_high"] for r in result["icc"])


def test_icc_cli_text_drops_incomplete_targets_and_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wine.csv"
    extra = pd.DataFrame({"wine": ["w6", "w7"], "judge": ["A", "B"], "points": [3.0, None]})
    pd.concat([shrout_fleiss_long(), extra]).to_csv(path, index=False)
    code, out, err = run(capsys, "icc", str(path), "--target", "wine", "--rater", "judge", "--score", "points")
    assert code == 0, err
    assert "ICC over 6 targets x 4 raters; 2 of 8 targets dropped" in out and "1 row(s) without a score" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("ICC")}
    assert set(rows) == set(SHROUT_FLEISS_ICC)
    assert rows["ICC3k"][1] == "0.909" and rows["ICC3k"][2:5] == ["0.68", "to", "0.99"]


def test_icc_cli_with_no_usable_targets_gives_nan_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "blank.csv"
    path.write_text("item,rater,score\na,x,\nb,y,\n")
    code, out, err = run(capsys, "icc", str(path), "--target", "item", "--rater", "rater", "--score", "score", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert all(r["icc"] is None and "fewer than 3 items" in r["note"] for r in result["icc"])


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (None, ["--target", "wine"], "no.csv: no such file"),
        ("wine,judge,points\nw1,A,3\n", ["--target", "item"], "field 'item': no such column (given as --target)"),
        ("wine,judge,points\nw1,A,3\nw1,A,4\n", [], "rater 'A' scores target 'w1' more than once (lines 2, 3)"),
        ("wine,judge,points\nw1,A,3\nw2,A,high\n", [], "line 3, field 'points': not a finite number: 'high'"),
        ("wine,judge,points\nw1,,3\n", [], "line 2, field 'judge': empty value"),
    ],
    ids=["missing file", "missing column", "duplicate", "not a number", "empty rater"],
)
def test_icc_cli_names_the_file_and_column_at_fault(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, args: list[str], message: str
) -> None:
    path = tmp_path / ("ratings.csv" if content is not None else "no.csv")
    if content is not None:
        path.write_text(content)
    options = {"--target": "wine", "--rater": "judge", "--score": "points"}
    options.update(dict(zip(args[::2], args[1::2], strict=True)))
    code, _, err = run(capsys, "icc", str(path), *[part for pair in options.items() for part in pair])
    one_error_line(code, err, message)
    assert str(path) in err or "no.csv" in err


@pytest.mark.parametrize("command", ["agreement", "icc"])
def test_agreement_commands_have_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0 and "Usage" in out
