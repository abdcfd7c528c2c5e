"""May this jury stand in for a clinician? The Alternative Annotator Test and an equivalence test.

Both read one score per (item, rater) (a criterion or the composite: :func:`~medhelm_core.agreement.rater_scores`)
and compare one machine rater (the jury mean or one judge) with the clinicians.

**The Alternative Annotator Test** (Calderon, Reichart and Dror, ACL 2025, "The Alternative Annotator Test for
LLM-as-a-Judge"; definitions as in the authors' reference code, github.com/nitaytech/AltTest). For each
clinician ``j`` (left out in turn), on each item ``i`` that ``j`` rated and at least one other clinician
rated, the alignment of a rater's score ``x`` with the remaining clinicians ``R`` is the paper's score for
continuous and ordinal annotations, the negative root mean squared distance ``-sqrt(mean_k (x - h_k)^2)``.
The judge's indicator is ``W_f = 1`` when its alignment is at least clinician ``j``'s, ``j``'s indicator
``W_h = 1`` when ``j``'s is at least the judge's (a tie counts for both). The paired one-sided t-test of
``H0: mean(W_h - W_f) >= epsilon`` against ``H1: mean(W_h - W_f) < epsilon`` (scipy's ``ttest_1samp`` of the
differences against ``epsilon``, ``alternative='less'``) asks whether the judge is at least as good a
representative of the others as ``j``, up to the cost-benefit margin ``epsilon`` (the authors suggest 0.2 for
experts, 0.15 skilled, 0.1 crowd workers). The p-values are corrected across clinicians by
Benjamini-Yekutieli (statsmodels ``multipletests(method='fdr_by')``) at level ``alpha``; the **winning rate**
is the share of clinicians whose null is rejected and the judge **passes** when it is at least 0.5. The
**average advantage probability** is the mean over clinicians of ``mean(W_f)``.

Choices made here (the paper leaves them open): a clinician is tested only with at least
``min_shared_items`` such items (the reference code's default, 30); the test needs at least
``min_clinicians`` clinicians so tested (the paper asks for three or more) and at least ``min_items`` items
rated by two or more clinicians and the judge (the paper asks for 50-100). When the differences do not vary
(every item the same outcome) the t statistic is undefined; the p-value is then 0 when the mean lies below
``epsilon`` and 1 otherwise.

**The equivalence test** (two one-sided tests, statsmodels ``ttost_paired``): on each item with two or more
clinicians, ``a_i`` is the judge's mean absolute distance to the clinicians and ``b_i`` the clinicians' mean
absolute distance to each other (over pairs). For a judge that rates like one more clinician both have the
same expectation. The figures are the mean of ``a - b`` in score points with its ``1 - 2 alpha`` confidence
interval and the TOST p-value for ``(-delta, delta)``. The verdict asks the decision's question, whether the
judge is *no farther* from the clinicians than they are from each other, up to ``delta``: PASS when the
interval's upper end lies below ``delta`` (the upper one-sided test rejects at ``alpha``). A judge that is
*closer* to the clinicians than they are to one another (a mean of judges averages out noise, as a mean of
clinicians would) passes; the sentence says whether it is also equivalent (the whole interval within
``+-delta``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import stats

from medhelm_core.agreement.contract import rater_scores, require_columns, validate_long
from medhelm_core.agreement.scopes import benchmark_scopes, chosen_benchmarks
from medhelm_core.errors import AgreementInputError

PASS, FAIL, NOT_ENOUGH = "PASS", "FAIL", "NOT ENOUGH DATA"
TESTS = ("alt_test", "equivalence")
CLINICIAN_COLUMNS = ["clinician", "n_items", "align_judge", "align_clinician", "rho_judge", "rho_clinician",
                     "mean_difference", "t", "p", "p_adjusted", "rejected"]


@dataclass(frozen=True)
class VerdictProtocol:
    """The acceptance protocol, fixed before the results are seen (stored with the study as plain data).

    Examples
    --------
    >>> from medhelm_core.agreement.verdict import VerdictProtocol
    >>> p = VerdictProtocol.from_dict({"epsilon": 0.15})
    >>> p.epsilon, p.alpha, VerdictProtocol.from_dict(p.to_dict()) == p
    (0.15, 0.05, True)
    """

    tests: tuple[str, ...] = TESTS
    epsilon: float = 0.2
    delta: float = 0.25
    alpha: float = 0.05
    min_items: int = 50
    min_clinicians: int = 3
    min_shared_items: int = 30
    criterion: str = "composite"

    def __post_init__(self) -> None:
        unknown = [t for t in self.tests if t not in TESTS]
        if unknown or not self.tests:
            raise AgreementInputError(f"unknown test(s) {', '.join(unknown) or '(none)'}; use {', '.join(TESTS)}")
        if not 0 <= self.epsilon < 1:
            raise AgreementInputError(f"epsilon must lie in [0, 1), got {self.epsilon}")
        if not self.delta > 0:
            raise AgreementInputError(f"delta must be a positive number of score points, got {self.delta}")
        if not 0 < self.alpha < 0.5:
            raise AgreementInputError(f"alpha must lie in (0, 0.5), got {self.alpha}")
        if self.min_clinicians < 2 or self.min_items < 2 or self.min_shared_items < 2:
            raise AgreementInputError("min_items, min_clinicians and min_shared_items must each be at least 2")

    def describe(self) -> str:
        """The protocol in one line, for pages, the CLI and the report.

        Examples
        --------
        >>> from medhelm_core.agreement.verdict import VerdictProtocol
        >>> VerdictProtocol().describe()[:50]
        'tests alt_test + equivalence, epsilon 0.2, delta 0'
        """
        return ", ".join(f"{k} {' + '.join(v) if isinstance(v, list) else v}" for k, v in self.to_dict().items())

    def to_dict(self) -> dict[str, Any]:
        """The protocol as JSON-ready data."""
        out = asdict(self)
        out["tests"] = list(self.tests)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> VerdictProtocol:
        """A protocol from stored or typed data; unknown keys and bad values raise :class:`AgreementInputError`."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise AgreementInputError(
                f"unknown protocol setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        try:
            if "tests" in data:
                tests = data["tests"]
                data["tests"] = tuple(tests.split(",") if isinstance(tests, str) else tests)
            for name in ("epsilon", "delta", "alpha"):
                if name in data:
                    data[name] = float(data[name])
            for name in ("min_items", "min_clinicians", "min_shared_items"):
                if name in data:
                    data[name] = int(data[name])
        except (TypeError, ValueError) as exc:
            raise AgreementInputError(f"protocol setting has a bad value: {exc}") from None
        return cls(**data)


@dataclass(frozen=True)
class AltTestResult:
    """The Alt-Test's outcome for one judge: ``verdict``, its figures and, when NOT ENOUGH DATA, why."""

    verdict: str
    winning_rate: float
    advantage_probability: float
    n_items: int
    clinicians: pd.DataFrame
    reasons: tuple[str, ...] = ()

    @property
    def percentile(self) -> float:
        """HealthBench's standing: the share of tested clinicians whose mean alignment with the others is no
        better than the judge's on the same items (each clinician scored against the rest)."""
        tested = self.clinicians.dropna(subset=["p"])
        if tested.empty:
            return float("nan")
        return float((tested["align_judge"] >= tested["align_clinician"]).mean())


def _wide(scores: pd.DataFrame, judge: str) -> tuple[pd.DataFrame, NDArray[np.float64]]:
    """The clinicians' scores (items x clinicians, NaN where not rated) on the items the judge scored and two or
    more clinicians rated, and the judge's scores on those items."""
    require_columns(scores, ("item_id", "rater_id", "rater_kind", "score"), "scores")
    machine = scores[scores["rater_id"] == judge].set_index("item_id")["score"]
    if machine.empty:
        raise AgreementInputError(f"rater {judge!r} has no scores here")
    clin = scores[(scores["rater_kind"] == "clinician") & scores["item_id"].isin(machine.index)]
    wide = clin.set_index(["item_id", "rater_id"])["score"].unstack("rater_id").sort_index()
    wide = wide[wide.notna().sum(axis=1) >= 2]
    return wide, machine.loc[wide.index].to_numpy(dtype=float)


def alt_test(scores: pd.DataFrame, judge: str, epsilon: float = 0.2, alpha: float = 0.05, *, min_items: int = 50,
             min_clinicians: int = 3, min_shared_items: int = 30) -> AltTestResult:
    """The Alternative Annotator Test of one machine rater against the clinicians (see the module note).

    Parameters
    ----------
    scores : pandas.DataFrame
        One score per (item, rater): ``item_id``, ``rater_id``, ``rater_kind``, ``score``.
    judge : str
        The ``rater_id`` tested (``"jury"`` or a judge).
    epsilon, alpha : float
        The cost-benefit margin and the false discovery rate of the Benjamini-Yekutieli correction.
    min_items, min_clinicians, min_shared_items : int
        The enough-data rules: items rated by the judge and two or more clinicians; clinicians tested;
        such items per tested clinician.

    Returns
    -------
    AltTestResult
        ``clinicians`` has one row per clinician (:data:`CLINICIAN_COLUMNS`), untested ones with NaN figures.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.verdict import alt_test
    >>> rows = [(i, r, "clinician", s) for i, row in enumerate([(3, 3, 4), (2, 2, 2), (5, 4, 4), (1, 2, 1)])
    ...         for r, s in zip("abc", row)] + [(i, "jury", "jury", s) for i, s in enumerate([3, 2, 4, 1])]
    >>> res = alt_test(pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "score"]), "jury",
    ...                min_items=2, min_clinicians=3, min_shared_items=2)
    >>> res.verdict, res.advantage_probability
    ('FAIL', 1.0)
    """
    clin, machine = _wide(scores, judge)
    n_items = len(clin)
    values = clin.to_numpy(dtype=float)
    rows = []
    for k, j in enumerate(clin.columns):
        rated = ~np.isnan(values[:, k])
        if rated.sum() < min_shared_items:
            rows.append([j, int(rated.sum()), *([np.nan] * 8), False])
            continue
        others = np.delete(values[rated], k, axis=1)
        h = values[rated, k][:, None]
        f = machine[rated][:, None]
        # the paper's -RMSE alignment with the remaining clinicians (NaN: a clinician who did not rate the item)
        align_h = -np.sqrt(np.nanmean((h - others) ** 2, axis=1))
        align_f = -np.sqrt(np.nanmean((f - others) ** 2, axis=1))
        w_f = (align_f >= align_h).astype(float)
        w_h = (align_h >= align_f).astype(float)
        d = w_h - w_f
        if np.ptp(d) == 0:
            t, p = np.nan, 0.0 if d.mean() < epsilon else 1.0
        else:
            test = stats.ttest_1samp(d, epsilon, alternative="less")
            t, p = float(test.statistic), float(test.pvalue)
        rows.append([j, int(rated.sum()), align_f.mean(), align_h.mean(), w_f.mean(), w_h.mean(), d.mean(), t, p,
                     np.nan, False])
    table = pd.DataFrame(rows, columns=CLINICIAN_COLUMNS)
    tested = table["p"].notna()
    if tested.any():
        # statsmodels on first use: the pages that never decide a verdict (Agreement, Rate) need not hold it
        from statsmodels.stats.multitest import multipletests

        rejected, adjusted, _, _ = multipletests(table.loc[tested, "p"].to_numpy(), alpha=alpha, method="fdr_by")
        table.loc[tested, "p_adjusted"] = adjusted
        table.loc[tested, "rejected"] = rejected
    table["rejected"] = table["rejected"].astype(bool)
    n_tested = int(tested.sum())
    winning = float(table.loc[tested, "rejected"].mean()) if n_tested else float("nan")
    advantage = float(table.loc[tested, "rho_judge"].mean()) if n_tested else float("nan")
    reasons = []
    if n_items < min_items:
        reasons.append(f"{n_items} items are rated by {judge} and two or more clinicians; the test needs "
                       f"{min_items} (the paper asks for 50-100): have more items rated by a second clinician")
    if clin.shape[1] < min_clinicians:
        reasons.append(f"{clin.shape[1]} clinician(s) rated those items; the test needs {min_clinicians} or more, "
                       "each left out in turn: add clinicians")
    elif n_tested < min_clinicians:
        short = table.loc[~tested].sort_values("n_items", ascending=False)
        names = ", ".join(f"{r.clinician} ({r.n_items})" for r in short.head(5).itertuples())
        reasons.append(f"only {n_tested} clinician(s) share {min_shared_items}+ items with another clinician; "
                       f"the test needs {min_clinicians}: give {names} more items that another clinician also rates")
    verdict = NOT_ENOUGH if reasons else (PASS if winning >= 0.5 else FAIL)
    return AltTestResult(verdict, winning, advantage, n_items, table, tuple(reasons))


@dataclass(frozen=True)
class EquivalenceResult:
    """The equivalence test's outcome: ``verdict`` (upper side), the mean difference with its ``1 - 2 alpha`` CI,
    the TOST p-value (both sides)."""

    verdict: str
    mean_difference: float
    ci_low: float
    ci_high: float
    p: float
    judge_distance: float
    clinician_distance: float
    n_items: int
    reasons: tuple[str, ...] = ()


def equivalence_test(scores: pd.DataFrame, judge: str, delta: float = 0.25, alpha: float = 0.05, *,
                     min_items: int = 50) -> EquivalenceResult:
    """Is the judge's distance to the clinicians within ``delta`` points of the clinicians' distance to each other?

    Parameters
    ----------
    scores : pandas.DataFrame
        One score per (item, rater): ``item_id``, ``rater_id``, ``rater_kind``, ``score``.
    judge : str
        The ``rater_id`` tested.
    delta : float
        The equivalence margin in score points.
    alpha : float
        The level of each one-sided test.
    min_items : int
        Items with the judge and two or more clinicians needed.

    Returns
    -------
    EquivalenceResult

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.verdict import equivalence_test
    >>> rows = [(i, r, "clinician", s) for i, row in enumerate([(3, 4), (2, 2), (5, 4), (1, 2)])
    ...         for r, s in zip("ab", row)] + [(i, "jury", "jury", s) for i, s in enumerate([3, 2, 4, 1])]
    >>> res = equivalence_test(pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "score"]),
    ...                        "jury", min_items=2)
    >>> res.judge_distance, res.clinician_distance, res.mean_difference
    (0.375, 0.75, -0.375)
    """
    clin, machine = _wide(scores, judge)
    values = clin.to_numpy(dtype=float)
    f = machine[:, None]
    a = np.nanmean(np.abs(f - values), axis=1)
    pairs = np.abs(values[:, :, None] - values[:, None, :])
    iu = np.triu_indices(values.shape[1], k=1)
    b = np.nanmean(pairs[:, iu[0], iu[1]], axis=1) if len(iu[0]) else np.full(len(values), np.nan)
    n = len(values)
    if n < max(min_items, 2):
        reason = (f"{n} items are rated by {judge} and two or more clinicians; the equivalence test needs "
                  f"{min_items}: have more items rated by a second clinician")
        return EquivalenceResult(NOT_ENOUGH, *([float("nan")] * 6), n, (reason,))
    d = a - b
    from statsmodels.stats.weightstats import ttost_paired  # on first use, as in alt_test

    p, _, _ = ttost_paired(a, b, -delta, delta)
    half = stats.t.ppf(1 - alpha, n - 1) * d.std(ddof=1) / np.sqrt(n)
    low, high = d.mean() - half, d.mean() + half
    verdict = PASS if high < delta else FAIL
    return EquivalenceResult(verdict, float(d.mean()), float(low), float(high), float(p), float(a.mean()),
                             float(b.mean()), n)


VERDICT_COLUMNS = ["benchmark", "rater_id", "test", "verdict", "n_items", "n_clinicians", "winning_rate",
                   "advantage_probability", "percentile", "estimate", "ci_low", "ci_high", "p", "reason"]


def verdict_table(
    long: pd.DataFrame, protocol: VerdictProtocol, benchmarks: Sequence[str] | None = None
) -> pd.DataFrame:
    """Every test of ``protocol`` for the jury and each judge, per benchmark and pooled: :data:`VERDICT_COLUMNS`.

    Parameters
    ----------
    long : pandas.DataFrame
        A long ratings table (:func:`~medhelm_core.agreement.validate_long` is applied).
    protocol : VerdictProtocol
        The tests, margins and enough-data rules.
    benchmarks : sequence of str, optional
        The benchmarks (default all); a ``pooled`` scope over them follows.

    Returns
    -------
    pandas.DataFrame
        One row per (scope, rater, test); the Alt-Test's ``estimate`` is the winning rate, the equivalence
        test's the mean difference in absolute distance with its ``1 - 2 alpha`` CI; ``reason`` says what to
        change when the verdict is NOT ENOUGH DATA.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.verdict import VerdictProtocol, verdict_table
    >>> rows = [(f"i{i}", r, "clinician", "accuracy", float(s), "medi_qa") for i in range(4)
    ...         for r, s in (("a", 3), ("b", 4))] + [(f"i{i}", "jury", "jury", "accuracy", 3.5, "medi_qa")
    ...                                              for i in range(4)]
    >>> long = pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark"])
    >>> verdict_table(long, VerdictProtocol())[["benchmark", "test", "verdict"]].values.tolist()[:2]
    [['medi_qa', 'alt_test', 'NOT ENOUGH DATA'], ['medi_qa', 'equivalence', 'NOT ENOUGH DATA']]
    """
    data, names = chosen_benchmarks(validate_long(long), benchmarks)
    rows = []
    for bench, part in benchmark_scopes(data, names):
        scores = rater_scores(part, protocol.criterion)
        machines = scores.loc[scores["rater_kind"].isin(["jury", "judge"]), ["rater_id", "rater_kind"]]
        order = machines.drop_duplicates().sort_values(["rater_kind", "rater_id"], ascending=[False, True])
        for rater in order["rater_id"]:
            if "alt_test" in protocol.tests:
                alt = alt_test(scores, rater, protocol.epsilon, protocol.alpha, min_items=protocol.min_items,
                               min_clinicians=protocol.min_clinicians, min_shared_items=protocol.min_shared_items)
                n_tested = int(alt.clinicians["p"].notna().sum())
                rows.append([bench, rater, "alt_test", alt.verdict, alt.n_items, n_tested, alt.winning_rate,
                             alt.advantage_probability, alt.percentile, alt.winning_rate, np.nan, np.nan, np.nan,
                             "; ".join(alt.reasons)])
            if "equivalence" in protocol.tests:
                eq = equivalence_test(scores, rater, protocol.delta, protocol.alpha, min_items=protocol.min_items)
                n_clin = int(scores.loc[scores["rater_kind"] == "clinician", "rater_id"].nunique())
                rows.append([bench, rater, "equivalence", eq.verdict, eq.n_items, n_clin, np.nan, np.nan, np.nan,
                             eq.mean_difference, eq.ci_low, eq.ci_high, eq.p, "; ".join(eq.reasons)])
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def verdict_sentences(table: pd.DataFrame, protocol: VerdictProtocol) -> list[str]:
    """The verdict in plain words, one sentence per (scope, rater, test) of a :func:`verdict_table`.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.verdict import VerdictProtocol, verdict_sentences
    >>> t = pd.DataFrame([["pooled", "jury", "alt_test", "FAIL", 80, 4, 0.25, 0.61, 0.5, 0.25, None, None, None, ""]],
    ...                  columns=VERDICT_COLUMNS)
    >>> verdict_sentences(t, VerdictProtocol())[0][:60]
    'pooled, jury, Alternative Annotator Test: FAIL. It beats 25%'
    """
    out = []
    for r in table.itertuples():
        head = f"{r.benchmark}, {r.rater_id}, {TEST_NAMES[r.test]}: {r.verdict}."
        if r.verdict == NOT_ENOUGH:
            out.append(f"{head} {r.reason}.")
        elif r.test == "alt_test":
            out.append(f"{head} It beats {r.winning_rate:.0%} of {r.n_clinicians} clinicians at epsilon "
                       f"{protocol.epsilon:g} (passing needs 50%); it is at least as close to the other clinicians "
                       f"as the left-out one on {r.advantage_probability:.0%} of items on average, and closer "
                       f"than {r.percentile:.0%} of clinicians on the whole, over {r.n_items} items.")
        else:
            if r.verdict == FAIL:
                side = (f"so it may be more than {protocol.delta:g} points farther from them than they are "
                        "from each other")
            elif r.ci_low > -protocol.delta:
                side = f"equivalent within {protocol.delta:g} points"
            else:
                side = "no farther from them than they are from each other, and possibly closer"
            out.append(f"{head} Its mean distance to the clinicians minus theirs to each other is "
                       f"{r.estimate:+.2f} points ({1 - 2 * protocol.alpha:.0%} CI {r.ci_low:+.2f} to "
                       f"{r.ci_high:+.2f}), {side}, over {r.n_items} items.")
    return out


TEST_NAMES = {"alt_test": "Alternative Annotator Test", "equivalence": "equivalence test"}


def design_sentences(scores: pd.DataFrame, protocol: VerdictProtocol) -> list[str]:
    """What the rating design can and cannot decide, in plain words (one score per item and rater).

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.verdict import VerdictProtocol, design_sentences
    >>> s = pd.DataFrame({"item_id": [1, 1, 2], "rater_id": ["a", "b", "a"], "rater_kind": ["clinician"] * 3,
    ...                   "score": [3.0, 4.0, 5.0]})
    >>> design_sentences(s, VerdictProtocol())[0]
    '2 item(s) have clinicians; 1 have two or more (at most 2 clinicians on one item), from 2 clinician(s).'
    """
    clin = scores[scores["rater_kind"] == "clinician"]
    per_item = clin.groupby("item_id")["rater_id"].nunique()
    shared = per_item.index[per_item >= 2]
    per_clin = clin[clin["item_id"].isin(shared)].groupby("rater_id")["item_id"].nunique()
    ready = int((per_clin >= protocol.min_shared_items).sum())
    out = [f"{len(per_item)} item(s) have clinicians; {len(shared)} have two or more (at most "
           f"{int(per_item.max()) if len(per_item) else 0} clinicians on one item), from "
           f"{clin['rater_id'].nunique()} clinician(s)."]
    can = ["leniency, use of the scale and the calibration map (every item with a clinician)"]
    if len(shared) >= protocol.min_items:
        can.append("the equivalence test (items with two clinicians)")
    out.append("This design can estimate " + " and ".join(can) + ".")
    if ready < protocol.min_clinicians or len(shared) < protocol.min_items:
        best = int(per_clin.max()) if len(per_clin) else 0
        out.append(
            f"It cannot run the Alternative Annotator Test: that needs {protocol.min_clinicians} or more clinicians "
            f"who each rate {protocol.min_shared_items}+ items that another clinician also rates, and "
            f"{protocol.min_items}+ such items; here {ready} clinician(s) reach that (the most any has is {best}). "
            + ("With two clinicians per item the 'other clinicians' of an item are a single person, so the test "
               "compares the judge with one colleague at a time. " if len(per_item) and per_item.max() <= 2 else "")
            + f"To decide it, have {protocol.min_clinicians} "
            f"clinicians rate the same {max(protocol.min_items, protocol.min_shared_items)} items (or more), or "
            f"give each clinician {protocol.min_shared_items}+ items overlapping with another.")
    return out
