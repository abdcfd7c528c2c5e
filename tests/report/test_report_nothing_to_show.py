"""`medhelm report` when every figure is n/a (issue 19, fix 4): the report is written and says there is nothing to
show, the command exits 0, and a chart Vega cannot draw ("Vega-Lite to PNG conversion failed") becomes a line in the
PDF instead of a traceback and a folder without a PDF."""

from __future__ import annotations

import vl_convert
from pypdf import PdfReader
from support.helpers import run_cli

HEADER = ("rater_id,specialty,team,entry_id,instance_id,dataset_name,model_key,user_label,accuracy,completeness,"
          "clarity,llm_accuracy,llm_completeness,llm_clarity")


def test_a_study_whose_every_figure_is_na_gets_a_report_saying_so_and_exit_0(tmp_path, capsys, monkeypatch):
    # Two clinicians and the jury each give every item the same score: no ICC, r or kappa can be computed.
    rows = [f"{rater},Nurse,Team 1,{i},id{i},medi_qa,model_x,Model A,4,4,4,4,4,4"
            for rater in ("rater_a", "rater_b") for i in range(4)]
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("\n".join([HEADER, *rows]) + "\n")
    url = f"sqlite:///{tmp_path / 'flat.db'}"
    assert run_cli(capsys, url, "init").returncode == 0
    assert run_cli(capsys, url, "import", "flat", str(ratings), "--format", "medhelm-ratings").returncode == 0

    def cannot_draw(spec, *args, **kwargs):  # what vl-convert raises for a chart with no size or scale
        raise ValueError("Vega-Lite to PNG conversion failed:\nError: SVG has an invalid size")

    monkeypatch.setattr(vl_convert, "vegalite_to_png", cannot_draw)
    out = tmp_path / "report"
    done = run_cli(capsys, url, "report", "flat", "--out", str(out))
    assert done.returncode == 0 and done.stderr == ""
    assert "nothing to show" in done.stdout
    pdf = " ".join(page.extract_text() for page in PdfReader(out / "report.pdf").pages)
    assert "Nothing to show yet" in pdf and "nothing to draw for this selection" in pdf
    assert "Nothing to show yet" in (out / "report.html").read_text()
    assert (out / "manifest.json").is_file()
