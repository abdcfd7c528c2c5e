"""Agreement between clinicians, the LLM jury, single judges and automatic metrics.

Pure functions over pandas long tables: no database, no Streamlit. Everything that takes ratings takes
one table, validated once by :func:`validate_long` (a bad one raises :class:`AgreementInputError`
naming the column or value at fault).

The long contract, one row per (item, rater, criterion):

============  =====  ===============================================================================
column        type   meaning
============  =====  ===============================================================================
item_id       str    one model output for one benchmark instance; belongs to exactly one benchmark
rater_id      str    a clinician, the jury (e.g. ``"jury"``), a judge model, or a metric (``"rougeL"``)
rater_kind    str    ``clinician``, ``jury``, ``judge`` or ``metric``; one kind per rater
criterion     str    ``accuracy``, ``completeness``, ``clarity`` or a study's own; for a metric any
                     name (e.g. its own), since a metric's single score per item stands for every
                     criterion and for the composite
score         float  finite; the 1-5 rubric scale for raters, the metric's own scale for metrics
benchmark     str    e.g. ``aci_bench``, ``medi_qa``
model         str    optional, kept but not used
============  =====  ===============================================================================

Each (item_id, rater_id, criterion) appears once: a revised rating is passed as its latest revision.
The composite is the mean of the criteria per rater and item (only where all were scored).

Main entry point: :func:`agreement_table` (``protocol="medhelm"`` reproduces the paper's figures,
``"full"`` adds all ICC forms, bootstrap intervals and all-clinician designs). The pieces it uses are
public too: :func:`icc_table` (pingouin's six ICCs), :func:`bootstrap_icc`, :func:`icc1_unbalanced`,
:func:`krippendorff_alpha`, :func:`leave_one_clinician_out`, :func:`weighted_kappa`,
:func:`koo_li_reading`; :func:`version_agreement` sets jury runs (versions of prompt, rubric wording or
judges) side by side, with paired bootstrap intervals of their differences.
"""

from medhelm_core.agreement.bootstrap import (
    BOOTSTRAP_METHODS,
    bootstrap_distribution,
    bootstrap_icc,
    bootstrap_records,
    jackknife_distribution,
)
from medhelm_core.agreement.contract import (
    COMPOSITE,
    MIN_ITEMS,
    RATER_KINDS,
    REQUIRED_COLUMNS,
    AgreementInputError,
    rater_scores,
    validate_long,
)
from medhelm_core.agreement.gwet import (
    GWET_COLUMNS,
    GWET_WEIGHTS,
    category_counts,
    gwet_ac,
    gwet_ac_table,
    gwet_weights,
)
from medhelm_core.agreement.icc import (
    ICC_DESCRIPTIONS,
    ICC_TYPES,
    PINGOUIN_NAMES,
    icc_from_sums_of_squares,
    icc_matrix,
    icc_records,
    icc_table,
    weighted_sums_of_squares,
    wide_matrix,
)
from medhelm_core.agreement.incomplete import (
    ALPHA_LEVELS,
    icc1_unbalanced,
    krippendorff_alpha,
    leave_one_clinician_out,
    loco_from_scores,
)
from medhelm_core.agreement.interpret import KOO_LI_BANDS, koo_li_interval_reading, koo_li_reading
from medhelm_core.agreement.judges import (
    ALL_JUDGES,
    CLINICIAN_CEILING,
    JUDGE_SUBSET_COLUMNS,
    Ceiling,
    clinician_ceiling,
    judge_subset_agreement,
)
from medhelm_core.agreement.jury_versions import VERSION_COLUMNS, version_agreement
from medhelm_core.agreement.kappa import KAPPA_CI_COLUMNS, KAPPA_WEIGHTS, weighted_kappa, weighted_kappa_ci
from medhelm_core.agreement.pairs import PAIR_COLUMNS, most_shared_pair, pair_agreement, zscore_within
from medhelm_core.agreement.protocol import (
    CLINICIAN_PAIR,
    POOLED,
    PROTOCOLS,
    TABLE_COLUMNS,
    agreement_table,
    comparison_name,
)

__all__ = [
    "ALL_JUDGES",
    "CLINICIAN_CEILING",
    "Ceiling",
    "clinician_ceiling",
    "JUDGE_SUBSET_COLUMNS",
    "KAPPA_CI_COLUMNS",
    "judge_subset_agreement",
    "weighted_kappa_ci",
    "GWET_COLUMNS",
    "GWET_WEIGHTS",
    "category_counts",
    "gwet_ac",
    "gwet_ac_table",
    "gwet_weights",
    "ALPHA_LEVELS",
    "BOOTSTRAP_METHODS",
    "CLINICIAN_PAIR",
    "COMPOSITE",
    "ICC_DESCRIPTIONS",
    "ICC_TYPES",
    "KAPPA_WEIGHTS",
    "KOO_LI_BANDS",
    "MIN_ITEMS",
    "PAIR_COLUMNS",
    "PINGOUIN_NAMES",
    "POOLED",
    "PROTOCOLS",
    "RATER_KINDS",
    "REQUIRED_COLUMNS",
    "TABLE_COLUMNS",
    "VERSION_COLUMNS",
    "AgreementInputError",
    "agreement_table",
    "bootstrap_distribution",
    "bootstrap_icc",
    "bootstrap_records",
    "comparison_name",
    "icc1_unbalanced",
    "icc_from_sums_of_squares",
    "icc_matrix",
    "icc_records",
    "icc_table",
    "jackknife_distribution",
    "koo_li_interval_reading",
    "koo_li_reading",
    "krippendorff_alpha",
    "leave_one_clinician_out",
    "loco_from_scores",
    "most_shared_pair",
    "pair_agreement",
    "rater_scores",
    "validate_long",
    "version_agreement",
    "weighted_kappa",
    "weighted_sums_of_squares",
    "wide_matrix",
    "zscore_within",
]
