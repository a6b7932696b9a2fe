"""What tools a job's agents may use, as the job declares them. No running here (see `toolbox`).

In a TOML job (or a file given to `--tools` for a Batch JSONL job):

    [agents]
    max_steps = 8          # model calls per agent at most; then the agent fails as `max_steps`
    tool_timeout = 30      # seconds per tool call; a call past it returns an error to the model

    [[tools.mcp]]          # an MCP server: a command run over stdio, or a streamable HTTP URL
    name = "demo"
    command = ["python", "-m", "swarm_tui.examples.mcp_tools"]
    processes = 2          # a command's server processes (each agent's calls go to one of them)
    # url = "http://127.0.0.1:8765/mcp"

    [[tools.python]]       # a Python function: its JSON schema from type hints and docstring
    function = "mypackage.tools:search"

Tools run with the user's rights; there is no built-in shell tool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_MAX_STEPS = 8
DEFAULT_TOOL_TIMEOUT_S = 30.0
MAX_STEPS_LIMIT = 100
DEFAULT_MCP_PROCESSES = 2
"""Server processes per stdio MCP entry: one process answers its calls one after another (about
1 ms of its CPU each for the example server), so 100 agents stepping together queue behind it;
two answer a step's burst side by side when a core is free (benchmarks/bench_agents.py prints the
burst per pool size), three were no better on 2 cores, and each process costs memory and a start."""
MAX_MCP_PROCESSES = 32

AGENTS_KEYS = frozenset({"max_steps", "tool_timeout"})
TOOLS_KEYS = frozenset({"mcp", "python"})
MCP_KEYS = frozenset({"name", "command", "url", "env", "processes"})
PYTHON_KEYS = frozenset({"function", "name"})


@dataclass(frozen=True)
class McpServerSpec:
    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    where: str = ""
    """`tools.mcp[i]`: the field a problem with this server is reported against."""
    processes: int = DEFAULT_MCP_PROCESSES
    """How many processes of a stdio command serve the run's agents (a URL is one server, whatever
    runs behind it). Each agent's calls always go to the same process, so a server that keeps
    state per caller sees each agent whole; a server whose state agents share wants 1."""


@dataclass(frozen=True)
class PythonToolSpec:
    function: str
    """`module:function`."""
    name: str | None = None
    where: str = ""


@dataclass(frozen=True)
class ToolsSpec:
    mcp: tuple[McpServerSpec, ...] = ()
    python: tuple[PythonToolSpec, ...] = ()
    max_steps: int = DEFAULT_MAX_STEPS
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    source: str = ""
    """The file that declared them (problems found when they start name it)."""

    @property
    def any(self) -> bool:
        return bool(self.mcp or self.python)

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_meta(cls, data: dict[str, Any]) -> ToolsSpec:
        return cls(
            mcp=tuple(McpServerSpec(**{**m, "command": tuple(m.get("command") or ())}) for m in data.get("mcp", ())),
            python=tuple(PythonToolSpec(**p) for p in data.get("python", ())),
            max_steps=data.get("max_steps", DEFAULT_MAX_STEPS),
            tool_timeout_s=data.get("tool_timeout_s", DEFAULT_TOOL_TIMEOUT_S),
            source=data.get("source", ""),
        )


Report = Callable[[str, str], None]
"""(dotted field, problem): how a problem is reported (the job checker locates its line)."""


def parse_tools_spec(doc: dict[str, Any], source: str, report: Report) -> ToolsSpec | None:
    """The `[tools]` and `[agents]` tables of a TOML document; None when it declares neither."""
    tools = doc.get("tools")
    agents = doc.get("agents")
    if tools is None and agents is None:
        return None
    if tools is not None and not isinstance(tools, dict):
        report("tools", "must be a table ([[tools.mcp]] / [[tools.python]])")
        tools = {}
    if agents is not None and not isinstance(agents, dict):
        report("agents", "must be a table ([agents] max_steps, tool_timeout)")
        agents = {}
    tools, agents = tools or {}, agents or {}
    for key in tools:
        if key not in TOOLS_KEYS:
            report(f"tools.{key}", f"unknown kind of tool (known: {', '.join(sorted(TOOLS_KEYS))})")
    for key in agents:
        if key not in AGENTS_KEYS:
            report(f"agents.{key}", f"unknown key (known: {', '.join(sorted(AGENTS_KEYS))})")
    max_steps = agents.get("max_steps", DEFAULT_MAX_STEPS)
    if not (isinstance(max_steps, int) and not isinstance(max_steps, bool) and 1 <= max_steps <= MAX_STEPS_LIMIT):
        report("agents.max_steps", f"must be an integer from 1 to {MAX_STEPS_LIMIT}, not {max_steps!r}")
        max_steps = DEFAULT_MAX_STEPS
    timeout = agents.get("tool_timeout", DEFAULT_TOOL_TIMEOUT_S)
    if not (isinstance(timeout, int | float) and not isinstance(timeout, bool) and 0 < timeout <= 3600):
        report("agents.tool_timeout", f"must be a number of seconds from 0 to 3600, not {timeout!r}")
        timeout = DEFAULT_TOOL_TIMEOUT_S
    mcp = tuple(_mcp_servers(tools.get("mcp", []), report))
    python = tuple(_python_tools(tools.get("python", []), report))
    seen: dict[str, str] = {}
    for where, name in [(m.where, m.name) for m in mcp] + [(p.where, p.name) for p in python if p.name]:
        if name in seen:
            report(f"{where}.name", f"{name!r} is declared twice (also {seen[name]})")
        seen.setdefault(name, where)
    return ToolsSpec(mcp, python, max_steps, float(timeout), source)


def _entries(value: Any, dotted: str, report: Report) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(value, list):
        report(dotted, f"must be an array of tables ([[{dotted}]])")
        return []
    out = []
    for i, entry in enumerate(value):
        where = f"{dotted}[{i}]"
        if not isinstance(entry, dict):
            report(where, "must be a table")
            continue
        out.append((where, entry))
    return out


def _mcp_servers(value: Any, report: Report):
    for where, entry in _entries(value, "tools.mcp", report):
        for key in entry:
            if key not in MCP_KEYS:
                report(f"{where}.{key}", f"unknown key (known: {', '.join(sorted(MCP_KEYS))})")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            report(f"{where}.name", "missing: every MCP server needs a name")
            continue
        command, url = entry.get("command"), entry.get("url")
        if isinstance(command, str):
            command = command.split()
        if (command is None) == (url is None):
            report(where, "give either command (run over stdio) or url (streamable HTTP), not both or neither")
            continue
        if command is not None and not (
            isinstance(command, list) and command and all(isinstance(c, str) and c for c in command)
        ):
            report(f"{where}.command", "must be a command line: a list of strings, the program first")
            continue
        if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            report(f"{where}.url", f"must be an http(s) URL, not {url!r}")
            continue
        env = entry.get("env", {})
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            report(f"{where}.env", "must be a table of strings")
            env = {}
        processes = entry.get("processes", DEFAULT_MCP_PROCESSES if url is None else 1)
        if url is not None and "processes" in entry:
            report(f"{where}.processes", "applies to a command (stdio); a url is one server, however it scales")
            processes = 1
        elif not (
            isinstance(processes, int) and not isinstance(processes, bool) and 1 <= processes <= MAX_MCP_PROCESSES
        ):
            report(f"{where}.processes", f"must be an integer from 1 to {MAX_MCP_PROCESSES}, not {processes!r}")
            processes = DEFAULT_MCP_PROCESSES
        yield McpServerSpec(name, tuple(command or ()), url, dict(env), where, processes)


def _python_tools(value: Any, report: Report):
    for where, entry in _entries(value, "tools.python", report):
        for key in entry:
            if key not in PYTHON_KEYS:
                report(f"{where}.{key}", f"unknown key (known: {', '.join(sorted(PYTHON_KEYS))})")
        function = entry.get("function")
        if not isinstance(function, str) or function.count(":") != 1 or not all(function.split(":")):
            report(f"{where}.function", f"must be 'module:function', not {function!r}")
            continue
        name = entry.get("name")
        if name is not None and not isinstance(name, str):
            report(f"{where}.name", "must be a string")
            name = None
        yield PythonToolSpec(function, name, where)
