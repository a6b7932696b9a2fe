"""The Batch API's files: what an upload holds, and the input file OpenAI would accept.

An uploaded JSONL file of ``{"custom_id", "method": "POST", "url": "/v1/chat/completions",
"body"}`` lines is checked line by line at upload, as OpenAI checks it: a bad line is a 400
naming it (not JSON, no or a duplicate ``custom_id``, another method or url, no body or model,
a second model, a stream), so a client's mistakes show before a batch is made of it. Uploads of
other purposes are stored as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from swarm_tui.sim.error_bodies import bad_request_error

__all__ = [
    "ENDPOINT",
    "MAX_LINES",
    "MAX_BYTES",
    "PURPOSES",
    "OPENAI_ENDPOINTS",
    "InputLine",
    "StoredFile",
    "parse_batch_file",
]

#: the one endpoint the simulator's batches serve
ENDPOINT = "/v1/chat/completions"
#: OpenAI's limits of a batch input file
MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024
#: files with these purposes are accepted (only ``batch`` files are parsed)
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
#: what OpenAI supports as ``endpoint`` (all but ours are refused as not simulated)
OPENAI_ENDPOINTS = (
    "/v1/responses",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/completions",
    "/v1/moderations",
    "/v1/images/generations",
    "/v1/images/edits",
    "/v1/videos",
)
#: how long OpenAI keeps a batch input or output file
FILE_TTL_S = 30 * 86_400


@dataclass(slots=True)
class InputLine:
    #: 1-based line number in the uploaded file
    line: int
    custom_id: str
    #: the request body, re-encoded as JSON (what ``chat`` reads)
    body: bytes


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int
    #: a batch input file's requests (None for other purposes)
    lines: list[InputLine] | None = None
    #: the model every line of a batch input file asks for
    model: str | None = None

    def obj(self) -> dict[str, Any]:
        """The OpenAI File object."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "expires_at": self.created_at + FILE_TTL_S if self.purpose in ("batch", "batch_output") else None,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }


def parse_batch_file(data: bytes) -> tuple[list[InputLine], str]:
    """The requests of a batch input file and their model; ApiError (400, naming the line)
    on the first line OpenAI would refuse."""
    if len(data) > MAX_BYTES:
        raise bad_request_error(
            f"The file is {len(data)} bytes; a batch input file can be up to {MAX_BYTES} bytes.",
            "file",
            "file_too_large",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        where = data[: e.start].count(b"\n") + 1
        raise bad_request_error(
            f"Line {where}: the file is not valid UTF-8.", "file", "invalid_json_line", where
        ) from None
    lines: list[InputLine] = []
    first: dict[str, int] = {}
    model: tuple[str, int] | None = None
    for n, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        if len(lines) >= MAX_LINES:
            raise bad_request_error(
                f"Line {n}: a batch input file can hold up to {MAX_LINES} requests.", "file", "too_many_requests", n
            )
        line, line_model = _input_line(n, raw, first, model)
        if model is None:
            model = (line_model, n)
        lines.append(line)
    if not lines:
        raise bad_request_error(
            "The file is empty: a batch input file needs at least one request line.", "file", "empty_file"
        )
    assert model is not None
    return lines, model[0]


def _input_line(n: int, raw: str, first: dict[str, int], model: tuple[str, int] | None) -> tuple[InputLine, str]:
    """Line ``n`` as a request and its model, or the 400 naming what is wrong with it. ``first``: the
    line of each custom_id seen (this one's added); ``model``: the file's model and its first line."""
    try:
        item = json.loads(raw)
    except ValueError as e:
        raise bad_request_error(
            f"Line {n}: this line is not valid JSON ({e}).", "file", "invalid_json_line", n
        ) from None
    if not isinstance(item, dict):
        raise bad_request_error(f"Line {n}: each line must be a JSON object.", "file", "invalid_json_line", n)
    cid = item.get("custom_id")
    if cid is None:
        raise bad_request_error(
            f"Line {n}: missing required parameter 'custom_id'.", "custom_id", "missing_required_parameter", n
        )
    if not isinstance(cid, str) or not cid:
        raise bad_request_error(
            f"Line {n}: 'custom_id' must be a non-empty string, got {cid!r}.", "custom_id", "invalid_custom_id", n
        )
    if cid in first:
        raise bad_request_error(
            f"Line {n}: the custom_id {cid!r} is also on line {first[cid]}; each custom_id must be "
            "unique within a batch file.",
            "custom_id",
            "duplicate_custom_id",
            n,
        )
    first[cid] = n
    method = item.get("method")
    if method != "POST":
        raise bad_request_error(
            f"Line {n}: invalid 'method' {method!r}; batch requests must use 'POST'.", "method", "invalid_method", n
        )
    url = item.get("url")
    if url != ENDPOINT:
        what = "not supported by the simulator" if url in OPENAI_ENDPOINTS else "not a batch endpoint"
        raise bad_request_error(f"Line {n}: the url {url!r} is {what}; use {ENDPOINT!r}.", "url", "invalid_url", n)
    body = item.get("body")
    if not isinstance(body, dict):
        raise bad_request_error(
            f"Line {n}: missing or invalid 'body'; it must be a JSON object.",
            "body",
            "missing_required_parameter" if body is None else "invalid_body",
            n,
        )
    m = body.get("model")
    if not isinstance(m, str) or not m:
        raise bad_request_error(
            f"Line {n}: missing required parameter 'body.model'.", "body.model", "missing_required_parameter", n
        )
    if model is not None and m != model[0]:
        raise bad_request_error(
            f"Line {n}: the model {m!r} differs from {model[0]!r} on line {model[1]}; each batch file must "
            "only include requests to a single model.",
            "body.model",
            "mismatched_model",
            n,
        )
    if body.get("stream") is True:
        raise bad_request_error(
            f"Line {n}: streaming is not supported in batch requests ('body.stream').",
            "body.stream",
            "invalid_value",
            n,
        )
    return InputLine(n, cid, _dumps(body)), m


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
