"""The verdict's and the bias panel's tables as people read them: named columns, n/a for what is undefined.

:mod:`medhelm_core.verdict` returns tidy frames (``ci_low``, ``winning_rate``, NaN where a test could not run);
the Verdict page shows them through these, so that a missing figure reads ``n/a`` and an interval reads
``0.03 to 0.31``, as on every other page (:mod:`medhelm_core.format`).
"""

from __future__ import annotations

import pandas as pd

from medhelm_core.format import intervals, number

__all__ = ["bias_display", "calibration_display", "verdict_display"]

_TESTS = {"alt_test": "Alternative Annotator Test", "equivalence": "equivalence (non-inferiority side)"}


def verdict_display(table: pd.DataFrame) -> pd.DataFrame:
    """One row per benchmark, rater and test: the verdict, the data behind it and the figures, as text.

    Examples
    --------
    >>> row = {"benchmark": "pooled", "rater_id": "jury", "test": "alt_test", "verdict": "NOT ENOUGH DATA",
    ...        "n_items": 50, "n_clinicians": 0, "winning_rate": float("nan"), "advantage_probability": float("nan"),
    ...        "percentile": float("nan"), "estimate": float("nan"), "ci_low": float("nan"),
    ...        "ci_high": float("nan"), "p": float("nan"), "reason": "too few"}
    >>> verdict_display(pd.DataFrame([row])).iloc[0].to_dict()["winning rate"]
    'n/a'
    """
    return pd.DataFrame({
        "benchmark": table["benchmark"],
        "judge": table["rater_id"],
        "test": table["test"].map(lambda t: _TESTS.get(t, t)),
        "verdict": table["verdict"],
        "items": table["n_items"],
        "clinicians tested": table["n_clinicians"],
        "winning rate": [number(v, 2) for v in table["winning_rate"]],
        "advantage probability": [number(v, 2) for v in table["advantage_probability"]],
        "percentile among clinicians": [number(v, 0) for v in table["percentile"]],
        "estimate": [number(v, 2) for v in table["estimate"]],
        "CI": intervals(table["ci_low"], table["ci_high"]),
        "p": [number(v, 3) for v in table["p"]],
    })


def bias_display(bias: pd.DataFrame) -> pd.DataFrame:
    """The bias panel's effects (leniency, self-preference, verbosity) with their 95% intervals, as text.

    Examples
    --------
    >>> bias_display(pd.DataFrame([{"rater_id": "jury", "effect": "leniency", "estimate": 0.1716,
    ...     "ci_low": 0.0348, "ci_high": 0.3085, "n_items": 56, "note": ""}])).iloc[0, :4].tolist()
    ['jury', 'leniency', '0.17', '0.03 to 0.31']
    """
    return pd.DataFrame({
        "judge": bias["rater_id"],
        "effect": bias["effect"],
        "estimate (points)": [number(v, 2) for v in bias["estimate"]],
        "95% CI": intervals(bias["ci_low"], bias["ci_high"]),
        "items": bias["n_items"],
        "note": bias["note"],
    })


def calibration_display(calibration: pd.DataFrame) -> pd.DataFrame:
    """The calibration map: a jury score, the clinicians' expected score and its 95% band, as text.

    Examples
    --------
    >>> row = {"machine": 4.0, "expected": 4.0667, "low": 3.416, "high": 4.4704}
    >>> calibration_display(pd.DataFrame([row])).iloc[0].tolist()
    ['4.0', '4.07', '3.42 to 4.47']
    """
    return pd.DataFrame({
        "jury score": [number(v, 1) for v in calibration["machine"]],
        "clinicians expected": [number(v, 2) for v in calibration["expected"]],
        "95% band": intervals(calibration["low"], calibration["high"]),
    })
