"""Calling one judge: credentials, retries with back-off, the reminder, the outcome.

An OpenAI-compatible judge (``openai/...``, ``hosted_vllm/...`` at its own API base) is called through the openai
SDK's async client directly (:mod:`medhelm_core.jury.openai_compatible`); every other provider through litellm.
Either library is imported only when a judge of the run needs it (:func:`connect`): litellm takes seconds to
import and, unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set first, fetches its cost map from the internet.

Retries, the same whichever library calls: rate limits (honouring ``Retry-After``), timeouts, connection and
server errors are retried with exponential back-off and jitter; other errors (a bad request, an unknown model)
fail the verdict at once. Missing or refused credentials stop the whole run with a message naming the variable
to set, since every other call to that judge would fail the same way.

A judge with its own API base (a local OpenAI-compatible server: vLLM, Ollama, llama.cpp) needs no key: unless it
names a key variable, it gets the provider's variable when that is set, and otherwise :data:`NO_KEY` (the client
library refuses to call without a value; a server started without a key ignores it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

from medhelm_core.db.models import VerdictStatus
from medhelm_core.errors import MissingCredentialsError, ValidationError
from medhelm_core.jury import openai_compatible
from medhelm_core.jury.config import JudgeSpec, JuryConfig
from medhelm_core.jury.cost import priced_usage, usage_and_cost
from medhelm_core.jury.openai_compatible import key_variable, speaks_openai
from medhelm_core.jury.parse import VerdictParseError, parse_verdict
from medhelm_core.jury.prompt import reminder_message
from medhelm_core.jury.store import VerdictOutcome, WorkItem

REMINDER_SEPARATOR = "\n\n----- answer after a reminder -----\n\n"
#: the key sent to a judge's own API base when it has no key variable and the provider's is unset (not a secret)
NO_KEY = "no-key"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


class CallFailed(Exception):
    """A call that failed for good (after retries, or at once for a non-transient error)."""


def load_litellm() -> Any:
    """Import litellm offline and quiet: local cost map, no telemetry, no debug banners."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return litellm


class Connections:
    """How one run reaches its judges: litellm when a judge needs it (else None), and one ``AsyncOpenAI`` client per
    OpenAI-compatible judge, opened on its first call (in the run's event loop) and closed with the run."""

    def __init__(self, litellm: Any = None) -> None:
        self.litellm = litellm
        self._clients: dict[tuple[str, str | None], Any] = {}

    def client(self, judge: JudgeSpec) -> Any:
        """The judge's client; :class:`MissingCredentialsError` when there is no key to send it."""
        key = (judge.model, judge.api_base)
        found = self._clients.get(key)
        if found is None:
            api_key = api_key_for(judge, self.litellm)
            if api_key is None and judge.api_key_env is None:  # the provider's variable, as litellm would read it
                api_key = os.environ.get(key_variable(judge) or "") or None
            if api_key is None:
                raise MissingCredentialsError(credentials_message(self.litellm, judge))
            found = self._clients[key] = openai_compatible.open_client(judge, api_key)
        return found

    async def aclose(self) -> None:
        """Close every client's connections (the run is over)."""
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


def connect(config: JuryConfig) -> Connections:
    """Import what the jury's judges need, and only that: litellm for a judge that is not OpenAI-compatible,
    the openai SDK for one that is. Seconds of CPU: the runner calls it in a thread, its heartbeat beating."""
    litellm = load_litellm() if not all(speaks_openai(j) for j in config.judges) else None
    if any(speaks_openai(j) for j in config.judges):
        import openai  # noqa: F401 - imported here, off the event loop, rather than on the first call
    return Connections(litellm)


def secret_values(config: JuryConfig | None = None) -> list[str]:
    """Values to redact from anything stored: every judge's key, and variables that look like keys.

    A judge's key is redacted whatever its variable is called (``api_key_env = "JUDGE_CRED"``); a name
    with KEY, TOKEN, SECRET or PASSWORD in it is redacted without being configured (the provider's own
    variables, which litellm reads). Values shorter than 8 characters are left alone: "x" for a local
    server is no secret, and replacing it would garble every answer.
    """
    configured = {j.api_key_env for j in config.judges if j.api_key_env} if config is not None else set()
    return sorted(
        {v for k, v in os.environ.items() if (k in configured or _SECRET_NAME.search(k)) and len(v) >= 8},
        key=len,
        reverse=True,
    )


def redact(text: str, secrets: list[str]) -> str:
    """Replace every known secret in ``text`` (an error message, an answer) by ``***``.

    This is the one redaction of anything a call or a run produced: the runner applies it to each
    outcome before it is stored (:func:`redact_outcome`) and to the error a run ends with.
    """
    for s in secrets:
        if s in text:
            text = text.replace(s, "***")
    return re.sub(r"\b(sk|sk-ant|sk-proj)-[A-Za-z0-9_\-]{12,}", r"\1-***", text)


def redact_outcome(outcome: VerdictOutcome, secrets: list[str]) -> VerdictOutcome:
    """The outcome with every secret taken out of the text a judge or its server sent (answer, error,
    explanations), ready to be stored."""
    return replace(
        outcome,
        raw_response=redact(outcome.raw_response, secrets),
        error=redact(outcome.error, secrets) if outcome.error else outcome.error,
        explanations={k: redact(v, secrets) for k, v in outcome.explanations.items()},
    )


def _key_variables(litellm: Any, judge: JudgeSpec) -> list[str]:
    """The key variables the judge lacks: its own (named or not), or those litellm says its provider needs."""
    if judge.api_key_env:
        return [judge.api_key_env]
    variable = key_variable(judge)
    if variable is not None:  # called directly: what litellm's validate_environment says of these providers
        return [] if os.environ.get(variable) else [variable]
    if litellm is None:
        return []
    try:
        env = litellm.validate_environment(model=judge.model, api_base=judge.api_base)
    except Exception:  # noqa: BLE001 - an unknown provider: litellm cannot tell
        return []
    return [k for k in env.get("missing_keys", []) if re.search(r"API_KEY|TOKEN", k)]


def credentials_message(litellm: Any, judge: JudgeSpec) -> str:
    """What to do when a judge has no key: the variable to set, and that any value suits a local server."""
    if judge.api_base and not judge.api_key_env:
        return (f"judge {judge.model}: the server at {judge.api_base} refused the call without a valid key; name the "
                "environment variable that holds its key (Key variable on the Jury page, --api-key-env)")
    names = _key_variables(litellm, judge)
    given = judge.api_key_env or key_variable(judge)
    if given and os.environ.get(given):
        return f"judge {judge.model}: the provider refused the key in {given}; check the value of {given}"
    if not names:
        return f"judge {judge.model}: the provider refused the credentials; check its API key variable"
    hint = "; a local OpenAI-compatible server accepts any value" if judge.api_base else ""
    return (
        f"judge {judge.model} needs an API key: set {' or '.join(names)} in the environment "
        f"(or in Streamlit secrets){hint}"
    )


def api_key_for(judge: JudgeSpec, litellm: Any = None) -> str | None:
    """The key from the variable the judge names; for a judge with its own API base and no key variable, :data:`NO_KEY`
    when the provider's variable is unset (``litellm`` tells which that is); else None, which lets litellm read the
    provider's own variable. ``litellm`` may be None for an OpenAI-compatible judge (it knows its own variable)."""
    if judge.api_key_env is not None:
        return os.environ.get(judge.api_key_env) or None
    if judge.api_base and _key_variables(litellm, judge):
        return NO_KEY
    return None


def check_credentials(litellm: Any, config: JuryConfig) -> None:
    """Refuse to start when a judge's key variable is unset, before any call is made. A judge with its own API base
    and no key variable needs none (:func:`api_key_for`). ``litellm`` is None when every judge is OpenAI-compatible."""
    for judge in config.judges:
        if judge.api_key_env is not None:
            if not api_key_for(judge):
                raise MissingCredentialsError(credentials_message(litellm, judge))
        elif not judge.api_base and _key_variables(litellm, judge):
            raise MissingCredentialsError(credentials_message(litellm, judge))


def check_config_holds_no_key(config: JuryConfig) -> None:
    """Refuse a configuration that carries a key's value (in an API base's path or query, a model or run
    name): the configuration is stored with the run, and redacting it would send the calls elsewhere."""
    stored = json.dumps(config.to_dict(), ensure_ascii=False)
    if any(value in stored for value in secret_values(config)):
        variables = sorted({j.api_key_env for j in config.judges if j.api_key_env} | {"a *_KEY variable"})
        raise ValidationError(
            f"the jury configuration holds the value of a key ({' or '.join(variables)}), and it is stored with "
            "the run; keep the key in its environment variable only"
        )


def _classify(exc: BaseException) -> str:
    """``credentials``, ``retry`` or ``fatal``, for an error of the openai SDK or of litellm alike: litellm's
    exceptions are the SDK's classes (its AuthenticationError is the SDK's, status 401) with the same status codes."""
    text = str(exc)
    if "Missing credentials" in text or "api_key client option must be set" in text:
        return "credentials"
    status = getattr(exc, "status_code", None)
    if status in (401, 403):
        return "credentials"
    if status in _RETRY_STATUS:
        return "retry"
    openai = sys.modules.get("openai")  # an SDK error means the SDK is imported
    if openai is not None and isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return "retry"
    return "fatal"


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:500]


@dataclass
class Answer:
    """The text of one successful response and what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cost_known: bool


async def complete(judges: Connections, judge: JudgeSpec, config: JuryConfig,
                   messages: list[dict[str, str]]) -> Answer:
    """One chat completion with retries and back-off; :class:`CallFailed` when it cannot be had."""
    ask = _ask_directly if speaks_openai(judge) else _ask_litellm
    last = "no attempt made"
    for attempt in range(config.max_retries + 1):
        retry_after = None
        try:
            # The client's own timeout should fire first; this is the backstop.
            async with asyncio.timeout(judge.timeout + 5):
                return await ask(judges, judge, messages)
        except TimeoutError:
            last = f"timed out after {judge.timeout:g} s"
        except MissingCredentialsError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified just below
            kind = _classify(exc)
            if kind == "credentials":
                raise MissingCredentialsError(credentials_message(judges.litellm, judge)) from None
            last = _describe(exc)
            if kind == "fatal":
                raise CallFailed(last) from None
            retry_after = _retry_after(exc)
        if attempt == config.max_retries:
            break
        backoff = min(config.retry_max_seconds, config.retry_base_seconds * 2**attempt) * random.uniform(0.5, 1.0)
        # A server's Retry-After wins over our own guess, within reason.
        delay = min(retry_after, max(60.0, config.retry_max_seconds)) if retry_after is not None else backoff
        await asyncio.sleep(delay)
    raise CallFailed(f"gave up after {config.max_retries + 1} attempts; last error: {last}")


async def _ask_directly(judges: Connections, judge: JudgeSpec, messages: list[dict[str, str]]) -> Answer:
    text, usage = await openai_compatible.chat(judges.client(judge), judge, messages)
    return Answer(text, *priced_usage(judge.model, usage))


async def _ask_litellm(judges: Connections, judge: JudgeSpec, messages: list[dict[str, str]]) -> Answer:
    litellm = judges.litellm
    response = await litellm.acompletion(
        model=judge.model,
        messages=messages,
        api_base=judge.api_base,
        api_key=api_key_for(judge, litellm),
        temperature=judge.temperature,
        max_tokens=judge.max_tokens,
        timeout=judge.timeout,
        num_retries=0,
        max_retries=0,
    )
    content = response.choices[0].message.content if response.choices else None
    return Answer(content or "", *usage_and_cost(litellm, response, judge.model))


async def judge_item(judges: Connections, config: JuryConfig, work: WorkItem) -> VerdictOutcome:
    """Ask one judge about one item; parse its answer, reminding it once if the answer cannot be read.

    Always returns an outcome (ok or failed with the reason and the raw text, not yet redacted: the runner
    redacts it on its way to the database); only missing credentials and cancellation propagate.
    """
    rubric = config.rubric
    started = time.perf_counter()
    spent = [0, 0, 0.0, True]
    raw: list[str] = []

    def outcome(status: str, scores: dict | None = None, explanations: dict | None = None,
                error: str | None = None) -> VerdictOutcome:
        return VerdictOutcome(
            item_id=work.item_id, judge=work.judge.model, cache_key=work.cache_key, status=status,
            scores=scores or {}, explanations=explanations or {},
            prompt=work.prompt.text, raw_response=REMINDER_SEPARATOR.join(raw), error=error,
            latency_seconds=time.perf_counter() - started, prompt_tokens=int(spent[0]),
            completion_tokens=int(spent[1]), cost_usd=float(spent[2]), cost_known=bool(spent[3]),
            sample=work.sample,
        )

    def add(answer: Answer) -> None:
        raw.append(answer.text)
        spent[0] += answer.prompt_tokens
        spent[1] += answer.completion_tokens
        spent[2] += answer.cost_usd
        spent[3] = spent[3] and answer.cost_known

    messages = work.prompt.messages
    try:
        first = await complete(judges, work.judge, config, messages)
    except CallFailed as exc:
        return outcome(VerdictStatus.failed.value, error=f"call failed: {exc}")
    add(first)
    try:
        parsed = parse_verdict(first.text, rubric, work.prompt.fence_tags, prompt_text=work.prompt.text)
        return outcome(VerdictStatus.ok.value, parsed.scores, parsed.explanations)
    except VerdictParseError as exc:
        first_reason = exc.reason
    retry = [*messages, {"role": "assistant", "content": first.text},
             {"role": "user", "content": reminder_message(first_reason, rubric)}]
    try:
        second = await complete(judges, work.judge, config, retry)
    except CallFailed as exc:
        return outcome(VerdictStatus.failed.value,
                       error=f"unparseable answer ({first_reason}); the retry call failed: {exc}")
    add(second)
    try:
        parsed = parse_verdict(second.text, rubric, work.prompt.fence_tags, prompt_text=work.prompt.text)
    except VerdictParseError as exc:
        return outcome(VerdictStatus.failed.value,
                       error=f"unparseable answer after a reminder: {exc.reason} (first answer: {first_reason})")
    return outcome(VerdictStatus.ok.value, parsed.scores, parsed.explanations)
