"""OpenAI-compatible judges, called through the openai SDK's async client directly rather than through litellm.

Why: litellm spends 3-4 ms of CPU on every call (request building, a thread-pool hop, model-info and cost
look-ups), which holds one process well below what 50 calls at once at 100 ms allow (500 a second); the SDK's
client over aiohttp costs about a millisecond. For these judges litellm would speak the same protocol through the
same SDK, so nothing is lost (docs/benchmarks.md, "Jury throughput").

Which judges (:func:`speaks_openai`):

- ``openai/<model>``: OpenAI's API (``OPENAI_BASE_URL`` or ``OPENAI_API_BASE`` when set, as litellm reads them),
  or any server at the judge's ``api_base`` that speaks its protocol (vLLM, llama.cpp, LM Studio, Ollama's ``/v1``);
- ``hosted_vllm/<model>`` with an ``api_base``: litellm's name for a vLLM server, which speaks it too.

Not ``ollama/`` or ``ollama_chat/`` (litellm calls Ollama's own ``/api/generate`` and ``/api/chat``, not its
OpenAI endpoint), nor providers that are OpenAI-compatible under their own names (groq, together_ai, deepseek ...):
their base URLs, key variables and parameter quirks are litellm's knowledge, and they stay with litellm.

One client per judge and run, its connection pool sized to the judge's concurrency, over aiohttp (the SDK's
``DefaultAioHttpClient``: httpx costs about half as much CPU again per call), with the SDK's own retries off:
retries, back-off, Retry-After and timeouts are :func:`medhelm_core.jury.calls.complete`'s, the same for every judge.
The openai package is imported only when such a judge is called.
"""

from __future__ import annotations

import json
import os
from typing import Any

from medhelm_core.jury.config import JudgeSpec

#: provider prefix -> the environment variable litellm reads its key from
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "hosted_vllm": "HOSTED_VLLM_API_KEY"}
OPENAI_API = "https://api.openai.com/v1"


def provider(judge: JudgeSpec) -> str:
    """The litellm provider prefix of a judge's model name (``openai`` for ``openai/gpt-4o``), or ``""``."""
    return judge.model.split("/", 1)[0] if "/" in judge.model else ""


def speaks_openai(judge: JudgeSpec) -> bool:
    """Whether the judge is called through the openai SDK directly (see the module's docstring for which).

    Examples
    --------
    >>> speaks_openai(JudgeSpec("openai/gpt-4o")), speaks_openai(JudgeSpec("anthropic/claude-3-7-sonnet-20250219"))
    (True, False)
    >>> speaks_openai(JudgeSpec("hosted_vllm/llama", api_base="http://gpu:8000/v1"))
    True
    """
    name = provider(judge)
    return name == "openai" or (name == "hosted_vllm" and judge.api_base is not None)


def key_variable(judge: JudgeSpec) -> str | None:
    """The provider's key variable for a judge called directly (``OPENAI_API_KEY``); None for any other judge."""
    return KEY_VARIABLES[provider(judge)] if speaks_openai(judge) else None


def base_url(judge: JudgeSpec) -> str:
    """Where the judge's calls go: its API base, else OpenAI's (or the base URL litellm would read for it)."""
    if judge.api_base:
        return judge.api_base
    return os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or OPENAI_API


def open_client(judge: JudgeSpec, api_key: str | None) -> Any:
    """An ``AsyncOpenAI`` client for one judge: pool of ``concurrency`` connections, no retries of its own.

    ``api_key`` None lets the SDK read ``OPENAI_API_KEY``, and raise ``OpenAIError`` ("The api_key client option
    must be set") when it is unset, which the caller turns into a message naming the variable.
    """
    import openai

    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
        max_connections=judge.concurrency, max_keepalive_connections=judge.concurrency)
    try:
        http = openai.DefaultAioHttpClient(limits=limits, timeout=judge.timeout)
    except RuntimeError:  # the aiohttp extra missing: the SDK's default transport, slower but the same protocol
        http = openai.DefaultAsyncHttpxClient(limits=limits, timeout=judge.timeout)
    return openai.AsyncOpenAI(api_key=api_key, base_url=base_url(judge), max_retries=0, timeout=judge.timeout,
                              http_client=http)


async def chat(client: Any, judge: JudgeSpec, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
    """One chat completion: (the answer's text, the response's ``usage``). Errors are the SDK's, unretried.

    Sent with the client's ``post`` (which the SDK documents for requests it has no typed method for) rather than
    ``chat.completions.create``: ``create`` walks every message through its typed-parameter transform and builds a
    model of the response, half the CPU of a call, measured (docs/benchmarks.md); the body here is already what
    the API takes, encoded once (a ``body`` dict would be deep-copied per request), and the answer needs two
    fields. Everything else is the SDK's: the key, the base URL, the connection pool, the timeout, and an error
    per status (``RateLimitError`` with its ``Retry-After`` ...).

    OpenAI's own API gets ``max_completion_tokens`` (its reasoning models refuse ``max_tokens``, which litellm
    renames for them); a server at the judge's API base gets ``max_tokens``, which every compatible server reads.
    """
    body: dict[str, Any] = {"model": judge.model.split("/", 1)[1], "messages": messages,
                            "temperature": judge.temperature}
    body["max_tokens" if judge.api_base else "max_completion_tokens"] = judge.max_tokens
    raw = await client.post("/chat/completions", cast_to=bytes, content=json.dumps(body).encode(),
                            options=_options(judge.timeout))
    try:
        payload = json.loads(raw)
        choices = payload.get("choices") or [{}]
        content = (choices[0].get("message") or {}).get("content")
        usage = payload.get("usage") or {}
    except (ValueError, AttributeError, TypeError) as exc:  # not a chat completion: fail this call, not the run
        raise UnreadableResponse(f"the server's answer is not a chat completion: {raw[:200]!r}") from exc
    return content if isinstance(content, str) else "", usage if isinstance(usage, dict) else {}


_OPTIONS: dict[float, dict[str, Any]] = {}


def _options(timeout: float) -> dict[str, Any]:
    """The request options for a timeout, built once: the JSON body's content type, and the timeout."""
    found = _OPTIONS.get(timeout)
    if found is None:
        found = _OPTIONS[timeout] = {"timeout": timeout, "headers": {"Content-Type": "application/json"}}
    return found


class UnreadableResponse(ValueError):
    """A 2xx answer that is not a chat completion (a proxy's HTML page, a truncated body)."""
