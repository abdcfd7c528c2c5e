"""``medhelm assign``: give a study's items to clinicians, balanced, keeping what is assigned."""

from __future__ import annotations

import typer
from sqlmodel import Session

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.rating.assignment import assign_in_steps, study_clinicians
from medhelm_core.studies import get_study


@app.command("assign")
def assign_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    overlap: int | None = typer.Option(None, "--overlap", "-n", help="Clinicians per item (default: the study's)."),
    clinicians: list[str] = typer.Option(
        [], "--clinician", "-c",
        help="Only these clinicians (repeatable; default: every active clinician but the raters a ratings import "
             "recorded)."),
    where_uncertain: int | None = typer.Option(
        None, "--where-uncertain", metavar="N",
        help="Instead: send the next N ratings to the models and benchmarks whose clinician-anchored intervals are "
             "widest, items drawn at random within each (their probabilities recorded), first in the queues."),
    jury_run: int | None = typer.Option(None, "--jury-run", help="With --where-uncertain: the jury run behind the "
                                        "intervals (default: the newest with verdicts)."),
    as_json: bool = JsonOption,
) -> None:
    """Assign each item to OVERLAP distinct clinicians; loads differ by at most one, pairs spread evenly.

    With --where-uncertain N, assign the next N ratings where the models' scores are least certain instead."""
    if where_uncertain is not None:
        _where_uncertain(ctx, study, where_uncertain, clinicians, jury_run, as_json)
        return
    engine = engine_for(ctx)
    with Session(engine) as session:
        study_id = get_study(session, study).id
    # in steps: clinicians rating meanwhile wait for one step at most, never for the whole assignment
    plan = assign_in_steps(engine, study_id, overlap, clinicians or None)
    with Session(engine) as session:
        names = {u.id: u.username for u in study_clinicians(session, clinicians or None)}
    loads = {names.get(k, str(k)): v for k, v in plan.loads.items()}
    pair_counts = list(plan.pairs.values())
    result = {
        "study": study,
        "added": len(plan.new),
        "loads": loads,
        "pairs_min": min(pair_counts, default=0),
        "pairs_max": max(pair_counts, default=0),
    }
    text = (
        f"{len(plan.new)} assignments added; load per clinician {min(loads.values(), default=0)} to "
        f"{max(loads.values(), default=0)}; items shared per pair of clinicians {result['pairs_min']} to "
        f"{result['pairs_max']}"
    )
    emit(result, as_json, text)


def _where_uncertain(ctx: typer.Context, study: str, n: int, clinicians: list[str], jury_run: int | None,
                     as_json: bool) -> None:
    from medhelm_core.figures.model_figures import json_records
    from medhelm_core.format import number
    from medhelm_core.rating.where_uncertain import assign_where_uncertain

    with transaction(engine_for(ctx)) as session:
        plan = assign_where_uncertain(session, get_study(session, study), n, clinicians or None, jury_run_id=jury_run)
    given = plan.cells[plan.cells["n_next"] > 0] if not plan.cells.empty else plan.cells
    result = {"study": study, "asked": n, "added": len(plan.new), "loads": plan.loads, "note": plan.note,
              "cells": json_records(given[["model", "benchmark", "status", "n_rated", "n_available", "half_width",
                                           "n_next", "draw_probability"]]) if not given.empty else []}
    lines = [f"{len(plan.new)} of {n} ratings assigned where the clinician-anchored intervals are widest"
             + (f" ({plan.note})" if plan.note else "")]
    for cell in result["cells"]:
        lines.append(f"  {cell['model']} on {cell['benchmark']}: {cell['n_next']} of {cell['n_available']} unrated "
                     f"items drawn (probability {number(cell['draw_probability'], 3)}; half-width now "
                     f"{number(cell['half_width'], 2)})")
    lines.append("open load per clinician: " + ", ".join(f"{k} {v}" for k, v in plan.loads.items()))
    emit(result, as_json, "\n".join(lines))
