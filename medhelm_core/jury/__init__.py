"""The LLM jury: several judge models rate a study's items through litellm, as MedHELM's jury does.

- :mod:`~medhelm_core.jury.config`: :class:`JudgeSpec` and :class:`JuryConfig`, frozen and hashable; the
  config hash names the run and keys the verdict cache; ``jury.toml`` files.
- :mod:`~medhelm_core.jury.prompt`: MedHELM's prompt, with the evaluated texts fenced.
- :mod:`~medhelm_core.jury.templates`: versioned prompt templates (the bundled one is ``medhelm`` v1).
- :mod:`~medhelm_core.jury.run_versions`: the judges, rubric and prompt versions a run uses and records.
- :mod:`~medhelm_core.jury.parse`: strict JSON, then the judge's own final JSON object.
- :mod:`~medhelm_core.jury.calls`: one judge call with retries, back-off and a reminder (imports litellm or the
  openai SDK, whichever the judges need).
- :mod:`~medhelm_core.jury.openai_compatible`: OpenAI-compatible judges through the openai SDK's client directly.
- :mod:`~medhelm_core.jury.runner`: the concurrent run, verdicts written as they arrive; stop and resume.
- :mod:`~medhelm_core.jury.verdict_writes`: verdicts stored many to a transaction, each once.
- :mod:`~medhelm_core.jury.batch`: the same run through the providers' batch APIs (``--batch``), resumable;
  its lines in :mod:`~medhelm_core.jury.batch_lines`, its batches' rows in :mod:`~medhelm_core.jury.batch_store`.
- :mod:`~medhelm_core.jury.cost`: tokens and cost, and the estimate before a run.
- :mod:`~medhelm_core.jury.results`: each judge's scores and the jury mean per item.

Importing this package does not import litellm; only running a judge that needs it does.
"""

from medhelm_core.errors import MissingCredentialsError, RunBusyError
from medhelm_core.jury.config import JudgeSpec, JuryConfig, JuryFile, build_config, load_jury_file
from medhelm_core.jury.cost import JuryEstimate, price_per_token
from medhelm_core.jury.parse import ParsedVerdict, VerdictParseError, parse_verdict
from medhelm_core.jury.prompt import DEFAULT_TEMPLATE, render_prompt
from medhelm_core.jury.results import criterion_means, item_jury_scores, verdict_scores_frame
from medhelm_core.jury.run_versions import RunVersions, choose_template, run_versions, stored_config
from medhelm_core.jury.runner import Progress, RunSummary, estimate_run, prepare_run, run_jury, run_jury_async
from medhelm_core.jury.store import effective_status, planned_calls, request_stop
from medhelm_core.jury.templates import (
    TemplateVersion,
    get_template_version,
    latest_template_version,
    list_template_versions,
    save_template_version,
)

__all__ = [
    "DEFAULT_TEMPLATE",
    "JudgeSpec",
    "JuryConfig",
    "JuryEstimate",
    "JuryFile",
    "MissingCredentialsError",
    "ParsedVerdict",
    "Progress",
    "RunBusyError",
    "RunSummary",
    "RunVersions",
    "TemplateVersion",
    "VerdictParseError",
    "build_config",
    "choose_template",
    "criterion_means",
    "effective_status",
    "estimate_run",
    "get_template_version",
    "item_jury_scores",
    "latest_template_version",
    "list_template_versions",
    "load_jury_file",
    "parse_verdict",
    "planned_calls",
    "prepare_run",
    "price_per_token",
    "render_prompt",
    "request_stop",
    "run_jury",
    "run_jury_async",
    "run_versions",
    "save_template_version",
    "stored_config",
    "verdict_scores_frame",
]
