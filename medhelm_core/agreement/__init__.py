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
``"full"`` adds all ICC forms, bootstrap intervals and all-clinician designs). Beside it, one public
function per statistic or table: :func:`icc_table` (pingouin's six ICCs), :func:`bootstrap_icc`,
:func:`icc1_unbalanced`, :func:`krippendorff_alpha`, :func:`leave_one_clinician_out`,
:func:`pair_agreement`, :func:`weighted_kappa`, :func:`gwet_ac`, :func:`robust_table` (AC2 and kappa
beside the ICC), :func:`judge_subset_agreement` and :func:`clinician_ceiling` (which judges carry the
jury), :func:`version_agreement` (jury runs side by side, with paired bootstrap intervals of their
differences), :func:`intra_rater_agreement` (test-retest) and :func:`koo_li_reading`.

Only these, the contract (:func:`validate_long`, :func:`rater_scores`, :class:`AgreementInputError`) and
the names that appear in the tables (``COMPOSITE``, ``POOLED``, ``CLINICIAN_PAIR``,
``CLINICIAN_CEILING``) are exported here; the building blocks (the bootstrap interval read-out, the
kernels, the column lists) are imported from their modules.
"""

from medhelm_core.agreement.bootstrap import bootstrap_icc
from medhelm_core.agreement.contract import COMPOSITE, rater_scores, validate_long
from medhelm_core.agreement.gwet import gwet_ac
from medhelm_core.agreement.icc import icc_table
from medhelm_core.agreement.incomplete import icc1_unbalanced, krippendorff_alpha, leave_one_clinician_out
from medhelm_core.agreement.interpret import koo_li_reading
from medhelm_core.agreement.intra_rater import intra_rater_agreement
from medhelm_core.agreement.judges import CLINICIAN_CEILING, clinician_ceiling, judge_subset_agreement
from medhelm_core.agreement.jury_versions import version_agreement
from medhelm_core.agreement.kappa import weighted_kappa
from medhelm_core.agreement.pairs import pair_agreement
from medhelm_core.agreement.protocol import CLINICIAN_PAIR, agreement_table
from medhelm_core.agreement.robust import robust_table
from medhelm_core.agreement.scopes import POOLED
from medhelm_core.errors import AgreementInputError

__all__ = [
    "CLINICIAN_CEILING",
    "CLINICIAN_PAIR",
    "COMPOSITE",
    "POOLED",
    "AgreementInputError",
    "agreement_table",
    "bootstrap_icc",
    "clinician_ceiling",
    "gwet_ac",
    "icc1_unbalanced",
    "icc_table",
    "intra_rater_agreement",
    "judge_subset_agreement",
    "koo_li_reading",
    "krippendorff_alpha",
    "leave_one_clinician_out",
    "pair_agreement",
    "rater_scores",
    "robust_table",
    "validate_long",
    "version_agreement",
    "weighted_kappa",
]
