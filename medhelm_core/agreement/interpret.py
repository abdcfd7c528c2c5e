"""An ICC in words: its form (what was computed) and, where it applies, its reading after Koo & Li (2016).

Koo & Li's bands were written for reliability ICCs of raters on the measurement's own scale. They are given
here for the absolute-agreement forms on the raw scale (ICC(A,1), ICC(A,k), and the one-way ICC(1) over
every clinician), never for ICC(C,k) of two z-scored "raters": with two z-scored sides that is
2r / (1 + r) of their correlation r, so 0.474 (r = 0.31) would read "poor" for what is a correlation.
"""

from __future__ import annotations

import math

# Koo & Li (2016), J Chiropr Med 15(2): poor < 0.5 <= moderate < 0.75 <= good <= 0.9 < excellent.
KOO_LI_BANDS: tuple[tuple[float, str], ...] = ((0.5, "poor"), (0.75, "moderate"), (0.9, "good"))
#: the reference printed beside every reading
KOO_LI_REFERENCE = (
    "reading after Koo & Li (2016, J Chiropr Med 15:155-163), for raw-scale reliability forms only: "
    "poor < 0.5, moderate 0.5-0.75, good 0.75-0.9, excellent > 0.9"
)
#: the engine's methods Koo & Li's bands apply to (raw-scale reliability forms)
KOO_LI_METHODS: frozenset[str] = frozenset({"ICC2", "ICC2k", "ICC1_unbalanced", "ICC1k_unbalanced"})
_FORMS: dict[str, str] = {
    "ICC3k": "ICC(C,k): consistency of the mean of the two sides, each z-scored (MedHELM's protocol)",
    "ICC3": "ICC(C,1): consistency of one rater, each side z-scored",
    "ICC2": "ICC(A,1): absolute agreement of one rater, raw scale",
    "ICC2k": "ICC(A,k): absolute agreement of the mean of the two, raw scale",
    "ICC1_unbalanced": "ICC(1,1): one-way absolute agreement of one clinician, every overlapping clinician, raw scale",
    "ICC1k_unbalanced": "ICC(1,k0): one-way absolute agreement of the mean clinician, every clinician, raw scale",
    "alpha_interval": "Krippendorff's alpha (interval), every overlapping clinician, raw scale",
    "alpha_ordinal": "Krippendorff's alpha (ordinal), every overlapping clinician, raw scale",
}


def form_words(method: str, comparison: str = "") -> str:
    """What a row of the agreement table computed, in words (its ICC form, design and scale).

    Examples
    --------
    >>> from medhelm_core.agreement.interpret import form_words
    >>> form_words("ICC2", "jury-clinician")
    'ICC(A,1): absolute agreement of one rater, raw scale'
    >>> form_words("ICC3k", "clinician ceiling")
    'ICC(C,k) of each clinician against the mean of the others, z-scored: median over clinicians'
    """
    if comparison == "clinician ceiling":
        return "ICC(C,k) of each clinician against the mean of the others, z-scored: median over clinicians"
    if comparison.startswith("clinician:") and method == "ICC3k":
        return "ICC(C,k) of this clinician against the mean of the others, z-scored"
    return _FORMS.get(str(method), str(method))


def koo_li_reading(icc: float) -> str:
    """The Koo & Li (2016) band of an ICC value.

    Parameters
    ----------
    icc : float
        An ICC estimate or confidence bound.

    Returns
    -------
    str
        ``"poor"`` (< 0.5), ``"moderate"`` (0.5 to < 0.75), ``"good"`` (0.75 to 0.9), ``"excellent"``
        (> 0.9), or ``""`` when the value is NaN.

    Examples
    --------
    >>> from medhelm_core.agreement import koo_li_reading
    >>> koo_li_reading(0.474), koo_li_reading(0.75), koo_li_reading(0.95)
    ('poor', 'good', 'excellent')
    """
    if icc is None or math.isnan(icc):
        return ""
    for upper, band in KOO_LI_BANDS[:2]:
        if icc < upper:
            return band
    return "good" if icc <= KOO_LI_BANDS[2][0] else "excellent"


def koo_li_interval_reading(low: float, high: float) -> str:
    """The Koo & Li bands an ICC's confidence interval spans, which they advise reading over the estimate.

    Parameters
    ----------
    low, high : float
        Confidence bounds.

    Returns
    -------
    str
        One band (``"poor"``) or a span (``"poor to moderate"``); ``""`` when a bound is NaN.

    Examples
    --------
    >>> from medhelm_core.agreement.interpret import koo_li_interval_reading
    >>> koo_li_interval_reading(0.10, 0.69)
    'poor to moderate'
    """
    lo, hi = koo_li_reading(low), koo_li_reading(high)
    if not lo or not hi:
        return ""
    return lo if lo == hi else f"{lo} to {hi}"
