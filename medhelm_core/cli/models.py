"""``medhelm models STUDY``: each model's score by the clinicians, the jury and clinician-anchored, the rankings
and how many more clinician ratings each model needs."""

from __future__ import annotations

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for


@app.command("models")
def models_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    criterion: str = typer.Option("composite", "--criterion", help="The criterion the text shows (JSON has all)."),
    jury_run: int | None = typer.Option(None, "--jury-run", help="Jury run id (default: the newest with verdicts)."),
    half_width: float = typer.Option(0.1, "--half-width", help="The clinician-scale 95% interval half-width to plan "
                                     "more ratings for."),
    resamples: int = typer.Option(2000, "--resamples", help="Bootstrap resamples of instances."),
    seed: int = typer.Option(0, "--seed", help="Seed of the resampling."),
    as_json: bool = JsonOption,
) -> None:
    """Model scores anchored on clinicians (PPI++), rankings (Kendall's tau-b, win rates) and ratings still needed."""
    from sqlmodel import Session

    from medhelm_core.errors import ValidationError
    from medhelm_core.figures.model_figures import (
        ModelOptions,
        anchored_display,
        json_records,
        needed_display,
        reading,
        study_model_figures,
        tau_display,
        win_rates_display,
    )
    from medhelm_core.format import number
    from medhelm_core.studies import get_study

    options = ModelOptions(jury_run_id=jury_run, half_width=half_width, n_resamples=resamples, seed=seed)
    with Session(engine_for(ctx)) as session:
        figs = study_model_figures(session, get_study(session, study), options)
    if criterion not in ("composite", *figs.criteria):
        raise ValidationError(f"criterion {criterion!r} unknown; use composite or one of {', '.join(figs.criteria)}")
    result = {
        "study": study,
        "jury": figs.jury_label,
        "recorded_jury": figs.recorded_jury,
        "options": {"jury_run": jury_run, "half_width": half_width, "resamples": resamples, "seed": seed,
                    "confidence": options.confidence},
        "messages": figs.messages,
        "reading": reading(figs, criterion),
        **{name: json_records(frame) for name, frame in figs.tables().items() if name != "model_item_scores"},
    }
    lines = [f"study {study}: {len(figs.models)} models, {figs.design['rated'].sum()} of {len(figs.design)} items "
             f"rated by clinicians. {figs.jury_note}"]
    lines += [f"note: {m}" for m in figs.messages]
    lines += ["", *reading(figs, criterion)]
    sections = [
        (f"Each model ({criterion}, pooled): clinicians, jury, clinician-anchored", anchored_display(figs.anchored,
                                                                                                     criterion)),
        (f"Kendall's tau-b against the clinicians' order ({criterion})", tau_display(figs.rankings.tau, criterion)),
        ("Mean win rate (HELM)", win_rates_display(figs.rankings.win_rates, criterion)),
        (f"More clinician ratings for +/- {number(half_width, 2)} ({criterion})", needed_display(figs.needed,
                                                                                                criterion)),
    ]
    for title, table in sections:
        if not table.empty:
            lines += ["", title, table.drop(columns=["note"], errors="ignore").to_string(index=False)]
            if "note" in table and "model" in table:
                lines += [f"  {model}: {note}" for model, note in zip(table["model"], table["note"], strict=True)
                          if note]
    emit(result, as_json, "\n".join(lines))
