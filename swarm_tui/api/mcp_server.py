"""The MCP server (`swarm-tui mcp`): a coding agent (Claude Code, kimi-cli, Codex...) fans out a
swarm of sub-agents through swarm-tui, watches it and collects its answers, with tools it can guess:

    start_swarm     a job file, or a list of prompts (+ template, system), on a provider or a
                    base URL + model, with limits, budget and lane: the run's id and directory
    swarm_status    counts, what the unfinished wait on, failures by class, cost, rates, ETA
    swarm_results   a page of the answers (and final errors), with the JSON each holds
    retry_failed    queue the failed tasks again (those of one error class, or all)
    pause_swarm, resume_swarm, abort_swarm
    list_runs       every run under the root, with its state and progress
    estimate_cost   what N tasks of so many tokens cost per model, live and as batches

and a run's summary and results as resources (`swarm://runs/{run}/summary`, `.../results`).

A thin layer over the Python API (`swarm_tui.api`): a run it starts is `api.start_run`'s, a
`swarm-tui run ... --headless` process of its own in a run directory under the server's root, so
runs outlive the MCP session and any client (another agent, `swarm-tui ctl`, `attach`) can see
them. Every path it is given is resolved and must stay under the root; keys never appear in what
it returns (masked as the journal masks them). Over HTTP it listens on loopback only and answers
only a request bearing its token.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets as token_source
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from swarm_tui import api
from swarm_tui.core.errors import InputError
from swarm_tui.journal import JOURNAL_NAME, IncompleteRunError
from swarm_tui.util import secrets

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

TOKEN_ENV = "SWARM_TUI_MCP_TOKEN"
"""The environment variable the HTTP transport's bearer token is read from (one is made when unset)."""
RESULTS_PAGE = 50

Scope = MutableMapping[str, object]
Message = MutableMapping[str, object]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class SwarmTools:
    """The server's tools and resources over one root directory (see the module)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    # ----------------------------------------------------------------- paths under the root

    def inside(self, given: str, what: str) -> Path:
        """`given` (relative to the root, or absolute) resolved; InputError when it leaves the root."""
        path = Path(given)
        resolved = (path if path.is_absolute() else self.root / path).resolve()
        if not resolved.is_relative_to(self.root):
            raise InputError.single(given, what, f"outside the server's root {self.root}: refused")
        return resolved

    def run_dir(self, run: str) -> Path:
        path = self.inside(run, "run")
        if not (path / JOURNAL_NAME).is_file():
            raise InputError.single(run, "run", f"no run there (list_runs names the runs under {self.root})")
        return path

    def run_id(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # ----------------------------------------------------------------- the tools

    def start_swarm(
        self,
        job: Annotated[
            str | None,
            Field(
                description="a job file under the root: .jsonl (OpenAI Batch lines), .toml (a swarm job), or a "
                "table (.csv, .parquet, a .jsonl of records) with `template` over its columns"
            ),
        ] = None,
        prompts: Annotated[
            list[str] | None, Field(description="instead of a job: one sub-agent task per prompt, in order")
        ] = None,
        template: Annotated[
            str | None,
            Field(description='each prompt put in this text where it says {prompt}, e.g. "Answer in JSON: {prompt}"'),
        ] = None,
        system: Annotated[
            str | None, Field(description="each task's system message ({agent}, {total} filled in)")
        ] = None,
        provider: Annotated[
            str | None,
            Field(description="a provider profile of the user's config (default: sim, the built-in simulator)"),
        ] = None,
        base_url: Annotated[
            str | None, Field(description="instead of provider: an OpenAI-compatible endpoint, with model")
        ] = None,
        model: Annotated[str | None, Field(description="the model every task asks for")] = None,
        api_key_env: Annotated[
            str | None, Field(description="the environment variable holding the key for base_url (never the key)")
        ] = None,
        name: Annotated[
            str | None, Field(description="the run's directory name under the root (default: time and job name)")
        ] = None,
        concurrency: Annotated[int | None, Field(description="calls in flight at most (default 50)", ge=1)] = None,
        max_attempts: Annotated[int | None, Field(description="attempts per task before it fails", ge=1)] = None,
        timeout_s: Annotated[float | None, Field(description="one attempt's time limit, seconds", gt=0)] = None,
        rpm: Annotated[int | None, Field(description="requests a minute at most", ge=1)] = None,
        tpm: Annotated[int | None, Field(description="tokens a minute at most", ge=1)] = None,
        budget_usd: Annotated[float | None, Field(description="a ceiling on what the run may spend, USD", gt=0)] = None,
        lane: Annotated[
            Literal["live", "batch", "auto"] | None,
            Field(description="live calls, the provider's batch API, or the autopilot's mix (default live)"),
        ] = None,
        max_tokens: Annotated[int | None, Field(description="with prompts: each request's max_tokens", ge=1)] = None,
        sim_latency_ms: Annotated[
            float | None, Field(description="the built-in simulator's median latency, ms", ge=0)
        ] = None,
        sim_error_rate: Annotated[
            float | None, Field(description="the simulator's share of failed calls (429s, 5xx)", ge=0, le=1)
        ] = None,
    ) -> str:
        """Start a swarm of sub-agents: a job file, or a list of prompts (one task each), on a provider
        or a base URL + model. The run is a process of its own in a directory under the server's root:
        it goes on after this session ends. Returns the run's id (its directory under the root), its
        directory and its process. Everything is checked first: a bad job or setting starts nothing."""

        def start() -> dict[str, object]:
            if (job is None) == (prompts is None):
                raise InputError.single("start_swarm", "job", "give a job file or a list of prompts (one of them)")
            given: api.RunSettings = {}
            for key, value in (
                ("api_key_env", api_key_env),
                ("system", system),
                ("template", template),
                ("concurrency", concurrency),
                ("max_attempts", max_attempts),
                ("timeout_s", timeout_s),
                ("rpm", rpm),
                ("tpm", tpm),
                ("budget_usd", budget_usd),
                ("lane", lane),
                ("max_tokens", max_tokens),
                ("sim_latency_ms", sim_latency_ms),
                ("sim_error_rate", sim_error_rate),
            ):
                if value is not None:
                    given[key] = value  # type: ignore[literal-required]
            if name is not None and (not name or Path(name).name != name or name in (".", "..")):
                raise InputError.single(name, "name", "a run's name is one directory name, without a slash")
            out = self.inside(name, "name") if name is not None else None
            source: api.JobOrPrompts = self.inside(job, "job") if job is not None else list(prompts or [])
            started = api.start_run(
                source, provider=provider, base_url=base_url, model=model, out=out, root=self.root, **given
            )
            return {
                "run": self.run_id(started.run_dir.resolve()),
                "run_dir": str(started.run_dir.resolve()),
                "pid": started.pid,
                "log": str(started.log.resolve()),
                "live": started.live,
            }

        return answer(start)

    def swarm_status(self, run: Annotated[str, Field(description="the run's id (start_swarm's, list_runs')")]) -> str:
        """Where a run stands: its state (running, paused, finished, stopped, dead...), tasks by state,
        what the unfinished ones wait on, the failed ones by error class, cost, rates, ETA, phase, the
        concurrency limit and each endpoint's health."""
        return answer(lambda: self._status(run))

    def _status(self, run: str) -> dict[str, object]:
        path = self.run_dir(run)
        with api.RemoteRun(path) as remote:
            return {**remote.status().to_json(), "run": self.run_id(path), "run_dir": str(path)}

    def swarm_results(
        self,
        run: Annotated[str, Field(description="the run's id")],
        state: Annotated[
            Literal["succeeded", "failed"] | None,
            Field(description="only the answers (succeeded) or only the final errors (failed); default both"),
        ] = None,
        offset: Annotated[int, Field(description="skip this many (the previous page's next_offset)", ge=0)] = 0,
        limit: Annotated[int, Field(description="at most this many (up to 500)", ge=1, le=500)] = RESULTS_PAGE,
    ) -> str:
        """A page of a run's finished tasks, in order: each one's custom_id, answer text, the JSON the
        answer holds (parsed, when it holds some) or its final error; with the total and next_offset
        (null on the last page)."""

        def page() -> dict[str, object]:
            with api.RemoteRun(self.run_dir(run)) as remote:
                return {"run": run, **remote.results(state, offset, limit).to_json()}

        return answer(page)

    def retry_failed(
        self,
        run: Annotated[str, Field(description="the run's id")],
        error_class: Annotated[
            str | None,
            Field(description="only the tasks whose last error is of this class (e.g. rate_limit, server_error)"),
        ] = None,
    ) -> str:
        """Queue a run's failed tasks again, with a fresh retry budget (all of them, or those of one
        error class). A run nobody drives any more is resumed with its failed tasks, in a process of
        its own."""

        def retry() -> dict[str, object]:
            path = self.run_dir(run)
            with api.RemoteRun(path) as remote:
                try:
                    sent = remote.send("retry", {"errored": error_class} if error_class else None)
                except api.NotDriven as exc:
                    return self._resume(run, path, exc.status, retry_failed=True)
                return {"run": run, **sent.to_json()}

        return answer(retry)

    def pause_swarm(
        self,
        run: Annotated[str, Field(description="the run's id")],
        now: Annotated[bool, Field(description="also hold the calls in flight (sent again first at resume)")] = False,
    ) -> str:
        """Pause a run: nothing new is sent (the calls in flight finish, or with now they are held)."""
        return answer(lambda: self._send(run, "pause", {"now": True} if now else None))

    def resume_swarm(self, run: Annotated[str, Field(description="the run's id")]) -> str:
        """Resume a paused run; a run nobody drives any more (stopped, its process gone) is resumed in a
        process of its own."""

        def resume() -> dict[str, object]:
            path = self.run_dir(run)
            with api.RemoteRun(path) as remote:
                try:
                    return {"run": run, **remote.send("resume").to_json()}
                except api.NotDriven as exc:
                    return self._resume(run, path, exc.status, retry_failed=False)

        return answer(resume)

    def _resume(self, run: str, path: Path, status: api.RunStatus, *, retry_failed: bool) -> dict[str, object]:
        """A run nobody drives, resumed in a process of its own (refused while a process holds it)."""
        if status.holder is not None:
            raise InputError.single(run, "run", f"not resumed: {status.liveness}")
        process, log = api.resume_detached(path, retry_failed=retry_failed)
        return {"run": run, "resumed": True, "pid": process.pid, "log": str(log)}

    def abort_swarm(self, run: Annotated[str, Field(description="the run's id")]) -> str:
        """Abort a run: the calls in flight are cancelled, nothing new is sent; it stays resumable."""
        return answer(lambda: self._send(run, "abort", None))

    def _send(self, run: str, command: str, args: dict[str, object] | None) -> dict[str, object]:
        with api.RemoteRun(self.run_dir(run)) as remote:
            return {"run": run, **remote.send(command, args).to_json()}

    def list_runs(self) -> str:
        """Every run under the server's root, oldest first: its id, state, pid, progress, failures and cost."""

        def listed() -> dict[str, object]:
            runs = []
            for status in api.list_runs(self.root):
                runs.append(
                    {
                        "run": self.run_id(status.run_dir.resolve()),
                        "state": status.state.value,
                        "pid": status.pid,
                        "job": status.job,
                        "total": status.total,
                        "done": status.done,
                        "failed": status.counts.get("failed", 0),
                        "cost_usd": status.cost_usd,
                        "created_at": status.created_at,
                    }
                )
            return {"root": str(self.root), "runs": runs}

        return answer(listed)

    def estimate_cost(
        self,
        tasks: Annotated[int, Field(description="how many tasks (sub-agent calls)", ge=1)],
        output_tokens: Annotated[float, Field(description="output tokens per task", ge=0)] = 512,
        input_tokens: Annotated[float, Field(description="prompt tokens per task", ge=0)] = 0,
        cached_share: Annotated[
            float, Field(description="share of the prompt served from the provider's cache", ge=0, le=1)
        ] = 0.0,
        models: Annotated[
            list[str] | None, Field(description="models to price (default: every model of the price table)")
        ] = None,
    ) -> str:
        """What a swarm of `tasks` tasks costs on each provider of each model, live, at the Flex and
        Priority tiers and through the batch API (the user's own prices included), cheapest first."""

        def estimate() -> dict[str, object]:
            found = api.estimate_cost(
                tasks, input_tokens=input_tokens, output_tokens=output_tokens, cached_share=cached_share, models=models
            )
            rows = sorted(found.rows, key=lambda row: row.cost_usd)
            return {
                "tasks": tasks,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "rows": [row.to_dict() for row in rows],
                "notes": list(found.notes),
            }

        return answer(estimate)

    def tools(self) -> list[Callable[..., str]]:
        """The tools, in the order a client lists them (each named after its method)."""
        return [
            self.start_swarm,
            self.swarm_status,
            self.swarm_results,
            self.retry_failed,
            self.pause_swarm,
            self.resume_swarm,
            self.abort_swarm,
            self.list_runs,
            self.estimate_cost,
        ]

    # ----------------------------------------------------------------- the resources

    def summary(self, run: str) -> str:
        """A run's summary.json (once it ended); its status before that."""
        path = self.run_dir(run)
        written = path / "summary.json"
        if written.is_file():
            return secrets.mask(written.read_text(encoding="utf-8"))
        return answer(lambda: self._status(run))

    def results(self, run: str) -> str:
        """Every finished task's answer or error, one JSON object a line, in order."""
        lines: list[str] = []
        with api.RemoteRun(self.run_dir(run)) as remote:
            offset: int | None = 0
            while offset is not None:
                page = remote.results(None, offset, 1000)
                lines += [json.dumps(r.to_json(), ensure_ascii=False) for r in page.results]
                offset = page.next_offset if page.results else None
        return secrets.mask("\n".join(lines) + ("\n" if lines else ""))


def answer(work: Callable[[], dict[str, object]]) -> str:
    """A tool's JSON answer, keys masked; a failure a user can act on as the tool's error."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return secrets.mask(json.dumps(work(), ensure_ascii=False, default=str))
    except (InputError, IncompleteRunError, FileNotFoundError, FileExistsError, api.StartFailed) as exc:
        raise ToolError(secrets.mask(str(exc))) from None


def build_server(root: Path) -> MCPServer:
    """The MCP server with its tools and resources over `root`."""
    from mcp.server.mcpserver import MCPServer

    tools = SwarmTools(root)
    server: MCPServer = MCPServer(
        "swarm-tui",
        instructions="Fan out a swarm of LLM sub-agents (one task each, up to thousands) through swarm-tui: "
        "start_swarm with prompts or a job file, poll swarm_status until its state is finished, then page "
        "swarm_results. Runs live in directories under "
        f"{tools.root} and go on after this session; list_runs shows them.",
        log_level="WARNING",
    )
    for tool in tools.tools():
        server.add_tool(tool, description=" ".join((tool.__doc__ or "").split()), structured_output=False)
    server.resource(
        "swarm://runs/{run}/summary",
        name="summary",
        description="a run's summary.json (its status while it runs)",
        mime_type="application/json",
    )(tools.summary)
    server.resource(
        "swarm://runs/{run}/results",
        name="results",
        description="every finished task of a run: custom_id, answer, parsed JSON, error; one JSON object a line",
        mime_type="application/x-ndjson",
    )(tools.results)
    return server


def register_keys() -> None:
    """Mask every key this process could come to see: the config's profiles' and OpenAI's, as set."""
    names = {"OPENAI_API_KEY"}
    try:
        from swarm_tui.config import load_config

        config = load_config()
        names |= {p.api_key_env for p in config.profiles.values() if p.api_key_env}
    except InputError:
        pass  # a config that cannot be read: the run that needs it says so
    for name in names:
        value = os.environ.get(name)
        if value:
            secrets.register(value)


def serve(root: Path, *, http_port: int | None = None, token: str | None = None) -> None:
    """Serve until the client goes (stdio) or the process is stopped (HTTP on 127.0.0.1:`http_port`,
    answering only requests with `Authorization: Bearer TOKEN`)."""
    register_keys()
    server = build_server(root)
    if http_port is None:
        server.run("stdio")
        return
    import uvicorn

    token = token or token_source.token_urlsafe(24)
    secrets.register(token)  # never echoed in what the server returns
    app = BearerGate(server.streamable_http_app(host="127.0.0.1"), token)
    print(f"swarm-tui mcp: http://127.0.0.1:{http_port}/mcp (Authorization: Bearer <{TOKEN_ENV}>)", file=sys.stderr)
    uvicorn.run(app, host="127.0.0.1", port=http_port, log_level="warning")


class BearerGate:
    """An ASGI app that lets through only HTTP requests bearing the token (401 otherwise)."""

    def __init__(self, app: App, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http":
            headers = scope.get("headers")
            given = b""
            for key, value in headers if isinstance(headers, list) else []:
                if key.lower() == b"authorization":
                    given = value
            if not hmac.compare_digest(given, self._expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b"a bearer token is needed\n"})
                return
        await self.app(scope, receive, send)
