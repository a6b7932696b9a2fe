"""The tools a run's agents can call: MCP servers and Python functions, started once per run.

`Toolbox.start()` starts every MCP server (a stdio command or a streamable HTTP URL) and
lists its tools, and imports every Python function; whatever does not start is a
`ToolSetupError` naming the job's file and field, raised before any request is sent.
`Toolbox.call()` never raises: an unknown tool, arguments that are not JSON or do not match the
tool's input schema (checked before the tool runs: the tool never sees them), a tool that fails or
runs past `tool_timeout` all come back as the tool's result (marked not ok), so the model can
correct itself and the agent goes on. An MCP server that dies is restarted at its
next call; only its calls in flight fail.

A stdio MCP entry runs `processes` server processes (`_McpPool`): one process answers its calls
one after another, which is what 100 agents stepping together queued behind. Each agent (the
`caller` of a call) always talks to the same process of the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import logging
import sys
import time
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from swarm_tui.core.errors import InputError, Problem
from swarm_tui.tools.spec import McpServerSpec, PythonToolSpec, ToolsSpec
from swarm_tui.util.json_schema import CompiledSchema, compiled, schema_problem

log = logging.getLogger(__name__)

RESULT_LIMIT = 20_000
"""Characters of a tool's result sent back to the model (and journaled): a tool that returns a
whole file must not blow every later request's context."""


class ToolSetupError(InputError):
    """A declared tool could not be started (exit 2, nothing sent)."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    text: str
    ok: bool
    latency_ms: float


class _PythonTool:
    def __init__(self, spec: PythonToolSpec) -> None:
        module_name, _, attr = spec.function.partition(":")
        module = importlib.import_module(module_name)
        function = getattr(module, attr)
        if not callable(function):
            raise TypeError(f"{spec.function} is not a function")
        self.function: Callable[..., Any] = function
        self.name = spec.name or attr
        self.schema = openai_tool(self.name, _description(function), json_schema_of(function))

    async def call(self, arguments: dict[str, Any], caller: int) -> tuple[str, bool]:
        """`caller` is not needed: a function runs in this process, whoever calls it."""
        if inspect.iscoroutinefunction(self.function):
            value = await self.function(**arguments)
        else:
            value = await asyncio.to_thread(self.function, **arguments)
        return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)), True


class _McpServer:
    """One MCP server, held open by its own task (the client's context lives in one task)."""

    def __init__(self, spec: McpServerSpec, timeout_s: float) -> None:
        self.spec = spec
        self.timeout_s = timeout_s
        self.client: Any = None
        self.tools: list[dict[str, Any]] = []
        self._holder: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._closing = asyncio.Event()
        self.restarts = 0

    def _target(self) -> Any:
        if self.spec.url is not None:
            return self.spec.url
        from mcp.client.stdio import StdioServerParameters

        program, *args = self.spec.command
        if program in ("python", "python3"):  # the interpreter swarm-tui runs under (its venv), as users mean
            program = sys.executable
        return StdioServerParameters(command=program, args=list(args), env=self.spec.env or None)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._closing = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(), name=f"mcp-{self.spec.name}")
        await self._ready

    async def _hold(self) -> None:
        from mcp import Client

        assert self._ready is not None
        if self.spec.url is None:
            _StrayOutput.install()
        try:
            async with Client(self._target(), read_timeout_seconds=self.timeout_s) as client:
                listed = await client.list_tools()
                self.client = client
                self.tools = [openai_tool(t.name, t.description or "", t.input_schema) for t in listed.tools]
                if not self._ready.done():
                    self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:  # noqa: BLE001 - whatever stops it, the caller hears why
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %s stopped: %r", self.spec.name, exc)
        finally:
            self.client = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self._holder is not None and not self._holder.done()

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        if not self.alive:  # it died since its last call: start it again
            self.restarts += 1
            await self.aclose()
            await self.start()
        try:
            result = await self.client.call_tool(name, arguments)
        except Exception as exc:
            if _connection_lost(exc):  # the server died: the next call starts it afresh
                self.client = None
                self._closing.set()
            raise
        texts = [getattr(block, "text", None) or json.dumps(block.model_dump(mode="json")) for block in result.content]
        if not texts and result.structured_content is not None:
            texts = [json.dumps(result.structured_content, ensure_ascii=False)]
        return "\n".join(texts), not result.is_error

    async def aclose(self) -> None:
        self._closing.set()
        if self._holder is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._holder, 5)
            self._holder = None


class _McpPool:
    """The servers of one `[[tools.mcp]]` entry: `processes` of a stdio command, or the one a URL
    names. A caller's calls always go to the same member (caller modulo the pool's size), so a
    server that keeps state per caller (the example's notes) sees each agent whole, and agents that
    step together spread evenly over the members."""

    def __init__(self, spec: McpServerSpec, timeout_s: float) -> None:
        self.spec = spec
        count = spec.processes if spec.url is None else 1
        self.members = [_McpServer(spec, timeout_s) for _ in range(max(1, count))]

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools the pool offers (every member runs the same command: the first one's list)."""
        return self.members[0].tools

    async def start(self) -> None:
        """Every member started (in parallel); the first failure is raised once all have tried."""
        results = await asyncio.gather(*(m.start() for m in self.members), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def call(self, name: str, arguments: dict[str, Any], caller: int) -> tuple[str, bool]:
        return await self.members[caller % len(self.members)].call(name, arguments)

    async def aclose(self) -> None:
        await asyncio.gather(*(m.aclose() for m in self.members))


Route = Callable[[dict[str, Any], int], Awaitable[tuple[str, bool]]]
"""(arguments, caller) -> (text, ok): where a tool's calls go."""


class Toolbox:
    def __init__(self, spec: ToolsSpec) -> None:
        self.spec = spec
        self._servers = [_McpPool(s, spec.tool_timeout_s) for s in spec.mcp]
        self._routes: dict[str, Route] = {}
        self._schemas: list[dict[str, Any]] = []
        self._inputs: dict[str, CompiledSchema] = {}
        """Each tool's input schema (its `parameters`), when it declares a valid one."""

    @property
    def max_steps(self) -> int:
        return self.spec.max_steps

    async def start(self) -> None:
        """Start every server and import every function; all problems at once, then raise."""
        problems: list[Problem] = []
        owners: dict[str, str] = {}

        def offer(name: str, owner: str, schema: dict[str, Any], route: Route) -> None:
            if name in owners:
                problems.append(
                    Problem(self.spec.source, None, owner, f"tool {name!r} is also offered by {owners[name]}")
                )
                return
            owners[name] = owner
            self._schemas.append(schema)
            self._routes[name] = route
            parameters = schema.get("function", {}).get("parameters")
            if isinstance(parameters, dict) and parameters and schema_problem(parameters) is None:
                self._inputs[name] = compiled(parameters, json.dumps(parameters, sort_keys=True))

        for tool_spec in self.spec.python:
            try:
                tool = _PythonTool(tool_spec)
            except Exception as exc:  # noqa: BLE001 - any failure to import is the user's to fix
                problems.append(
                    Problem(self.spec.source, None, f"{tool_spec.where}.function", f"cannot use it: {_why(exc)}")
                )
                continue
            offer(tool.name, tool_spec.where, tool.schema, tool.call)
        results = await asyncio.gather(*(s.start() for s in self._servers), return_exceptions=True)
        for server, result in zip(self._servers, results, strict=True):
            if isinstance(result, BaseException):
                what = server.spec.url or " ".join(server.spec.command)
                problems.append(
                    Problem(
                        self.spec.source, None, server.spec.where, f"MCP server {what!r} did not start: {_why(result)}"
                    )
                )
                continue
            for schema in server.tools:
                name = schema["function"]["name"]
                offer(name, server.spec.where, schema, _bound(server, name))
        if problems:
            await self.aclose()
            raise ToolSetupError(problems)

    def openai_tools(self) -> list[dict[str, Any]]:
        """The `tools` of a chat request: every tool offered, in the OpenAI function format."""
        return list(self._schemas)

    def offered_to(self, agent: int) -> list[dict[str, Any]]:
        """Every agent is offered every tool (`agent_tools.AgentTools`)."""
        return self._schemas

    async def call(self, name: str, arguments: str, caller: int = 0, *, site: object = None) -> ToolOutcome:
        """`caller`: who calls (an agent's task index): its calls to a pooled MCP server always go
        to the same process. `site` (where the call stands in the agent's transcript) does not
        matter to a tool of the job's: it runs whenever it is called."""
        started = time.monotonic()
        route = self._routes.get(name)
        if route is None:
            return _outcome(f"error: no tool named {name!r} (tools: {', '.join(sorted(self._routes))})", False, started)
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return _outcome(f"error: the arguments are not valid JSON ({exc.msg}): {arguments[:200]!r}", False, started)
        if not isinstance(parsed, dict):
            return _outcome("error: the arguments must be a JSON object", False, started)
        schema = self._inputs.get(name)
        problems = schema.problems(parsed) if schema is not None else []
        if problems:  # the tool never sees arguments its schema refuses: the model reads why
            said = "; ".join(str(p) for p in problems)
            return _outcome(
                f"error: TypeError: the arguments do not match {name}'s input schema ({said}); the tool did not run",
                False,
                started,
            )
        try:
            async with asyncio.timeout(self.spec.tool_timeout_s):
                text, ok = await route(parsed, caller)
        except TimeoutError:
            return _outcome(f"error: the tool ran past its {self.spec.tool_timeout_s:g}s timeout", False, started)
        except Exception as exc:  # noqa: BLE001 - a tool's failure is the model's to read
            return _outcome(f"error: {_why(exc)}", False, started)
        return _outcome(text, ok, started)

    async def aclose(self) -> None:
        """Every server stopped, all at once (each gets the client's grace before it is killed)."""
        await asyncio.gather(*(server.aclose() for server in self._servers))


class _StrayOutput(logging.Filter):
    """The mcp client's record of a line on a stdio server's stdout that is not JSON-RPC (a banner,
    a `print` left in a tool, a library's progress output): said once in one line, the line
    quoted, instead of a traceback for every such line. The client skips the line either way."""

    MESSAGE = "Failed to parse JSONRPC message from server"
    _installed = False

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    @classmethod
    def install(cls) -> None:
        if not cls._installed:
            cls._installed = True
            logging.getLogger("mcp.client.stdio").addFilter(cls())

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != self.MESSAGE:
            return True
        self.seen += 1
        if self.seen > 1:
            return False
        line = _offending_line(record)
        record.msg = "an MCP server wrote a line that is not JSON-RPC on its stdout%s: ignored (and others like it)"
        record.args = (f" ({line!r})" if line else "",)
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _offending_line(record: logging.LogRecord) -> str | None:
    """The line pydantic could not read, as its error quotes it (cut to 120 characters)."""
    from pydantic import ValidationError

    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, ValidationError) and error.errors():
        value = error.errors()[0].get("input")
        if isinstance(value, str | bytes):
            return (value if isinstance(value, str) else value.decode("utf-8", "replace"))[:120]
    return None


def _connection_lost(exc: BaseException) -> bool:
    """The server is gone (its process died, its stream closed), not merely refusing one call."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(exc, OSError | EOFError | ConnectionError) or type(exc).__module__.startswith("anyio")


def _bound(server: _McpPool, name: str) -> Route:
    return lambda arguments, caller: server.call(name, arguments, caller)


def _outcome(text: str, ok: bool, started: float) -> ToolOutcome:
    if len(text) > RESULT_LIMIT:
        text = text[:RESULT_LIMIT] + f"\n[... cut at {RESULT_LIMIT} characters]"
    return ToolOutcome(text, ok, (time.monotonic() - started) * 1000)


def _why(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _why(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def openai_tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def _description(function: Callable[..., Any]) -> str:
    doc = inspect.getdoc(function) or ""
    return doc.split("\n\n")[0].strip()


_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def json_schema_of(function: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema of a function's keyword arguments, from its type hints (a parameter with
    a default is optional; one without a hint takes any JSON value)."""
    hints = typing.get_type_hints(function)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        properties[name] = _schema_of_type(hints.get(name, Any))
        if parameter.default is parameter.empty:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def _schema_of_type(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _schema_of_type(options[0]) if len(options) == 1 else {}
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(hint))}
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    if hint is list or origin is list:
        args = typing.get_args(hint)
        return {"type": "array", **({"items": _schema_of_type(args[0])} if args else {})}
    if hint is dict or origin is dict:
        return {"type": "object"}
    return {}
