"""``medhelm assign``: give a study's items to clinicians, balanced, keeping what is assigned."""

from __future__ import annotations

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.rating.assignment import assign_balanced, study_clinicians
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
    as_json: bool = JsonOption,
) -> None:
    """Assign each item to OVERLAP distinct clinicians; loads differ by at most one, pairs spread evenly."""
    with transaction(engine_for(ctx)) as session:
        plan = assign_balanced(session, get_study(session, study), overlap, clinicians or None)
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
