"""A batch's files: the input files its tasks go out in (within the provider's limits), and what
the finished batch's files say of each line — an answer, an error, or nothing (a cancelled
batch's lines that never ran), read the way a live call's answer is."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.task import Task
from swarm_tui.core.usage import Usage
from swarm_tui.providers.classify import BadResponseError
from swarm_tui.providers.client import CallResult, chat_completion_or_raise, wire_body

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchLimits:
    """The provider's limits on one batch (OpenAI: 50,000 requests, 200 MB input file)."""

    max_requests: int = 50_000
    max_bytes: int = 200 * 1024 * 1024


def input_line(task: Task) -> bytes:
    """A task as one line of a Batch input file (what a live call would send, streaming aside)."""
    body = {k: v for k, v in wire_body(task.body).items() if k not in ("stream", "stream_options")}
    line = {"custom_id": task.custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def input_files(
    indices: list[int], tasks: Mapping[int, Task], limits: BatchLimits
) -> Iterator[list[tuple[int, bytes]]]:
    """The tasks as input files within the provider's limits (requests and bytes a file), one
    model a file (OpenAI and Kimi refuse a file that names two)."""
    by_model: dict[str, list[int]] = {}
    for index in indices:
        by_model.setdefault(str(tasks[index].body.get("model")), []).append(index)
    for same_model in by_model.values():
        chunk: list[tuple[int, bytes]] = []
        size = 0
        for index in same_model:
            line = input_line(tasks[index])
            if chunk and (len(chunk) >= limits.max_requests or size + len(line) > limits.max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append((index, line))
            size += len(line)
        if chunk:
            yield chunk


EXPIRED_CODE = "batch_expired"
MISSING_CODE = "batch_missing"


def line_outcome(
    line: dict[str, Any] | None,
    status: str,
    why_failed: str | None,
    classify_answer: Callable[..., CallError],
) -> CallResult | CallError | None:
    """A task's line of a finished batch: its answer, its error, or None when it was not run
    because the batch was cancelled."""
    if line is None:
        if status == "cancelled":
            return None
        if status == "expired":
            return CallError(ErrorClass.TIMEOUT, "the batch expired before this line ran", None, EXPIRED_CODE)
        if status == "failed":
            return CallError(
                ErrorClass.BAD_REQUEST, f"the provider failed the batch: {why_failed}", None, "batch_failed"
            )
        return CallError(ErrorClass.BAD_RESPONSE, "the batch ended without a line for this task", None, MISSING_CODE)
    response = line.get("response") if isinstance(line.get("response"), dict) else None
    if response is None:
        error: dict[str, Any] = line["error"] if isinstance(line.get("error"), dict) else {}
        code = error.get("code")
        message = str(error.get("message") or "the batch line has neither a response nor an error")
        if code == EXPIRED_CODE:
            return CallError(ErrorClass.TIMEOUT, message, None, EXPIRED_CODE)
        if status == "cancelled" and code in ("batch_cancelled", "cancelled"):
            return None
        return CallError(ErrorClass.BAD_REQUEST, message, None, str(code) if code else None)
    request_id = response.get("request_id")
    body = response.get("body")
    status_code = response.get("status_code")
    if status_code != 200:
        return classify_answer(status_code if isinstance(status_code, int) else 500, body, request_id)
    try:
        data = chat_completion_or_raise(json.dumps(body).encode(), "application/json", 200, request_id)
    except BadResponseError as exc:
        return CallError(ErrorClass.BAD_RESPONSE, str(exc), 200, "bad_response", request_id=request_id)
    return CallResult(data, Usage.from_response(data.get("usage")), request_id or data.get("id"))


def jsonl(data: bytes) -> Iterable[dict[str, Any]]:
    for raw in data.splitlines():
        raw = raw.strip()
        if not raw:
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            log.warning("a batch output line that is not JSON was skipped: %r", raw[:200])
            continue
        if isinstance(line, dict):
            yield line


def batch_errors(batch: dict[str, Any]) -> str | None:
    errors = batch.get("errors") or {}
    data = errors.get("data") if isinstance(errors, dict) else None
    if not data:
        return None
    return "; ".join(str(e.get("message") or e.get("code")) for e in data if isinstance(e, dict))
