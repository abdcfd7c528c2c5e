"""A loopback OpenAI-compatible server with scripted answers, for the jury's tests and benchmark.

It serves ``POST /v1/chat/completions`` on 127.0.0.1 (standard library only, one thread per connection,
HTTP/1.1 keep-alive). What it answers is decided per call by a *scenario* word found in the prompt
(``SCENARIO=<word>``, which a test puts in an item's output) and by how many times that same prompt was
asked of that same model before, so "garbage, then good on the reminder" and "429, then success" can be
scripted. Every request is recorded in ``calls``. No test reaches the internet through it.

Scenarios: ``good`` (default), ``prose``, ``fence``, ``garbage_then_good``, ``garbage``, ``bad_score``,
``rate_limit_then_good`` (429 with Retry-After), ``server_error_then_good`` (500), ``slow_then_good``
(first answer after ``slow_seconds``), ``echo_injection`` (the judge quotes the fenced response, which holds
a fake verdict, and then gives its own), ``always_500``, ``echo_auth`` (a good verdict whose explanations
and text quote the request's Authorization header), ``echo_auth_error`` (a 400 whose message quotes it) and
``unauthorized`` (a 401, as OpenAI answers a wrong key, quoting the key). Each call's ``User-Agent`` is recorded
(``user_agent``), which tells the openai SDK's client from others.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

try:
    from support.fake_batches import FakeBatches
except ImportError:  # run as a script (the benchmark): tests/support is the script's directory
    from fake_batches import FakeBatches  # type: ignore[no-redef]

SCENARIO = re.compile(r"SCENARIO=([a-z0-9_]+)")
FENCED_RESPONSE = re.compile(r"(<response_[0-9a-f]+>.*?</response_[0-9a-f]+>)", re.DOTALL)


def default_scores(model: str) -> dict[str, int]:
    """Deterministic scores per judge model, so tests can check means: judge names ending in 'b' are lower."""
    return {"accuracy": 2, "completeness": 3, "clarity": 4} if model.endswith("b") else \
        {"accuracy": 4, "completeness": 3, "clarity": 5}


def verdict_json(scores: dict[str, int]) -> str:
    return json.dumps({c: {"score": s, "explanation": f"{c} looks like {s}."} for c, s in scores.items()})


class FakeOpenAI:
    """Start with :meth:`start` (returns the ``/v1`` base URL), stop with :meth:`stop`.

    Parameters
    ----------
    latency
        Seconds every answer waits before it is sent (simulates a provider).
    slow_seconds
        How long the first answer of the ``slow_then_good`` scenario takes.
    scores
        Judge model -> scores it gives; default :func:`default_scores`.
    judge
        Optional (judge model, prompt) -> scores, for tests whose judge must read the prompt (its version, the
        response it holds); it takes the place of ``scores``.
    """

    def __init__(self, latency: float = 0.0, slow_seconds: float = 3.0,
                 scores: Callable[[str], dict[str, int]] = default_scores, port: int = 0,
                 judge: Callable[[str, str], dict[str, int]] | None = None) -> None:
        self.latency = latency
        self.slow_seconds = slow_seconds
        self.scores = scores
        self.judge = judge
        self.calls: list[dict[str, Any]] = []
        self.attempts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        #: /v1/files and /v1/batches (support.fake_batches): a batch's lines are answered by :meth:`answer`
        self.batches = FakeBatches(self)

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body leave in one segment: two small writes meet Nagle and delayed ACKs (~40 ms).
            disable_nagle_algorithm = True
            wbufsize = -1

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._send(*fake.batches.get(self.path))

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                if FakeBatches.handles(self.path):
                    raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self._send(*fake.batches.post(self.path, self.headers, raw))
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                status, payload, headers = fake.answer(body, dict(self.headers))
                self._send(status, payload, headers)

            def _send(self, status: int, payload: dict | bytes, headers: dict[str, str] | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    if "Content-Type" not in (headers or {}):
                        self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self._server = Server(("127.0.0.1", self._port), Handler)
        threading.Thread(target=self._server.serve_forever, args=(0.02,), name="fake-openai", daemon=True).start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def calls_for(self, scenario: str) -> list[dict[str, Any]]:
        """The recorded requests whose prompt carries this scenario."""
        return [c for c in self.calls if c["scenario"] == scenario]

    def answer(self, body: dict, headers: dict[str, str]) -> tuple[int, dict, dict[str, str]]:
        """Decide the reply to one request: (HTTP status, JSON payload, extra headers)."""
        model = str(body.get("model", ""))
        messages = body.get("messages") or [{"content": ""}]
        first = str(messages[0].get("content", ""))
        found = SCENARIO.search(first)
        scenario = found.group(1) if found else "good"
        key = (model, hashlib.sha256(first.encode()).hexdigest())
        with self._lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
            self.calls.append({"model": model, "scenario": scenario, "attempt": attempt, "messages": messages,
                               "authorization": headers.get("Authorization") or headers.get("authorization"),
                               "user_agent": headers.get("User-Agent") or headers.get("user-agent"),
                               "temperature": body.get("temperature"), "max_tokens": body.get("max_tokens")})
        if self.latency:
            time.sleep(self.latency)
        good = verdict_json(self.judge(model, first) if self.judge else self.scores(model))
        if scenario == "rate_limit_then_good" and attempt == 1:
            return 429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}, {"Retry-After": "1"}
        auth = str(headers.get("Authorization") or headers.get("authorization"))
        if scenario == "unauthorized":
            return 401, {"error": {"message": f"Incorrect API key provided: {auth}", "type": "invalid_request_error",
                                   "code": "invalid_api_key"}}, {}
        if scenario == "echo_auth_error":
            return 400, {"error": {"message": f"Invalid header: Authorization: {auth}", "type": "invalid_request"}}, {}
        if scenario == "echo_auth":
            scores = self.judge(model, first) if self.judge else self.scores(model)
            quoted = {c: {"score": s, "explanation": f"You sent {auth}."} for c, s in scores.items()}
            return 200, completion(model, f"Your header was {auth}.\n{json.dumps(quoted)}",
                                   prompt_chars=len(first)), {}
        if scenario == "server_error_then_good" and attempt == 1 or scenario == "always_500":
            return 500, {"error": {"message": "The server had an error", "type": "server_error"}}, {}
        if scenario == "slow_then_good" and attempt == 1:
            time.sleep(self.slow_seconds)
        text = {
            "prose": f"After careful review, here is my evaluation.\n{good}\nI hope this helps.",
            "fence": f"Sure.\n```json\n{good}\n```\n",
            "garbage_then_good": "The answer seems mostly fine to me." if attempt == 1 else good,
            "garbage": "I would rather not give numbers.",
            "bad_score": verdict_json({"accuracy": 7, "completeness": 3, "clarity": 5}),
        }.get(scenario, good)
        if scenario == "echo_injection":
            fenced = FENCED_RESPONSE.search(first)
            text = f"The response reads:\n{fenced.group(1) if fenced else ''}\nMy verdict:\n{good}"
        return 200, completion(model, text, prompt_chars=sum(len(str(m.get("content", ""))) for m in messages)), {}


def completion(model: str, text: str, prompt_chars: int) -> dict[str, Any]:
    """An OpenAI chat.completion payload with usage (prompt tokens ~ characters / 4, 50 completion tokens)."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": 50,
                  "total_tokens": prompt_chars // 4 + 50},
    }


def main() -> None:
    """Serve until killed: ``python tests/support/fake_openai_server.py --port 8765 --latency 0.1``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    server = FakeOpenAI(latency=args.latency, port=args.port)
    print(server.start(), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
