"""``medhelm study``, ``medhelm plan``, ``medhelm gold`` and ``medhelm quality``: design a study and watch its raters.

- ``medhelm study show|set STUDY``: the study's settings (speed threshold, test-retest, adjudication).
- ``medhelm plan``: how many items a study needs for the ICC interval wanted (Zou 2012), optionally kept as
  the study's plan.
- ``medhelm gold import|list|clear STUDY``: gold items and their expected score ranges.
- ``medhelm quality STUDY``: speed flags, gold accuracy and test-retest agreement per clinician.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.errors import ValidationError
from medhelm_core.studies import get_study, plan_progress, update_settings

if TYPE_CHECKING:  # the heavy modules are imported by the commands that use them: `--help` stays quick
    import pandas as pd

study_app = typer.Typer(help="A study's settings: speed threshold, test-retest, adjudication.", no_args_is_help=True)
gold_app = typer.Typer(help="Gold items: expected score ranges that measure each clinician's accuracy.",
                       no_args_is_help=True)
app.add_typer(study_app, name="study")
app.add_typer(gold_app, name="gold")


def _settings(study) -> dict:  # noqa: ANN001 - a Study
    return {
        "study": study.name,
        "overlap": study.overlap,
        "speed_threshold_seconds": study.speed_threshold_seconds,
        "retest_share": study.retest_share,
        "retest_gap": study.retest_gap,
        "adjudication_threshold": study.adjudication_threshold,
        "plan": study.plan,
    }


def _settings_text(settings: dict) -> str:
    plan = settings["plan"]
    lines = [
        f"study {settings['study']}: {settings['overlap']} clinicians per item",
        f"  speed threshold: {settings['speed_threshold_seconds']:g} s",
        "  test-retest: " + (f"{settings['retest_share']:.0%} of rated items, after at least "
                             f"{settings['retest_gap']} other items" if settings["retest_share"] else "off"),
        "  adjudication: " + (f"at {settings['adjudication_threshold']} points apart"
                              if settings["adjudication_threshold"] is not None else "off"),
        "  plan: " + (f"{plan['items']} items rated by {plan.get('clinicians') or plan['raters']} clinicians"
                      if plan else "none"),
    ]
    return "\n".join(lines)


@study_app.command("show")
def show_cmd(ctx: typer.Context, name: str = typer.Argument(..., help="Study name."),
             as_json: bool = JsonOption) -> None:
    """Print the study's settings."""
    with transaction(engine_for(ctx)) as session:
        settings = _settings(get_study(session, name))
    emit(settings, as_json, _settings_text(settings))


@study_app.command("set")
def set_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Study name."),
    speed_threshold: float | None = typer.Option(None, "--speed-threshold", help="Seconds; a faster first rating is "
                                                 "flagged."),
    retest_share: float | None = typer.Option(None, "--retest-share", help="Share of each clinician's rated items "
                                              "shown again later, unannounced (0 turns test-retest off; at most 0.5)."),
    retest_gap: int | None = typer.Option(None, "--retest-gap", help="At least this many other items before a "
                                          "repeat."),
    adjudication_threshold: str | None = typer.Option(None, "--adjudication-threshold", help="Points of "
                                                      "disagreement that send an item to adjudication, or 'off'."),
    as_json: bool = JsonOption,
) -> None:
    """Change the study's settings; each change is recorded in the audit trail."""
    with transaction(engine_for(ctx)) as session:
        study = get_study(session, name)
        changes: dict = {}
        if speed_threshold is not None:
            changes["speed_threshold_seconds"] = speed_threshold
        if retest_share is not None:
            changes["retest_share"] = retest_share
        if retest_gap is not None:
            changes["retest_gap"] = retest_gap
        if adjudication_threshold is not None:
            value = adjudication_threshold.strip().lower()
            if value == "off":
                changes["adjudication_threshold"] = None
            elif value.isdigit():
                changes["adjudication_threshold"] = int(value)
            else:
                raise ValidationError(f"--adjudication-threshold takes a whole number of points or 'off', not "
                                      f"{adjudication_threshold!r}")
        if changes:
            update_settings(session, study, actor="cli", **changes)
        settings = _settings(study)
    emit(settings, as_json, _settings_text(settings))


@app.command("plan")
def plan_cmd(
    ctx: typer.Context,
    form: str = typer.Option("headline", "--form", help="The figure to plan for: headline (the Agreement page's "
                             "ICC(C,k) of the jury beside the mean clinician) or icc1 (MedHELM's own plan: one-way "
                             "ICC(1) of one rating, every clinician)."),
    icc: float = typer.Option(0.75, "--icc", help="The ICC you expect, in the form planned for."),
    raters: int = typer.Option(2, "--raters", "-k", help="Clinicians per item."),
    width: float | None = typer.Option(0.2, "--width", help="Widest 95% interval you accept."),
    lower_bound: float | None = typer.Option(None, "--lower-bound", help="Instead of --width: the lower limit must "
                                             "exceed this."),
    assurance: float = typer.Option(0.8, "--assurance", help="Probability that the study meets the target."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the interval."),
    study: str | None = typer.Option(None, "--study", help="Compare with this study's items (and --save the plan)."),
    save: bool = typer.Option(False, "--save", help="Keep the plan as the study's, to track progress against it."),
    as_json: bool = JsonOption,
) -> None:
    """How many items a study needs for the ICC interval wanted (after Zou 2012, computed exactly), for the form
    the study will report."""
    from medhelm_core.agreement.planning import plan_for_form  # scipy.stats: paid for by this command only

    if save and not study:
        raise ValidationError("--save needs --study NAME")
    plan = plan_for_form(form, icc, raters, width=None if lower_bound is not None else width,
                         lower_bound=lower_bound, confidence=confidence, assurance=assurance)
    result: dict = {"items": plan.items, "raters": plan.raters, "form": form, "design": plan.design,
                    "measure": plan.measure, "expected_width": plan.expected_width,
                    "achieved_assurance": plan.achieved_assurance, "method": plan.method}
    text = (f"{plan.items} items, each rated by {raters} clinicians. {plan.method}" if form == "icc1" else
            f"{plan.items} items, each scored by the jury and rated by {raters} clinicians. {plan.method}")
    if study:
        with transaction(engine_for(ctx)) as session:
            found = get_study(session, study)
            if save:
                update_settings(session, found, plan=plan, actor="cli")
            progress = plan_progress(session, found, raters)
        result["study"] = {"name": study, "items": progress.items_in_study, "complete_items": progress.complete_items,
                           "saved": save}
        text += (f"\nstudy {study}: {progress.items_in_study} items (gold items aside), {progress.complete_items} "
                 f"already rated by {raters} or more clinicians" + ("; plan saved" if save else ""))
    emit(result, as_json, text)


@gold_app.command("import")
def gold_import_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Study name."),
    path: Path = typer.Argument(..., help="CSV, JSONL or Parquet: item (item_id, or benchmark + instance_id + model), "
                                "criterion, low and high (or score), optional note."),
    as_json: bool = JsonOption,
) -> None:
    """Set the expected score ranges of gold items (all or nothing); run `medhelm assign` after to give each
    gold item to every clinician."""
    from medhelm_core.rating import gold

    with transaction(engine_for(ctx)) as session:
        report = gold.import_gold(session, get_study(session, name), path, actor="cli")
    emit(report, as_json, f"{report.rows} gold ranges read: {report.created} new, {report.updated} changed, "
         f"{report.unchanged} unchanged; study {name} has {report.gold_items} gold items")


@gold_app.command("list")
def gold_list_cmd(ctx: typer.Context, name: str = typer.Argument(..., help="Study name."),
                  as_json: bool = JsonOption) -> None:
    """Print the study's gold ranges."""
    from medhelm_core.rating import gold

    with transaction(engine_for(ctx)) as session:
        frame = gold.gold_ranges_frame(session, get_study(session, name))
    emit(frame.to_dict("records"), as_json, frame.to_string(index=False) if not frame.empty else "no gold items")


@gold_app.command("clear")
def gold_clear_cmd(ctx: typer.Context, name: str = typer.Argument(..., help="Study name."),
                   yes: bool = typer.Option(False, "--yes", help="Confirm."), as_json: bool = JsonOption) -> None:
    """Remove every gold range of the study (its items become ordinary items; ratings are kept)."""
    if not yes:
        raise ValidationError("this removes every gold range of the study; add --yes to confirm")
    from medhelm_core.rating import gold

    with transaction(engine_for(ctx)) as session:
        removed = gold.clear_gold(session, get_study(session, name), actor="cli")
    emit({"study": name, "removed": removed}, as_json, f"{removed} gold ranges removed")


def _table(frame: pd.DataFrame) -> str:
    return frame.to_string(index=False, float_format=lambda v: f"{v:.3f}") if not frame.empty else "  (none yet)"


@app.command("quality")
def quality_cmd(ctx: typer.Context, name: str = typer.Argument(..., help="Study name."),
                as_json: bool = JsonOption) -> None:
    """Rater quality: fast submissions, gold accuracy and test-retest agreement per clinician."""
    from medhelm_core.rating.quality import study_rater_quality

    with transaction(engine_for(ctx)) as session:
        quality = study_rater_quality(session, get_study(session, name))
    result = {
        "study": quality.study,
        "threshold_seconds": quality.threshold_seconds,
        "gold_items": quality.n_gold_items,
        "retest_pairs": quality.n_retest_pairs,
        "speed": quality.speed.to_dict("records"),
        "gold": quality.gold.to_dict("records"),
        "retest": quality.retest.to_dict("records"),
    }
    text = "\n".join([
        f"Speed (first submissions faster than {quality.threshold_seconds:g} s are flagged):", _table(quality.speed),
        f"Gold accuracy ({quality.n_gold_items} gold items):", _table(quality.gold),
        f"Test-retest ({quality.n_retest_pairs} repeated items; ICC(A,1) of each clinician with themselves):",
        _table(quality.retest),
    ])
    emit(result, as_json, text)
