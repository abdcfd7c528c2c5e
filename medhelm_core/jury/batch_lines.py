"""The lines of a provider batch: requests out (one JSON line per judge call), results back into verdicts.

Pure functions, no network and no database: :mod:`medhelm_core.jury.batch` sends what these build and stores what
they return. A request's ``custom_id`` is the verdict's cache key, so a result finds its item, judge and sample
whatever order the provider returns them in.

Batch mode sends no reminder: an answer that cannot be read is stored failed with its reason and the raw text (as
a live call's is after the reminder), and ``--retry-failed`` asks again. A reminder would need a second batch round
per unreadable answer, up to another 24 hours, for what is usually a few per cent of the calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from medhelm_core.db.models import VerdictStatus
from medhelm_core.errors import ValidationError
from medhelm_core.jury.config import JudgeSpec, JuryConfig
from medhelm_core.jury.parse import VerdictParseError, parse_verdict
from medhelm_core.jury.store import VerdictOutcome, WorkItem

#: OpenAI's limits per batch input file (Azure OpenAI's are the same or larger)
OPENAI_MAX_REQUESTS = 50_000
OPENAI_MAX_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class BatchLimits:
    """How a run's calls are split into batches, and how often the provider is polled.

    ``poll_seconds`` is the longest wait between two polls; the first polls come sooner (one second, doubling), so a
    small batch that a provider finishes in a minute is not left waiting half an hour.
    """

    max_requests: int = OPENAI_MAX_REQUESTS
    max_bytes: int = OPENAI_MAX_BYTES
    poll_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.max_requests < 1 or self.max_bytes < 1 or self.poll_seconds <= 0:
            raise ValidationError("batch limits must be positive: requests per batch, bytes per batch file, "
                                  "seconds between polls")


def request_line(work: WorkItem, judge: JudgeSpec, model: str, url: str = "/v1/chat/completions") -> bytes:
    """One request of a batch input file (JSON Lines), with the verdict's cache key as ``custom_id``.

    ``model`` is the name the provider knows (litellm's ``openai/gpt-4o`` is ``gpt-4o`` there).
    """
    body = {"model": model, "messages": work.prompt.messages, "temperature": judge.temperature,
            "max_tokens": judge.max_tokens}
    line = {"custom_id": work.cache_key, "method": "POST", "url": url, "body": body}
    return json.dumps(line, ensure_ascii=False).encode() + b"\n"


def split_lines(lines: list[tuple[str, bytes]], limits: BatchLimits) -> list[list[tuple[str, bytes]]]:
    """Split (custom_id, line) pairs into batches within the request and byte limits, in order.

    Examples
    --------
    >>> pairs = [(str(i), b"x" * 10) for i in range(10)]
    >>> [len(b) for b in split_lines(pairs, BatchLimits(max_requests=4))]
    [4, 4, 2]
    >>> [len(b) for b in split_lines(pairs, BatchLimits(max_bytes=35))]
    [3, 3, 3, 1]
    """
    batches: list[list[tuple[str, bytes]]] = []
    current: list[tuple[str, bytes]] = []
    size = 0
    for key, line in lines:
        if len(line) > limits.max_bytes:
            raise ValidationError(f"one judge request is {len(line):,} bytes, more than a batch file may hold "
                                  f"({limits.max_bytes:,}); shorten the item or run this study without --batch")
        if current and (len(current) >= limits.max_requests or size + len(line) > limits.max_bytes):
            batches.append(current)
            current, size = [], 0
        current.append((key, line))
        size += len(line)
    if current:
        batches.append(current)
    return batches


def read_jsonl(content: bytes, what: str) -> list[dict[str, Any]]:
    """The JSON objects of a result file; a line that is not JSON names the file and line."""
    rows = []
    for n, line in enumerate(content.decode("utf-8", errors="replace").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{what}, line {n}: not JSON ({exc.msg})") from None
    return rows


def _failed(work: WorkItem, error: str, raw: str = "", tokens: tuple[int, int, float, bool] = (0, 0, 0.0, True),
            ) -> VerdictOutcome:
    return VerdictOutcome(
        item_id=work.item_id, judge=work.judge.model, cache_key=work.cache_key, status=VerdictStatus.failed.value,
        scores={}, explanations={}, prompt=work.prompt.text, raw_response=raw, error=error[:2000],
        latency_seconds=None, prompt_tokens=tokens[0], completion_tokens=tokens[1], cost_usd=tokens[2],
        cost_known=tokens[3], sample=work.sample,
    )


def missing_result(work: WorkItem, batch_id: str, provider_status: str) -> VerdictOutcome:
    """A call the batch returned nothing for (it failed, expired or was cancelled): failed, with no answer, so the
    next run asks again."""
    return _failed(work, f"no result from batch {batch_id} (the batch is {provider_status})")


def outcome_from_result(work: WorkItem, entry: dict[str, Any], config: JuryConfig,
                        price: tuple[float, float] | None) -> VerdictOutcome:
    """The verdict one line of a batch's output or error file gives (ok, or failed with its reason).

    ``price`` is the batch price per (input, output) token, None when unknown (the cost is then 0 and unpriced).
    A line that reports an error keeps no answer, so the next run asks again (as after a live call that failed).
    """
    response = entry.get("response") or {}
    body = response.get("body") if isinstance(response, dict) else None
    status_code = response.get("status_code") if isinstance(response, dict) else None
    if entry.get("error") or status_code != 200 or not isinstance(body, dict):
        error = entry.get("error") or (body.get("error") if isinstance(body, dict) else None)
        message = (error.get("message") or error.get("code")) if isinstance(error, dict) else str(error or "")
        return _failed(work, f"batch request failed (HTTP {status_code}): {message or 'no reason given'}"[:500])
    usage = body.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    completion_tokens = int(usage.get("completion_tokens") or 0)
    cost = 0.0 if price is None else prompt_tokens * price[0] + completion_tokens * price[1]
    spent = (prompt_tokens, completion_tokens, cost, price is not None)
    choices = body.get("choices") or [{}]
    text = str(((choices[0] or {}).get("message") or {}).get("content") or "")
    try:
        parsed = parse_verdict(text, config.rubric, work.prompt.fence_tags, prompt_text=work.prompt.text)
    except VerdictParseError as exc:
        return _failed(work, f"unparseable answer ({exc.reason}); batch mode sends no reminder: --retry-failed asks "
                       "again", raw=text, tokens=spent)
    return VerdictOutcome(
        item_id=work.item_id, judge=work.judge.model, cache_key=work.cache_key, status=VerdictStatus.ok.value,
        scores=parsed.scores, explanations=parsed.explanations, prompt=work.prompt.text, raw_response=text,
        error=None, latency_seconds=None, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        cost_usd=cost, cost_known=price is not None, sample=work.sample,
    )
