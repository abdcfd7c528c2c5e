"""Reading an ICC in words, after Koo & Li (2016), so a table says "poor" where it means poor."""

from __future__ import annotations

import math

# Koo & Li (2016), J Chiropr Med 15(2): poor < 0.5 <= moderate < 0.75 <= good <= 0.9 < excellent.
KOO_LI_BANDS: tuple[tuple[float, str], ...] = ((0.5, "poor"), (0.75, "moderate"), (0.9, "good"))


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
