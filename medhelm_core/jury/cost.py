"""Tokens and cost: what a call cost (litellm's cost function, or the same map read here for a judge called
without litellm: :func:`priced_usage`) and what a run will cost.

Prices come from litellm's offline cost map, the JSON file bundled with the package
(``LITELLM_LOCAL_MODEL_COST_MAP=True`` makes litellm itself use the same file, so no network is touched).
The estimate for ``--dry-run`` reads that file directly, without importing litellm (several seconds), and
counts about four characters per prompt token; it is an estimate and says so.
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from medhelm_core.jury.config import JuryConfig
from medhelm_core.jury.store import RunPlan
from medhelm_core.rubric import RubricSpec

COST_MAP_FILE = "model_prices_and_context_window_backup.json"
#: Chat formatting adds a few tokens per message on top of the text.
MESSAGE_OVERHEAD_TOKENS = 7


@lru_cache(maxsize=1)
def model_prices() -> dict[str, dict[str, Any]]:
    """litellm's bundled cost map (model name -> prices per token), read without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / COST_MAP_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def price_per_token(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token for a litellm model name, or None when the map has no price.

    Examples
    --------
    >>> price_per_token("openai/gpt-4o-2024-05-13")
    (5e-06, 1.5e-05)
    """
    prices = model_prices()
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    for name in candidates:
        entry = prices.get(name)
        if entry and "input_cost_per_token" in entry and "output_cost_per_token" in entry:
            return float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])
    return None


#: what OpenAI, Azure OpenAI and Anthropic document for their batch APIs: half the live price
BATCH_DISCOUNT = 0.5


def batch_price_per_token(model: str) -> tuple[float, float, bool] | None:
    """(input, output) USD per token through the provider's batch API, and whether the price map lists it.

    litellm's cost map lists batch prices for some models (``input_cost_per_token_batches``); for the others the
    live price times :data:`BATCH_DISCOUNT` (the providers' documented 50% discount) is used, and said so.

    Examples
    --------
    >>> batch_price_per_token("openai/gpt-4o-2024-05-13")
    (2.5e-06, 7.5e-06, True)
    """
    live = price_per_token(model)
    if live is None:
        return None
    prices = model_prices()
    for name in (model, model.split("/", 1)[1] if "/" in model else model):
        entry = prices.get(name) or {}
        if "input_cost_per_token_batches" in entry and "output_cost_per_token_batches" in entry:
            return float(entry["input_cost_per_token_batches"]), float(entry["output_cost_per_token_batches"]), True
    return live[0] * BATCH_DISCOUNT, live[1] * BATCH_DISCOUNT, False


def estimate_tokens(text: str) -> int:
    """About four characters per token (English prose with GPT-style tokenisers)."""
    return math.ceil(len(text) / 4)


def expected_completion_tokens(rubric: RubricSpec, max_tokens: int) -> int:
    """A verdict is about 60 tokens per criterion (score and one sentence) plus the JSON around it."""
    return min(max_tokens, 60 * len(rubric.criteria) + 30)


@dataclass(frozen=True)
class JudgeEstimate:
    """Expected calls, tokens and cost of one judge; ``cost_usd`` is None when no price is known."""

    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None


@dataclass(frozen=True)
class JuryEstimate:
    """What a run will do before it starts: calls to make, verdicts already there, the expected cost."""

    planned: int
    done: int
    reused: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    unpriced: list[str] = field(default_factory=list)
    judges: list[JudgeEstimate] = field(default_factory=list)
    #: priced for the provider's batch API (``--batch``) rather than live calls
    batch: bool = False
    #: judges whose batch price is not in the map: priced at the documented 50% of the live price
    batch_halved: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One paragraph for the CLI and the page."""
        lines = [
            f"{self.calls} calls to make ({self.planned} verdicts planned, {self.done} already done, "
            f"{self.reused} reused from earlier runs)",
            f"about {self.prompt_tokens:,} prompt and {self.completion_tokens:,} completion tokens, "
            f"estimated cost ${self.cost_usd:.4f}" + (" at batch prices" if self.batch else ""),
        ]
        if self.batch:
            listed = [j.model for j in self.judges if j.model not in self.batch_halved and j.model not in self.unpriced]
            if listed:
                lines.append(f"batch price from litellm's price map for {', '.join(listed)}")
            if self.batch_halved:
                lines.append(f"batch price of {', '.join(self.batch_halved)}: 50% of the live price (the provider's "
                             "documented batch discount; the price map lists no batch price)")
        if self.unpriced:
            lines.append(f"no price known for {', '.join(self.unpriced)} (local or unlisted model): counted as $0")
        return "\n".join(lines)


def estimate_plan(plan: RunPlan, config: JuryConfig, *, batch: bool = False) -> JuryEstimate:
    """Estimate the calls, tokens and cost of the calls a plan still has to make (at batch prices with ``batch``)."""
    judges: list[JudgeEstimate] = []
    halved: list[str] = []
    for judge in config.judges:
        work = [w for w in plan.todo if w.judge.model == judge.model]
        prompt_tokens = sum(estimate_tokens(w.prompt.text) + MESSAGE_OVERHEAD_TOKENS for w in work)
        completion = expected_completion_tokens(config.rubric, judge.max_tokens) * len(work)
        price = price_per_token(judge.model)
        if batch and price is not None:
            *price, listed = batch_price_per_token(judge.model)
            if not listed:
                halved.append(judge.model)
        cost = None if price is None else prompt_tokens * price[0] + completion * price[1]
        judges.append(JudgeEstimate(judge.model, len(work), prompt_tokens, completion, cost))
    return JuryEstimate(
        planned=plan.planned,
        done=plan.done,
        reused=len(plan.reusable),
        calls=len(plan.todo),
        prompt_tokens=sum(j.prompt_tokens for j in judges),
        completion_tokens=sum(j.completion_tokens for j in judges),
        cost_usd=sum(j.cost_usd or 0.0 for j in judges),
        unpriced=[j.model for j in judges if j.cost_usd is None],
        judges=judges,
        batch=batch,
        batch_halved=halved,
    )


def priced_usage(model: str, usage: dict[str, Any]) -> tuple[int, int, float, bool]:
    """(prompt tokens, completion tokens, cost in USD, whether the cost is known) of a response's ``usage`` (its
    JSON), priced from the cost map: for a judge called without litellm (:mod:`medhelm_core.jury.openai_compatible`).

    What litellm's cost function does for an OpenAI model: prompt tokens the provider read from its cache
    (``prompt_tokens_details.cached_tokens``) at the map's cached price when it lists one, the rest at the input
    price, completion tokens (reasoning included) at the output price. A model the map does not list costs 0 and
    is reported as unpriced.

    Examples
    --------
    >>> priced_usage("openai/gpt-4o-2024-05-13", {"prompt_tokens": 1000, "completion_tokens": 100})
    (1000, 100, 0.0065, True)
    >>> priced_usage("openai/my-local-model", {"prompt_tokens": 1000, "completion_tokens": 100})
    (1000, 100, 0.0, False)
    """
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    completion_tokens = int(usage.get("completion_tokens") or 0)
    price = price_per_token(model)
    if price is None:
        return prompt_tokens, completion_tokens, 0.0, False
    details = usage.get("prompt_tokens_details")
    cached = int((details.get("cached_tokens") if isinstance(details, dict) else 0) or 0)
    cached_price = _cached_input_price(model)
    if cached_price is None:
        cached = 0
    cost = (prompt_tokens - cached) * price[0] + cached * (cached_price or 0.0) + completion_tokens * price[1]
    return prompt_tokens, completion_tokens, round(cost, 12), True


def _cached_input_price(model: str) -> float | None:
    prices = model_prices()
    for name in (model, model.split("/", 1)[1] if "/" in model else model):
        entry = prices.get(name) or {}
        if "input_cost_per_token" in entry:
            value = entry.get("cache_read_input_token_cost")
            return float(value) if value is not None else None
    return None


def usage_and_cost(litellm: Any, response: Any, model: str | None = None) -> tuple[int, int, float, bool]:
    """(prompt tokens, completion tokens, cost in USD, whether the cost is known) of one response.

    Uses the cost litellm attached to the response, else ``litellm.completion_cost`` for a model the cost
    map lists; a model it does not list (a local server) costs 0 and is reported as unpriced.
    """
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    if cost is None:
        if model is not None and price_per_token(model) is None:
            # litellm already tried and found no price; asking again costs ~2 ms of CPU per call.
            return prompt_tokens, completion_tokens, 0.0, False
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # noqa: BLE001 - litellm raises several types for an unmapped model
            return prompt_tokens, completion_tokens, 0.0, False
    return prompt_tokens, completion_tokens, float(cost or 0.0), True
