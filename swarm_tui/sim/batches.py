"""The simulator's OpenAI Batch API: uploaded files, batches, and the clock that moves them.

What a client sees is what OpenAI's ``/v1/files`` and ``/v1/batches`` answer (the routes are
in ``server.py``): an uploaded JSONL file of ``{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body"}`` lines is checked line by line at upload (a bad line is a
400 naming it: ``batch_files.py``), a batch made from it (``batch_object.py``) moves
validating → in_progress → finalizing → completed, and its results are an output file (lines
that succeeded) and an error file (lines that did not), each line in OpenAI's format::

    {"id": "batch_req_...", "custom_id": "...", "response": {"status_code": 200,
     "request_id": "req_...", "body": {<chat.completion>}}, "error": null}     # output file
    {"id": ..., "custom_id": ..., "response": {"status_code": 500, "request_id": ...,
     "body": {"error": {...}}}, "error": null}                                 # a failed line
    {"id": ..., "custom_id": ..., "response": null, "error": {"code": "batch_expired",
     "message": "This request could not be executed before the completion window expired."}}

Time is OpenAI's hours compressed into ``SimConfig.batch_seconds`` (T, read when the batch is
created): validating for the first 10% of T, in progress until 90% (``request_counts`` grow
linearly over that stretch), finalizing until T, then completed. The state is a pure function
of the clock: every read (retrieve, list, cancel) first brings the batch up to the present,
and the server's pump does the same every few tens of milliseconds so the work is spread
out rather than done at the first read. The ``*_at`` timestamps are the scheduled moments,
not the moments someone looked.

Each line is answered by ``Simulator.chat_offline`` (the live ``chat`` decision, without the
live rate limits or the live counters); ``batch_error_rate`` fails a further seeded share of
lines with a 500 before they reach it. With ``batch_expire_after`` = P a batch runs only
the first P of its lines, stays in progress until T, then ends ``expired``: the lines that
ran are in the output/error files, the rest in the error file as ``batch_expired``. A
cancelled batch runs no more lines; it is ``cancelling`` for 10% of T, then ``cancelled``
with the lines that ran in its files (the ones never run are in neither).
``request_counts.failed`` counts error-file lines (expired ones included).

All state lives in the server's event loop; nothing here locks or awaits.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from swarm_tui.sim import error_bodies
from swarm_tui.sim.batch_files import InputLine, StoredFile, parse_batch_file
from swarm_tui.sim.batch_object import Batch, read_create
from swarm_tui.sim.error_bodies import ApiError, bad_request_error, not_found_error

if TYPE_CHECKING:
    from swarm_tui.sim.core import Simulator

__all__ = ["BatchStore"]

#: shares of ``batch_seconds``: validating until the first, in progress until the second
_VALIDATING = 0.1
_IN_PROGRESS_END = 0.9
#: share of ``batch_seconds`` a batch spends cancelling
_CANCELLING = 0.1
_TERMINAL = frozenset({"completed", "expired", "cancelled", "failed"})
_EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _u(seed: int, custom_id: str, nth: int) -> float:
    """The seeded uniform draw deciding whether ``batch_error_rate`` fails a line."""
    h = hashlib.blake2b(f"{seed}\x00batch\x00{custom_id}\x00{nth}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64


class BatchStore:
    """Files and batches of one simulator, and the Batch API counters (``stats``)."""

    def __init__(self, sim: Simulator, clock: Callable[[], float] = time.monotonic, run: str = "0") -> None:
        self.sim = sim
        self.clock = clock
        self._run = run
        self._seq = 0
        self.files: dict[str, StoredFile] = {}
        #: in creation order (the list answers newest first)
        self.batches: dict[str, Batch] = {}
        self._active: dict[str, Batch] = {}
        self._by_custom_id: dict[str, int] = {}
        self.files_uploaded = 0
        self.files_rejected = 0
        self.batches_created = 0
        self.lines_submitted = 0
        self.lines_by_custom_id_max = 0
        self.lines_succeeded = 0
        self.lines_failed = 0
        self.lines_injected_errors = 0
        self.lines_expired = 0
        self.lines_not_run = 0
        self.ended: dict[str, int] = {"completed": 0, "expired": 0, "cancelled": 0}

    def _id(self, prefix: str, width: int) -> str:
        self._seq += 1
        return f"{prefix}{self._run}{self._seq:0{width}x}"

    # -- files -------------------------------------------------------------------------

    def upload(self, data: bytes, filename: str, purpose: str) -> StoredFile:
        """Store an uploaded file (a ``batch`` one only when every line is valid)."""
        lines: list[InputLine] | None = None
        model: str | None = None
        if purpose == "batch":
            try:
                lines, model = parse_batch_file(data)
            except ApiError:
                self.files_rejected += 1
                raise
        f = StoredFile(self._id("file-", 14), filename, purpose, data, int(time.time()), lines, model)
        self.files[f.id] = f
        self.files_uploaded += 1
        return f

    def file(self, file_id: str) -> StoredFile:
        f = self.files.get(file_id)
        if f is None:
            raise not_found_error("File", file_id, "id")
        return f

    def delete_file(self, file_id: str) -> dict[str, Any]:
        self.file(file_id)
        del self.files[file_id]
        return {"id": file_id, "object": "file", "deleted": True}

    def list_files(self, purpose: str | None = None) -> dict[str, Any]:
        data = [f.obj() for f in reversed(self.files.values()) if purpose is None or f.purpose == purpose]
        return {
            "object": "list",
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }

    # -- batches -----------------------------------------------------------------------

    def create(self, payload: Any, authorization: str | None) -> Batch:
        """``POST /v1/batches``: a new batch, ``validating``, its clock started."""
        file_id, window, metadata = read_create(payload)
        f = self.files.get(file_id)
        if f is None:
            raise not_found_error("File", file_id, "input_file_id")
        if f.purpose != "batch" or f.lines is None or f.model is None:
            raise bad_request_error(
                f"The file {file_id} was not uploaded with purpose 'batch'.", "input_file_id", "invalid_file_purpose"
            )
        nth: list[int] = []
        counts = self._by_custom_id
        for line in f.lines:
            k = counts.get(line.custom_id, 0)
            nth.append(k)
            counts[line.custom_id] = k + 1
            if k + 1 > self.lines_by_custom_id_max:
                self.lines_by_custom_id_max = k + 1
        cfg = self.sim.config
        b = Batch(
            id=self._id("batch_", 24),
            input_file_id=file_id,
            completion_window=window,
            metadata=metadata,
            model=f.model,
            lines=f.lines,
            nth=nth,
            authorization=authorization,
            t0=self.clock(),
            wall0=time.time(),
            seconds=cfg.batch_seconds,
            error_rate=cfg.batch_error_rate,
            expire_after=cfg.batch_expire_after,
            seed=cfg.seed,
        )
        self.batches[b.id] = b
        self._active[b.id] = b
        self.batches_created += 1
        self.lines_submitted += len(f.lines)
        return b

    def batch(self, batch_id: str) -> Batch:
        """The batch, brought up to the present (ApiError 404 when unknown)."""
        b = self.batches.get(batch_id)
        if b is None:
            raise not_found_error("batch", batch_id, "batch_id")
        self.advance(b, self.clock())
        return b

    def cancel(self, batch_id: str) -> Batch:
        """``POST /v1/batches/{id}/cancel``: no more lines run; cancelling, then cancelled."""
        b = self.batch(batch_id)
        if b.status in ("cancelling", "cancelled"):
            return b
        if b.status not in ("validating", "in_progress"):
            raise ApiError(
                409,
                error_bodies.error_body(
                    f"Cannot cancel a batch with status '{b.status}'.", "invalid_request_error", None, "conflict"
                ),
            )
        el = self.clock() - b.t0
        b.status = "cancelling"
        b.cancel_el = el
        b.stamp("cancelling_at", el)
        self.advance(b, b.t0 + el)
        return b

    def list_batches(self, after: str | None = None, limit: int = 20) -> dict[str, Any]:
        """``GET /v1/batches``: newest first, ``limit`` (1..100) after the batch ``after``."""
        self.advance_all()
        ids = list(reversed(self.batches))
        start = 0
        if after is not None:
            start = ids.index(after) + 1 if after in self.batches else len(ids)
        page = [self.batches[i].obj() for i in ids[start : start + limit]]
        return {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": start + limit < len(ids),
        }

    # -- the clock ---------------------------------------------------------------------

    @property
    def active(self) -> int:
        """Batches not yet in a final state."""
        return len(self._active)

    def advance_all(self, now: float | None = None) -> int:
        """Bring every unfinished batch up to ``now``; return how many are still unfinished."""
        now = self.clock() if now is None else now
        for b in list(self._active.values()):
            self.advance(b, now)
        return len(self._active)

    def advance(self, b: Batch, now: float) -> None:
        """Move ``b`` to where the clock says it is: status, lines run, files made."""
        if b.status in _TERMINAL:
            return
        T = b.seconds
        el = now - b.t0
        if b.status == "cancelling":
            assert b.cancel_el is not None
            end = b.cancel_el + _CANCELLING * T
            if el >= end:
                b.status = "cancelled"
                b.stamp("cancelled_at", end)
                self.lines_not_run += len(b.lines) - b.done
                self._end(b)
            return
        if b.status == "validating":
            if el < _VALIDATING * T:
                return
            b.status = "in_progress"
            b.stamp("in_progress_at", _VALIDATING * T)
        total = len(b.lines)
        if b.status == "in_progress":
            span = (_IN_PROGRESS_END - _VALIDATING) * T
            due = total if span <= 0 or el >= _IN_PROGRESS_END * T else math.ceil(total * (el - _VALIDATING * T) / span)
            self._run_lines(b, min(due, b.limit))
            if b.limit < total:
                if el >= T:
                    b.status = "expired"
                    b.stamp("expired_at", T)
                    for i in range(b.done, total):
                        b.err.append(self._expired_line(b.lines[i]))
                    self.lines_expired += total - b.done
                    b.failed += total - b.done
                    self._end(b)
                return
            if el < _IN_PROGRESS_END * T:
                return
            b.status = "finalizing"
            b.stamp("finalizing_at", _IN_PROGRESS_END * T)
        if b.status == "finalizing" and el >= T:
            b.status = "completed"
            b.stamp("completed_at", T)
            self._end(b)

    def _end(self, b: Batch) -> None:
        """A final state: the output and error files are made; the batch leaves the pump."""
        if b.out:
            b.output_file_id = self._result_file(b, "output", b.out).id
        if b.err:
            b.error_file_id = self._result_file(b, "error", b.err).id
        b.out, b.err = [], []
        self.ended[b.status] = self.ended.get(b.status, 0) + 1
        self._active.pop(b.id, None)

    def _result_file(self, b: Batch, kind: str, lines: list[bytes]) -> StoredFile:
        f = StoredFile(
            self._id("file-", 14), f"{b.id}_{kind}.jsonl", "batch_output", b"\n".join(lines) + b"\n", int(time.time())
        )
        self.files[f.id] = f
        return f

    # -- running lines -----------------------------------------------------------------

    def _run_lines(self, b: Batch, upto: int) -> None:
        sim = self.sim
        while b.done < upto:
            i = b.done
            line = b.lines[i]
            b.done += 1
            if b.error_rate > 0 and _u(b.seed, line.custom_id, b.nth[i]) < b.error_rate:
                self.lines_injected_errors += 1
                status, body = error_bodies.server_error(500)
                self._failed(b, line, status, self._id("req_batch", 20), body)
                continue
            reply = sim.chat_offline(line.body, b.authorization)
            request_id = reply.headers.get("x-request-id") or self._id("req_batch", 20)
            if reply.status == 200 and reply.body is not None:
                usage = reply.body["usage"]
                b.input_tokens += usage["prompt_tokens"]
                b.cached_tokens += usage["prompt_tokens_details"]["cached_tokens"]
                b.output_tokens += usage["completion_tokens"]
                b.reasoning_tokens += usage["completion_tokens_details"]["reasoning_tokens"]
                b.completed += 1
                self.lines_succeeded += 1
                b.out.append(
                    _dumps(
                        {
                            "id": self._id("batch_req_", 24),
                            "custom_id": line.custom_id,
                            "response": {"status_code": 200, "request_id": request_id, "body": reply.body},
                            "error": None,
                        }
                    )
                )
            elif reply.body is not None:
                self._failed(b, line, reply.status, request_id, reply.body)
            else:  # a stream plan: refused at upload, so never here
                status, body = error_bodies.bad_request("Streaming is not supported in batch requests.", "stream")
                self._failed(b, line, status, request_id, body)

    def _failed(self, b: Batch, line: InputLine, status: int, request_id: str, body: dict[str, Any]) -> None:
        b.failed += 1
        self.lines_failed += 1
        b.err.append(
            _dumps(
                {
                    "id": self._id("batch_req_", 24),
                    "custom_id": line.custom_id,
                    "response": {"status_code": status, "request_id": request_id, "body": body},
                    "error": None,
                }
            )
        )

    def _expired_line(self, line: InputLine) -> bytes:
        return _dumps(
            {
                "id": self._id("batch_req_", 24),
                "custom_id": line.custom_id,
                "response": None,
                "error": {"code": "batch_expired", "message": _EXPIRED_MESSAGE},
            }
        )

    # -- counters ----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The Batch API counters (``Simulator.stats()["batch"]``, which adds ``chat``)."""
        return {
            "files_uploaded": self.files_uploaded,
            "files_rejected": self.files_rejected,
            "batches_created": self.batches_created,
            "lines_submitted": self.lines_submitted,
            "lines_by_custom_id_max": self.lines_by_custom_id_max,
            "custom_ids_resubmitted": sum(1 for n in self._by_custom_id.values() if n > 1),
            "lines_succeeded": self.lines_succeeded,
            "lines_failed": self.lines_failed,
            "lines_injected_errors": self.lines_injected_errors,
            "lines_expired": self.lines_expired,
            "lines_not_run": self.lines_not_run,
            "active": len(self._active),
            "completed": self.ended.get("completed", 0),
            "expired": self.ended.get("expired", 0),
            "cancelled": self.ended.get("cancelled", 0),
        }
