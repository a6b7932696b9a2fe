"""Answers you can use: every answer checked against what the job asks for, before it is kept.

An answer that came back (a 200) is not yet a success. `AnswerChecks.verdict` says whether it is
usable, or which class of unusable it is:

* `refusal` — the model refused (`message.refusal`); `content_filter` — the provider's filter
  stopped it (`finish_reason: content_filter`): never done, whatever the job checks;
* `truncated` — cut at its token limit (`finish_reason: length`) where the answer is checked
  (`--on-truncated`: retried once with more room by default, failed, or checked as it is);
* `failed_check` — it fails a check: the body's own `response_format` (`json_schema`: validated
  against its schema; `json_object`: it parses), the job's `[answer]` or `--schema`
  (`jobs.answer_spec`). JSON is read robustly (fences, leading prose, a cut ending:
  `util.json_repair`) and the value read is kept (`parsed`).

What an unusable answer leads to is `AnswerChecks.follow_up`'s to say, each a new attempt of the
task (journaled, billed, under the budget; counted apart from transport retries):

* a failed check is asked again with the reason (`--reasks N`): the conversation goes back with
  the answer and what is wrong with it (the field's path and the message) as the next user turn;
* a truncated answer is asked once more with twice the room (up to the model's maximum from the
  price table), when the budget can hold it;
* past those, a task goes to the escalation endpoint (`--escalate PROFILE`) with the
  conversation so far, once; its attempts carry that endpoint's name;
* else the task fails with its class, and the answer's text is kept in the error.

The lanes call this module (the live lane's outcomes, the batch lane's lines, the cache lane's
replays, the Ray shards through the same engine): it holds no lane's state but which tasks went
to the escalation endpoint or were given more room in this session.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from json.scanner import make_scanner
from typing import Any, NamedTuple

from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.checks import AnswerSpec, Validator, resolve_python, takes_parsed
from swarm_tui.core.task import JSONObject
from swarm_tui.engine.calls import answer_message, finish_reason, first_choice
from swarm_tui.engine.ledger import answer_ceiling
from swarm_tui.engine.settings import AnswerSettings
from swarm_tui.providers.client import CallResult
from swarm_tui.util.json_repair import JsonExtractionError, extract_json
from swarm_tui.util.json_schema import compiled

__all__ = [
    "REASK_OPENING",
    "ESCALATED_PREFIX",
    "AnswerChecks",
    "FollowUp",
    "Verdict",
    "refused",
]

REASK_OPENING = "That answer could not be used"
"""How an answer asked for again begins (a conversation's re-asks are counted by it, so a
resumed run does not ask more often than `--reasks`)."""

ESCALATED_PREFIX = "escalate:"
"""The escalation endpoint's name starts so: its attempts say where they went."""

VALIDATOR_TIMEOUT_S = 5.0
"""A job's `python` validator that runs longer fails its check (it is left behind, not awaited)."""

RAW_KEPT = 2000
"""Characters of an unusable answer kept in its error (the error log, errors.jsonl)."""


class Verdict(NamedTuple):
    """What an answer is: usable (`failure` None, the checks it passed and its JSON value), or why not.
    (A named tuple: one is made for every answer, and a frozen dataclass's init costs 2.5 times as much.)"""

    failure: ErrorClass | None = None
    code: str = ""
    """Which check failed (`invalid_json`, `schema`, `regex`, `min_chars`, `python`), or the class's code."""
    problem: str = ""
    """What is wrong, with the field's path; the provider's and the validator's words as they said them."""
    checks: tuple[str, ...] = ()
    parsed: str | None = None
    """The answer's JSON value as compact JSON text, when a check read one."""

    @property
    def ok(self) -> bool:
        return self.failure is None


USABLE = Verdict()


@dataclass(frozen=True, slots=True)
class FollowUp:
    """What an unusable answer leads to: `action` is `reask`, `more_room`, `escalate` (the task is
    tried again with `body`) or `fail`; `error` is the attempt's (its code says which)."""

    action: str
    error: CallError
    body: JSONObject | None = None
    kept: JSONObject | None = None
    """A failed check's end: what a retry of the task sends (the answer and its error, asked again)."""

    @property
    def again(self) -> bool:
        return self.action != "fail"


_Check = tuple[str, Callable[[str, Any], str | None]]


@dataclass(frozen=True, slots=True)
class _CheckList:
    """The checks an answer to some body gets, in order, made once for every body that asks alike."""

    checks: tuple[_Check, ...]
    names: tuple[str, ...]
    json_reader: str | None
    """The first check that reads the answer as JSON (None: none does): the value is read once,
    before the checks run, and a failure to read it is that check's."""

    @classmethod
    def of(cls, checks: list[_Check]) -> _CheckList:
        names = tuple(name for name, _ in checks)
        return cls(tuple(checks), names, next((name for name in names if name in _READS_JSON), None))


class AnswerChecks:
    """The run's checks on answers and what an unusable one leads to (see the module)."""

    def __init__(self, spec: AnswerSpec | None, settings: AnswerSettings, *, escalation: bool = False) -> None:
        """`spec`: the job's `[answer]` / `--schema` (None: only the bodies' own formats); `escalation`:
        the run has an escalation endpoint (`--escalate`)."""
        self.spec = spec if spec is not None and spec.any else None
        self.settings = settings
        self.escalation = escalation
        self.escalated: set[int] = set()
        """Tasks sent to the escalation endpoint (their next attempts go there)."""
        self._more_room: set[int] = set()
        job_checks = self._checks_of_spec(self.spec) if self.spec is not None else []
        self._job_checks = _CheckList.of(job_checks)
        self._validator: Validator | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._object_checks = _CheckList.of([("json_object", _is_object), *job_checks])
        self._format_checks: list[tuple[Any, _CheckList]] = []
        """The checks of answers to bodies asking for a json_schema, by schema, made so far (a job
        asks for a few at most: compared by equality, not encoded, as each body is read anew from
        the journal)."""

    # ----------------------------------------------------------------- what is checked

    def checked(self, body: JSONObject) -> bool:
        """Answers to `body` are checked: the job asks (`[answer]`, `--schema`) or the body does
        (`response_format` json_schema / json_object)."""
        return bool(self._job_checks.checks) or _format_of(body.get("response_format"))[0] is not None

    def _checks(self, body: JSONObject) -> _CheckList:
        """The checks of an answer to `body`, in order: its own format's, then the job's."""
        fmt = body.get("response_format")
        if fmt is None:  # the common case of an unchecked body: nothing more to read
            return self._job_checks
        kind, schema = _format_of(fmt)
        if kind is None:
            return self._job_checks
        if kind == "json_object":
            return self._object_checks
        for known, checks in self._format_checks:
            if known is schema or known == schema:  # one job's bodies often share one schema object
                return checks
        checks = _CheckList.of(
            [("json_schema", self._schema_check(schema, "the response_format's json_schema")), *self._job_checks.checks]
        )
        self._format_checks = [(schema, checks), *self._format_checks[:7]]
        return checks

    def _checks_of_spec(self, spec: AnswerSpec) -> list[_Check]:
        checks: list[_Check] = []
        if spec.schema is not None:
            checks.append(("schema", self._schema_check(spec.schema, f"the schema of {spec.source or 'the job'}")))
        elif spec.json:
            checks.append(("json", _any_json))
        if spec.regex is not None:
            pattern = re.compile(spec.regex)
            checks.append(
                (
                    "regex",
                    lambda text, _: None if pattern.search(text) else f"the answer does not match {pattern.pattern!r}",
                )
            )
        if spec.min_chars is not None:
            least = spec.min_chars
            checks.append(
                (
                    "min_chars",
                    lambda text, _: (
                        None
                        if len(text.strip()) >= least
                        else f"the answer has {len(text.strip())} characters, fewer than {least}"
                    ),
                )
            )
        if spec.python is not None:
            checks.append(("python", self._python_check))
        return checks

    @staticmethod
    def _schema_check(schema: Any, source: str) -> Callable[[str, Any], str | None]:
        validator = compiled(schema, json.dumps(schema, sort_keys=True))

        def check(_: str, value: Any) -> str | None:
            problems = validator.problems(value)
            return None if not problems else "; ".join(str(p) for p in problems) + f" ({source})"

        return check

    # ----------------------------------------------------------------- the verdict

    def verdict(self, body: JSONObject, result: CallResult) -> Verdict:
        """Whether the answer `result` to `body` is usable (see the module), and its JSON value."""
        choice = first_choice(result)
        message = choice.get("message")
        if not isinstance(message, dict):
            message = {}
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip():
            return Verdict(ErrorClass.REFUSAL, "refusal", f"the model refused: {refusal}")
        finish = choice.get("finish_reason")
        if finish == "content_filter":
            return Verdict(
                ErrorClass.CONTENT_FILTER,
                "content_filter",
                "the provider's content filter stopped the answer (finish_reason content_filter)",
            )
        plan = self._checks(body)
        if not plan.checks:
            return USABLE
        if finish == "length" and self.settings.on_truncated != "accept":
            ceiling = answer_ceiling(body)
            said = f" of {ceiling:,} tokens" if ceiling else ""
            return Verdict(
                ErrorClass.TRUNCATED, "length", f"the answer was cut at its token limit{said} (finish_reason length)"
            )
        text = message.get("content") or ""  # what `result.content` reads, read here once
        value: Any = None
        parsed: str | None = None
        if plan.json_reader is not None:
            try:
                value, parsed = _json_of(text)
            except JsonExtractionError as exc:
                return Verdict(ErrorClass.FAILED_CHECK, "invalid_json", f"{plan.json_reader}: {exc}")
        for name, check in plan.checks:
            problem = check(text, value)
            if problem is not None:
                return Verdict(ErrorClass.FAILED_CHECK, name, f"{name}: {problem}")
        return Verdict(checks=plan.names, parsed=parsed)

    def accepts(self, body: JSONObject, result: CallResult) -> bool:
        """A kept answer (a cache's, a follower's) may stand for this task: usable as this job checks it."""
        return self.verdict(body, result).ok

    # ----------------------------------------------------------------- what follows

    def follow_up(
        self,
        index: int,
        body: JSONObject,
        result: CallResult,
        verdict: Verdict,
        *,
        fits: Callable[[JSONObject], bool],
        max_output: int | None,
    ) -> FollowUp:
        """What the unusable answer `result` of task `index` (asked with `body`) leads to (see the
        module); `fits(body)`: the budget can hold a call of it; `max_output`: the model's most
        tokens (price table). A run that is stopping decides the same: the task asked again waits,
        unfinished, for the next run (a stop never fails a task that had a try left)."""
        assert verdict.failure is not None
        raw = result.content
        words = (
            verdict.problem
            if verdict.failure is ErrorClass.REFUSAL
            else f"{verdict.problem}; raw answer: {raw[:RAW_KEPT]}"
        )
        failure = CallError(verdict.failure, words, 200, verdict.code, request_id=result.request_id, should_retry=False)
        if verdict.failure is ErrorClass.FAILED_CHECK and reasks_in(body) < self.settings.reasks:
            return FollowUp("reask", _as(failure, "reask"), reasked(body, raw, verdict))
        if (
            verdict.failure is ErrorClass.TRUNCATED
            and self.settings.on_truncated == "retry"
            and index not in self._more_room
        ):
            roomier = more_room(body, result, max_output)
            if roomier is not None and fits(roomier):
                self._more_room.add(index)
                return FollowUp("more_room", _as(failure, "more_room"), roomier)
        again = reasked(body, raw, verdict) if verdict.failure is ErrorClass.FAILED_CHECK else None
        if self.escalation and index not in self.escalated:
            self.escalated.add(index)
            return FollowUp("escalate", _as(failure, "escalate"), again or body)
        return FollowUp("fail", failure, kept=again)

    # ----------------------------------------------------------------- the job's Python validator

    def _python_check(self, text: str, value: Any) -> str | None:
        """The job's `python` validator, in a worker thread under `VALIDATOR_TIMEOUT_S`: what it
        returns (None: passed), what it raised, or that it hung; never a crash of the run."""
        spec = self.spec
        assert spec is not None and spec.python is not None
        if self._validator is None:
            self._validator = resolve_python(spec.python, spec.base)
        function = self._validator
        args = (text, value) if takes_parsed(function) else (text,)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="answer-check")
        future = self._pool.submit(function, *args)
        try:
            said = future.result(timeout=VALIDATOR_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            self._pool.shutdown(wait=False)  # its thread is left to end on its own; the next check gets a new one
            self._pool = None
            return f"{spec.python} ran past {VALIDATOR_TIMEOUT_S:g}s"
        except Exception as exc:  # noqa: BLE001 - a validator that raises fails its check, with its words
            return f"{spec.python} raised {type(exc).__name__}: {exc}"
        if said is None or said is True:
            return None
        return str(said) if said is not False else f"{spec.python} returned False"


def refused(result: CallResult) -> bool:
    """The answer is a refusal or a filtered one: never done, never kept, whatever is checked."""
    refusal = answer_message(result).get("refusal")
    return (isinstance(refusal, str) and bool(refusal.strip())) or finish_reason(result) == "content_filter"


_READS_JSON = frozenset({"json_schema", "json_object", "schema", "json"})


def _format_of(fmt: Any) -> tuple[str | None, Any]:
    """(`json_schema`, its schema), (`json_object`, None) or (None, None): what a body's
    `response_format` asks for (a `json_schema` without a schema asks for an object)."""
    if not isinstance(fmt, dict):
        return None, None
    kind = fmt.get("type")
    if kind == "json_schema":
        inner = fmt.get("json_schema")
        if isinstance(inner, dict) and "schema" in inner:
            return kind, inner["schema"]
        return "json_object", None
    return (kind, None) if kind == "json_object" else (None, None)


_SCAN_JSON = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed: a context with a decoder's attributes
"""The scanner `json.loads` ends in (C), called without `loads`' layers and its two regex passes
for whitespace (half its time on a short answer): the answer is stripped already."""


def _json_of(text: str) -> tuple[Any, str]:
    """The answer's JSON value and its text: the answer itself when it is JSON (the common case:
    nothing encoded again), else what `extract_json` reads out of it (fences, prose, a cut end)."""
    stripped = text.strip()
    try:
        value, end = _SCAN_JSON(stripped, 0)
    except (StopIteration, ValueError):  # StopIteration: no JSON value starts the text
        end = -1
    if end == len(stripped):
        return value, stripped
    value = extract_json(text)
    return value, json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_object(_: str, value: Any) -> str | None:
    return None if isinstance(value, dict) else f"a JSON object was asked for, not {type(value).__name__}"


def _any_json(_: str, value: Any) -> str | None:
    return None


def _as(error: CallError, code: str) -> CallError:
    """The attempt's error with the code of what follows it (the failed check is named in the message)."""
    return CallError(error.kind, error.message, error.status, code, request_id=error.request_id, should_retry=False)


def _messages(body: JSONObject) -> list[Any]:
    messages = body.get("messages")
    return list(messages) if isinstance(messages, list) else []


def reasks_in(body: JSONObject) -> int:
    """How many times this conversation already asked an answer again."""
    count = 0
    for message in _messages(body):
        content = message.get("content") if isinstance(message, dict) else None
        if message.get("role") == "user" and isinstance(content, str) and content.startswith(REASK_OPENING):
            count += 1
    return count


def reasked(body: JSONObject, raw: str, verdict: Verdict) -> JSONObject:
    """`body` with the answer and what is wrong with it as the next turns: the re-ask."""
    wants_json = verdict.code in ("invalid_json", "json_schema", "json_object", "schema", "json")
    ask = f"{REASK_OPENING}: {verdict.problem}. Answer again in full, fixing that error" + (
        ", with valid JSON only, nothing else." if wants_json else "."
    )
    messages = [*_messages(body), {"role": "assistant", "content": raw}, {"role": "user", "content": ask}]
    return {**body, "messages": messages}


def more_room(body: JSONObject, result: CallResult, max_output: int | None) -> JSONObject | None:
    """`body` with twice the room (its max_tokens, or what the cut answer wrote), up to the model's
    maximum; None when there is no more to give."""
    current = answer_ceiling(body) or result.usage.completion or None
    if current is None:
        return None
    larger = current * 2 if max_output is None else min(current * 2, max_output)
    if larger <= current:
        return None
    key = "max_completion_tokens" if "max_completion_tokens" in body and "max_tokens" not in body else "max_tokens"
    return {**body, key: larger}
