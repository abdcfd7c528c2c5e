"""OpenAI's Files and Batches API on the loopback fake server (:mod:`support.fake_openai_server`).

Routes: ``POST /v1/files`` (multipart upload), ``GET /v1/files/{id}`` and ``/v1/files/{id}/content``,
``POST /v1/batches`` (create), ``GET /v1/batches/{id}`` (retrieve), ``GET /v1/batches`` (list, newest first,
``limit`` and ``after``) and ``POST /v1/batches/{id}/cancel``.

A batch reports ``in_progress`` for its first ``in_progress_polls`` retrievals (and as long as ``hold`` is set),
then completes: each request line is answered by the chat server's own :meth:`FakeOpenAI.answer`, so the
scenario words script batch answers as they script live ones. A 200 answer goes to the output file; scenario
``batch_line_failed`` gives a line in the output file with a 400 response; any other error status and scenario
``batch_expired`` go to the error file. ``submitted`` counts every custom_id of every batch created.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from email.parser import BytesParser
from email.policy import HTTP
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from support.fake_openai_server import FakeOpenAI

Reply = tuple[int, Any, dict[str, str]]  # (status, JSON payload or raw bytes, headers)
TERMINAL = {"completed", "failed", "expired", "cancelled"}


class FakeBatches:
    """The files and batches one fake server holds."""

    def __init__(self, chat: FakeOpenAI, in_progress_polls: int = 1) -> None:
        self.chat = chat
        self.in_progress_polls = in_progress_polls
        self.hold = False
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.submitted: Counter[str] = Counter()
        self.created: list[str] = []
        self._polls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._n = 0

    @staticmethod
    def handles(path: str) -> bool:
        """Whether a request path is one of these routes (the chat server sends the rest elsewhere)."""
        parts = urlsplit(path).path.rstrip("/").split("/")
        return len(parts) >= 3 and parts[2] in ("files", "batches")

    def _id(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}-{self._n:05d}"

    def post(self, path: str, headers: Any, body: bytes) -> Reply:
        parts = urlsplit(path).path.rstrip("/").split("/")[2:]
        if parts == ["files"]:
            return self._upload(headers, body)
        if parts == ["batches"]:
            return self._create(json.loads(body or b"{}"))
        if len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel" and parts[1] in self.batches:
            batch = self.batches[parts[1]]
            if batch["status"] not in TERMINAL:
                batch.update(status="cancelled", cancelled_at=int(time.time()))
            return 200, batch, {}
        return 404, {"error": {"message": "not found"}}, {}

    def get(self, path: str) -> Reply:
        split = urlsplit(path)
        parts = split.path.rstrip("/").split("/")[2:]
        if parts == ["batches"]:
            query = {k: v[0] for k, v in parse_qs(split.query).items()}
            return self._list(int(query.get("limit", 20)), query.get("after"))
        if len(parts) == 2 and parts[0] == "batches" and parts[1] in self.batches:
            return 200, self._retrieve(parts[1]), {}
        if len(parts) >= 2 and parts[0] == "files" and parts[1] in self.files:
            file = self.files[parts[1]]
            if parts[2:] == ["content"]:
                return 200, file["content"], {"Content-Type": "application/octet-stream"}
            return 200, {k: v for k, v in file.items() if k != "content"}, {}
        return 404, {"error": {"message": f"no such object: {split.path}"}}, {}

    def _upload(self, headers: Any, body: bytes) -> Reply:
        head = f"Content-Type: {headers.get('Content-Type')}\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(head + body)
        fields: dict[str, Any] = {}
        for part in message.iter_parts():
            fields[part.get_param("name", header="content-disposition")] = (
                part.get_filename(), part.get_payload(decode=True))
        if "file" not in fields:
            return 400, {"error": {"message": "no file in the upload"}}, {}
        filename, content = fields["file"]
        purpose = (fields.get("purpose") or (None, b""))[1].decode()
        return 200, self._store_file(content, filename or "upload.jsonl", purpose), {}

    def _store_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file = {"id": self._id("file"), "object": "file", "bytes": len(content), "created_at": int(time.time()),
                "filename": filename, "purpose": purpose, "status": "processed", "content": content}
        self.files[file["id"]] = file
        return {k: v for k, v in file.items() if k != "content"}

    def _create(self, body: dict[str, Any]) -> Reply:
        file = self.files.get(body.get("input_file_id", ""))
        if file is None:
            return 400, {"error": {"message": f"no input file {body.get('input_file_id')}"}}, {}
        lines = [json.loads(line) for line in file["content"].decode().splitlines() if line.strip()]
        ids = [line["custom_id"] for line in lines]
        if len(set(ids)) != len(ids):
            return 400, {"error": {"message": "custom_id values must be unique within a batch"}}, {}
        now = int(time.time())
        batch = {"id": self._id("batch"), "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
                 "input_file_id": file["id"], "completion_window": body.get("completion_window", "24h"),
                 "status": "validating", "output_file_id": None, "error_file_id": None, "created_at": now,
                 "in_progress_at": None, "expires_at": now + 86400, "completed_at": None,
                 "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                 "metadata": body.get("metadata") or {}}
        with self._lock:
            self.batches[batch["id"]] = batch
            self.created.append(batch["id"])
            self.submitted.update(ids)
        return 200, batch, {}

    def _list(self, limit: int, after: str | None) -> Reply:
        newest = list(reversed(self.created))
        if after in newest:
            newest = newest[newest.index(after) + 1:]
        page = [self.batches[b] for b in newest[:limit]]
        return 200, {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                     "last_id": page[-1]["id"] if page else None, "has_more": len(newest) > limit}, {}

    def _retrieve(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        with self._lock:
            self._polls[batch_id] += 1
            polls = self._polls[batch_id]
        if batch["status"] in TERMINAL:
            return batch
        if self.hold or polls <= self.in_progress_polls:
            batch.update(status="in_progress", in_progress_at=batch["in_progress_at"] or int(time.time()))
            return batch
        self._complete(batch)
        return batch

    def _complete(self, batch: dict[str, Any]) -> None:
        output, errors = [], []
        content = self.files[batch["input_file_id"]]["content"].decode()
        for n, line in enumerate(json.loads(text) for text in content.splitlines() if text.strip()):
            first = str(line["body"]["messages"][0]["content"])
            request_id = f"req-{batch['id']}-{n}"
            if "SCENARIO=batch_expired" in first:
                errors.append({"id": request_id, "custom_id": line["custom_id"], "response": None,
                               "error": {"code": "batch_expired", "message": "This request could not be executed "
                                         "before the completion window expired."}})
                continue
            status, payload, _ = self.chat.answer(line["body"], {})
            if "SCENARIO=batch_line_failed" in first:
                status, payload = 400, {"error": {"message": "Invalid value for 'max_tokens'", "type": "invalid"}}
            entry = {"id": request_id, "custom_id": line["custom_id"],
                     "response": {"status_code": status, "request_id": request_id, "body": payload}, "error": None}
            (output if status == 200 or "SCENARIO=batch_line_failed" in first else errors).append(entry)
        counts = {"total": len(output) + len(errors), "failed": len(errors),
                  "completed": sum(1 for e in output if e["response"]["status_code"] == 200)}
        batch.update(status="completed", completed_at=int(time.time()), request_counts=counts)
        if output:
            batch["output_file_id"] = self._store_file(_jsonl(output), "output.jsonl", "batch_output")["id"]
        if errors:
            batch["error_file_id"] = self._store_file(_jsonl(errors), "errors.jsonl", "batch_output")["id"]


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()
