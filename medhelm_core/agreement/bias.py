"""Where a judge goes wrong: leniency, self-preference, verbosity, use of the scale, and a calibration map.

Every figure reads :func:`judge_pairs`: one row per (machine rater, item) with the rater's score beside the
mean of the item's clinicians, ``difference = score - clinician_mean`` on the raw scale. Effects are
ordinary least squares fits (statsmodels) with HC3 heteroscedasticity-robust errors:

- **leniency**: ``difference ~ 1``, the mean difference with its CI;
- **self-preference**: ``difference ~ same_vendor``, the extra difference when the judge's vendor wrote the
  output (vendors from litellm / HELM model names, :func:`model_vendor`, overridable);
- **verbosity**: ``difference ~ length / 100``, the change in difference per 100 words of output.

:func:`scale_use` sets each rater's score distribution beside the clinicians'; :func:`calibration_map` is a
monotone (scikit-learn ``IsotonicRegression``) map from the jury score to the clinicians' expected score,
with its cross-validated error and a bootstrap band over items.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from medhelm_core.agreement.contract import require_columns, round_half_away
from medhelm_core.agreement.icc import icc_matrix
from medhelm_core.errors import AgreementInputError

PAIR_COLUMNS = ["rater_id", "rater_kind", "item_id", "benchmark", "model", "score", "clinician_mean", "n_clinicians",
                "difference"]
EFFECT_COLUMNS = ["rater_id", "effect", "estimate", "ci_low", "ci_high", "n_items", "note"]
#: name fragments that give a model's vendor when the name has no ``vendor/`` or ``vendor_`` prefix
VENDOR_HINTS: dict[str, str] = {"gpt": "openai", "o1": "openai", "o3": "openai", "claude": "anthropic",
                                "llama": "meta", "gemini": "google", "gemma": "google", "palm": "google",
                                "mistral": "mistralai", "mixtral": "mistralai", "qwen": "qwen",
                                "deepseek": "deepseek"}
KNOWN_VENDORS = {"openai", "anthropic", "meta", "meta-llama", "google", "mistralai", "qwen", "deepseek",
                 "microsoft", "cohere", "amazon", "azure", "bedrock", "vertex_ai", "together_ai"}
_ALIASES = {"meta-llama": "meta", "vertex_ai": "google", "azure": "openai"}


def model_vendor(name: str, overrides: Mapping[str, str] | None = None) -> str:
    """The vendor of a model from its litellm or HELM name (``""`` when unknown); ``overrides`` win.

    Examples
    --------
    >>> from medhelm_core.agreement.bias import model_vendor
    >>> [model_vendor(n) for n in ["openai/gpt-4o", "openai_gpt-4o-2024-05-13", "anthropic/claude-3-7-sonnet",
    ...                            "meta/llama-3.3-70b-instruct", "gemini-1.5-pro", "acme-7b"]]
    ['openai', 'openai', 'anthropic', 'meta', 'google', '']
    """
    if overrides and name in overrides:
        return overrides[name]
    low = name.strip().lower()
    for sep in ("/", "_"):
        head = low.split(sep, 1)[0]
        if sep in low and head in KNOWN_VENDORS:
            # litellm routes through hosts (bedrock/anthropic.claude..., azure/gpt-4o): the model decides
            if head in {"bedrock", "together_ai"}:
                break
            return _ALIASES.get(head, head)
    tokens = re.split(r"[/_.\-\s]+", low)
    for hint, vendor in VENDOR_HINTS.items():
        if any(token.startswith(hint) for token in tokens):
            return vendor
    return ""


def judge_pairs(scores: pd.DataFrame) -> pd.DataFrame:
    """Each machine rater's score beside the item's clinician mean: :data:`PAIR_COLUMNS`.

    ``scores`` has one score per (item, rater) (:func:`~medhelm_core.agreement.rater_scores`, ``model``
    optional); machine raters are those of kind ``jury`` or ``judge``; items without a clinician are left out.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.bias import judge_pairs
    >>> s = pd.DataFrame({"item_id": [1, 1, 1], "rater_id": ["a", "b", "jury"], "benchmark": ["x"] * 3,
    ...                   "rater_kind": ["clinician", "clinician", "jury"], "score": [3, 4, 5.0]})
    >>> judge_pairs(s)[["rater_id", "clinician_mean", "difference"]].to_dict("records")
    [{'rater_id': 'jury', 'clinician_mean': 3.5, 'difference': 1.5}]
    """
    require_columns(scores, ("item_id", "rater_id", "rater_kind", "benchmark", "score"), "scores")
    clin = scores[scores["rater_kind"] == "clinician"].groupby("item_id")["score"].agg(["mean", "size"])
    clin.columns = ["clinician_mean", "n_clinicians"]
    machine = scores[scores["rater_kind"].isin(["jury", "judge"])].copy()
    if "model" not in machine.columns:
        machine["model"] = ""
    out = machine.merge(clin, left_on="item_id", right_index=True, how="inner")
    out["difference"] = out["score"] - out["clinician_mean"]
    return out[PAIR_COLUMNS].reset_index(drop=True)


def _ols(frame: pd.DataFrame, formula: str, term: str, alpha: float) -> tuple[float, float, float]:
    # statsmodels and scikit-learn on first use: they are tens of MB of every page's process (the agreement engine
    # imports this module), and only the bias panel and the calibration map use them.
    import statsmodels.formula.api as smf

    fit = smf.ols(formula, data=frame).fit(cov_type="HC3")
    low, high = fit.conf_int(alpha=alpha).loc[term]
    return float(fit.params[term]), float(low), float(high)


def leniency(pairs: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Mean ``score - clinician_mean`` per rater with an HC3 CI: :data:`EFFECT_COLUMNS` (``effect='leniency'``).

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.bias import leniency
    >>> p = pd.DataFrame({"rater_id": ["jury"] * 4, "difference": [0.5, 1.0, 1.5, 1.0]})
    >>> round(float(leniency(p)["estimate"].iloc[0]), 2)
    1.0
    """
    rows = []
    for rater, part in pairs.groupby("rater_id", sort=True):
        if len(part) < 3:
            rows.append([rater, "leniency", float(part["difference"].mean()), np.nan, np.nan, len(part),
                         "fewer than 3 items"])
            continue
        est, low, high = _ols(part, "difference ~ 1", "Intercept", alpha)
        rows.append([rater, "leniency", est, low, high, len(part), ""])
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def self_preference(pairs: pd.DataFrame, alpha: float = 0.05, vendors: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Extra difference when the judge's vendor wrote the output (``difference ~ same_vendor``, HC3).

    Judges only (the jury mixes vendors); a judge whose vendor wrote none or all of the outputs, or whose
    vendor is unknown, gets NaN with a note. ``vendors`` maps model or judge names to vendors.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.bias import self_preference
    >>> p = pd.DataFrame({"rater_id": ["openai/gpt-4o"] * 6, "rater_kind": ["judge"] * 6,
    ...                   "model": ["openai/gpt-4"] * 3 + ["meta/llama-3"] * 3,
    ...                   "difference": [1.0, 1.2, 0.8, 0.1, -0.1, 0.0]})
    >>> round(float(self_preference(p)["estimate"].iloc[0]), 2)
    1.0
    """
    rows = []
    for rater, part in pairs[pairs["rater_kind"] == "judge"].groupby("rater_id", sort=True):
        own = model_vendor(str(rater), vendors)
        same = part["model"].astype(str).map(lambda m, own=own: model_vendor(m, vendors) == own)
        note = ("vendor unknown: name it in vendors" if not own else
                f"no output by {own}'s models" if not same.any() else
                f"every output is by {own}'s models" if same.all() else "")
        if note or len(part) < 4:
            rows.append([rater, "self_preference", np.nan, np.nan, np.nan, len(part), note or "fewer than 4 items"])
            continue
        est, low, high = _ols(part.assign(same_vendor=same.astype(float)), "difference ~ same_vendor",
                              "same_vendor", alpha)
        rows.append([rater, "self_preference", est, low, high, len(part), f"{int(same.sum())} outputs by {own}"])
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def verbosity(pairs: pd.DataFrame, lengths: pd.Series, alpha: float = 0.05) -> pd.DataFrame:
    """Change of ``difference`` per 100 words of output (``difference ~ length``, HC3) per rater.

    ``lengths`` maps ``item_id`` to the output's length in words.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.bias import verbosity
    >>> p = pd.DataFrame({"rater_id": ["jury"] * 4, "item_id": [1, 2, 3, 4], "difference": [0.0, 0.5, 1.0, 1.5]})
    >>> round(float(verbosity(p, pd.Series([100, 200, 300, 400], index=[1, 2, 3, 4]))["estimate"].iloc[0]), 2)
    0.5
    """
    rows = []
    data = pairs.assign(length=pairs["item_id"].map(lengths) / 100.0).dropna(subset=["length"])
    for rater, part in data.groupby("rater_id", sort=True):
        if len(part) < 4 or part["length"].nunique() < 2:
            rows.append([rater, "verbosity", np.nan, np.nan, np.nan, len(part), "too few items or lengths"])
            continue
        est, low, high = _ols(part, "difference ~ length", "length", alpha)
        rows.append([rater, "verbosity", est, low, high, len(part), "per 100 words"])
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def scale_use(scores: pd.DataFrame, levels: Sequence[float] = (1, 2, 3, 4, 5)) -> pd.DataFrame:
    """Each rater kind's (clinicians pooled) and machine rater's share of scores at each level, and top share.

    Scores between levels (means) are rounded halves away from zero. Columns: ``rater``, one per level,
    ``top_share`` (share at the top level), ``mean``, ``n``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.bias import scale_use
    >>> s = pd.DataFrame({"rater_id": ["a", "b", "jury", "jury"], "rater_kind": ["clinician"] * 2 + ["jury"] * 2,
    ...                   "score": [4, 5, 5, 5.0]})
    >>> scale_use(s).set_index("rater")["top_share"].to_dict()
    {'clinicians': 0.5, 'jury': 1.0}
    """
    who = scores["rater_id"].where(scores["rater_kind"] != "clinician", "clinicians")
    keep = scores["rater_kind"].isin(["clinician", "jury", "judge"])
    data = pd.DataFrame({"rater": who[keep], "level": round_half_away(scores.loc[keep, "score"]),
                         "score": scores.loc[keep, "score"].astype(float)})
    shares = pd.crosstab(data["rater"], data["level"], normalize="index")
    shares = shares.reindex(columns=[float(v) for v in levels], fill_value=0.0)
    shares.columns = [f"{v:g}" for v in levels]
    out = shares.assign(top_share=shares[f"{levels[-1]:g}"], mean=data.groupby("rater")["score"].mean(),
                        n=data.groupby("rater").size())
    order = ["clinicians", *sorted(r for r in out.index if r != "clinicians")]
    return out.reindex([r for r in order if r in out.index]).rename_axis("rater").reset_index()


def calibration_map(machine: np.ndarray, clinician: np.ndarray, grid: Sequence[float] = (1, 2, 3, 4, 5), *,
                    n_boot: int = 200, folds: int = 5, alpha: float = 0.05, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """A monotone map from the machine score to the clinicians' expected score, with a bootstrap band.

    Parameters
    ----------
    machine, clinician : array_like
        Per item: the jury (or judge) score and the clinicians' mean.
    grid : sequence of float
        Machine scores at which the map is read.
    n_boot, folds, alpha, seed : int, int, float, int
        Bootstrap resamples of items, cross-validation folds, band level, random seed.

    Returns
    -------
    table : pandas.DataFrame
        ``machine``, ``expected``, ``low``, ``high``: "jury 4.2 reads as clinicians about 3.6 (3.3 to 3.9)".
    fit : dict
        ``cv_rmse`` (out-of-fold error of the map), ``raw_rmse`` (error of the machine score as it is), ``n``.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.bias import calibration_map
    >>> x = np.linspace(1, 5, 40); table, fit = calibration_map(x, x - 1 + 0.0 * x, n_boot=20)
    >>> table["expected"].round(1).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0]
    """
    x = np.asarray(machine, dtype=float)
    y = np.asarray(clinician, dtype=float)
    if x.shape != y.shape or len(x) < max(folds, 5):
        raise AgreementInputError(f"the calibration map needs at least {max(folds, 5)} items with both scores")
    lo, hi = float(np.min(y)), float(np.max(y))
    from sklearn.isotonic import IsotonicRegression  # on first use, as statsmodels in mean_effects
    from sklearn.model_selection import KFold

    def fit_on(idx: np.ndarray) -> IsotonicRegression:
        return IsotonicRegression(y_min=lo, y_max=hi, out_of_bounds="clip").fit(x[idx], y[idx])

    oof = np.empty_like(y)
    for train, test in KFold(folds, shuffle=True, random_state=seed).split(x):
        oof[test] = fit_on(train).predict(x[test])
    at = np.asarray(grid, dtype=float)
    rng = np.random.default_rng(seed)
    boots = np.array([fit_on(rng.integers(0, len(x), len(x))).predict(at) for _ in range(n_boot)])
    table = pd.DataFrame({"machine": at, "expected": fit_on(np.arange(len(x))).predict(at),
                          "low": np.quantile(boots, alpha / 2, axis=0),
                          "high": np.quantile(boots, 1 - alpha / 2, axis=0)})
    stats = {"cv_rmse": float(np.sqrt(np.mean((oof - y) ** 2))), "raw_rmse": float(np.sqrt(np.mean((x - y) ** 2))),
             "n": len(x)}
    return table, stats


def bias_panel(pairs: pd.DataFrame, lengths: pd.Series | None = None, alpha: float = 0.05,
               vendors: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Leniency, self-preference and (with ``lengths``) verbosity of every machine rater: :data:`EFFECT_COLUMNS`.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.bias import bias_panel
    >>> p = pd.DataFrame({"rater_id": ["jury"] * 4, "rater_kind": ["jury"] * 4, "item_id": [1, 2, 3, 4],
    ...                   "model": ["m"] * 4, "difference": [0.5, 1.0, 1.5, 1.0]})
    >>> bias_panel(p)["effect"].tolist()
    ['leniency']
    """
    parts = [leniency(pairs, alpha), self_preference(pairs, alpha, vendors)]
    if lengths is not None:
        parts.append(verbosity(pairs, lengths, alpha))
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=EFFECT_COLUMNS)


def bias_sentences(effects: pd.DataFrame, scale: pd.DataFrame | None = None,
                   calibration: pd.DataFrame | None = None) -> list[str]:
    """The bias panel in plain words: one sentence per effect, then the use of the scale and the map.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.bias import EFFECT_COLUMNS, bias_sentences
    >>> e = pd.DataFrame([["jury", "leniency", 0.25, 0.1, 0.39, 74, ""]], columns=EFFECT_COLUMNS)
    >>> bias_sentences(e)[0]
    'jury scores 0.25 points above the clinicians on average (95% CI 0.10 to 0.39): lenient.'
    """
    out = []
    for r in effects.itertuples():
        if not np.isfinite(r.ci_low):
            out.append(f"{r.rater_id}: no {r.effect.replace('_', '-')} figure ({r.note or 'not enough items'}).")
            continue
        ci = f"(95% CI {r.ci_low:.2f} to {r.ci_high:.2f})"
        clear = r.ci_low > 0 or r.ci_high < 0
        if r.effect == "leniency":
            side = "above" if r.estimate >= 0 else "below"
            word = ("lenient" if r.estimate > 0 else "severe") if clear else "no clear leniency or severity"
            out.append(f"{r.rater_id} scores {abs(r.estimate):.2f} points {side} the clinicians on average {ci}: "
                       f"{word}.")
        elif r.effect == "self_preference":
            word = "favours its own vendor's outputs" if clear and r.estimate > 0 else "no clear self-preference"
            out.append(f"{r.rater_id} is {r.estimate:+.2f} points more lenient on its own vendor's outputs {ci} "
                       f"({r.note}): {word}.")
        else:
            word = ("favours longer outputs" if r.estimate > 0 else "favours shorter outputs") if clear else \
                "no clear length bias"
            out.append(f"{r.rater_id}'s excess over the clinicians changes by {r.estimate:+.2f} points per 100 words "
                       f"of output {ci}: {word}.")
    if scale is not None and not scale.empty and "clinicians" in set(scale["rater"]):
        base = scale.set_index("rater")
        for rater, row in base.drop(index="clinicians").iterrows():
            out.append(f"{rater} gives the top score {row['top_share']:.0%} of the time, the clinicians "
                       f"{base.loc['clinicians', 'top_share']:.0%}.")
    if calibration is not None and not calibration.empty:
        read = "; ".join(f"jury {r.machine:g} reads as clinicians about {r.expected:.1f} ({r.low:.1f} to {r.high:.1f})"
                         for r in calibration.itertuples())
        out.append(f"Calibration map: {read}.")
    return out


SELF_CONSISTENCY_COLUMNS = ["judge", "n_items", "n_samples", "icc", "ci_low", "ci_high", "share_identical", "note"]


def self_consistency(samples: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """How well each judge agrees with itself over repeated samples: :data:`SELF_CONSISTENCY_COLUMNS`.

    ``samples`` is :func:`medhelm_core.frames.jury.judge_scores_frame` with ``samples=True``: one row per judge,
    item, sample and criterion (``judge``, ``item_id``, ``criterion``, ``sample``, ``score``; ``status``, when
    present, keeps the ``ok`` rows). Per judge, the targets are its (item, criterion) pairs scored by all of its
    k samples (items with a failed sample are left out), the raters its samples, and

    - ``icc``, ``ci_low``, ``ci_high``: the one-way ICC(1) of the k samples (samples are interchangeable
      draws, so the one-way model) with its F-based interval, from :func:`medhelm_core.agreement.icc.icc_matrix`;
    - ``share_identical``: the share of items on which all k samples gave the same score on every criterion.

    A judge with one sample per item has ``n_samples`` 1, NaN figures and a note saying so.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.bias import self_consistency
    >>> s = pd.DataFrame({"judge": ["a"] * 8, "item_id": [1, 1, 2, 2, 3, 3, 4, 4], "criterion": ["acc"] * 8,
    ...                   "sample": [0, 1] * 4, "score": [1, 1, 3, 4, 5, 5, 2, 2]})
    >>> row = self_consistency(s).iloc[0]
    >>> round(float(row.icc), 3), float(row.share_identical), int(row.n_items)
    (0.96, 0.75, 4)
    """
    require_columns(samples, ("judge", "item_id", "criterion", "sample", "score"))
    ok = samples if "status" not in samples.columns else samples[samples["status"] == "ok"]
    ok = ok.dropna(subset=["criterion", "score"])
    rows = []
    for judge, own in ok.groupby("judge", sort=True):
        wide = own.pivot_table(index=["item_id", "criterion"], columns="sample", values="score", aggfunc="first")
        k = wide.shape[1]
        # Keep the items every sample scored on every criterion.
        complete = wide.notna().all(axis=1).groupby(level="item_id").all()
        wide = wide[wide.index.get_level_values("item_id").isin(complete[complete].index)]
        n_items = int(wide.index.get_level_values("item_id").nunique())
        row = {"judge": judge, "n_items": n_items, "n_samples": k, "icc": np.nan, "ci_low": np.nan,
               "ci_high": np.nan, "share_identical": np.nan, "note": ""}
        if k < 2:
            row["note"] = "one sample per item: self-consistency not measured (run the jury with samples >= 2)"
        elif n_items == 0:
            row["note"] = "no item has all its samples scored"
        else:
            same = (wide.nunique(axis=1) == 1).groupby(level="item_id").all()
            row["share_identical"] = float(same.mean())
            one = icc_matrix(wide.to_numpy(dtype=float), confidence).set_index("type").loc["ICC1"]
            row.update(icc=float(one["icc"]), ci_low=float(one["ci_low"]), ci_high=float(one["ci_high"]),
                       note=str(one["note"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=SELF_CONSISTENCY_COLUMNS)


def self_consistency_sentences(table: pd.DataFrame | None) -> list[str]:
    """:func:`self_consistency` in plain words; a table that is None or holds only one-sample judges says
    ``self-consistency: not measured (run the jury with samples >= 2)``.

    Examples
    --------
    >>> from medhelm_core.agreement.bias import self_consistency_sentences
    >>> self_consistency_sentences(None)
    ['self-consistency: not measured (run the jury with samples >= 2)']
    """
    if table is None or table.empty or not (table["n_samples"] >= 2).any():
        return ["self-consistency: not measured (run the jury with samples >= 2)"]
    out = []
    for r in table[table["n_samples"] >= 2].itertuples():
        if not np.isfinite(r.icc):
            out.append(f"{r.judge}: self-consistency over {r.n_samples} samples not estimable "
                       f"({r.note or 'too few items'}).")
            continue
        ci = (f"95% CI {r.ci_low:.2f} to {r.ci_high:.2f}" if np.isfinite(r.ci_low) and np.isfinite(r.ci_high)
              else "CI undefined")
        out.append(f"{r.judge} agrees with itself over {r.n_samples} samples with ICC(1) {r.icc:.2f} ({ci}, "
                   f"{r.n_items} items); all samples identical on {r.share_identical:.0%} of items.")
    return out
