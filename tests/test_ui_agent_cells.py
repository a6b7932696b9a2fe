"""A grid cell of a multi-step agent: the step it is on, and whether
it is thinking (a model call in flight) or running its tools, at 120x40 (`42:3`, `42*3`) and at
80x24 where the number fills the cell (`:3`, `*3`); a job without tools looks as it always did.

The agents' tool is `hold` below: it waits for the test to open a gate, so an agent stays in its
tools exactly as long as the test wants and every wait is for a state, never for time."""

from __future__ import annotations

import asyncio

import pytest
from rich.style import Style
from swarm_tui.config import Config
from swarm_tui.engine import EngineSettings, TaskState
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.tools.spec import PythonToolSpec, ToolsSpec
from swarm_tui.ui.app import SwarmApp, make_app
from swarm_tui.ui.contrast import contrast_ratio, readable_on
from swarm_tui.ui.themes import bundled_themes, swarm_variable_defaults
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.ui.widgets.panels.run_panel import RunPanel
from textual.app import App, ComposeResult
from textual.color import Color

from tests.conftest import write_batch
from tests.test_agents import agents_job
from tests.test_ui_app import wait_for as ui_wait_for
from tests.test_ui_console import low_contrast_text


class Gate:
    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.waiting = 0
        """Tool calls waiting at the gate now."""

    def let_through(self) -> None:
        """The calls waiting now go on; the next ones wait again."""
        self.open.set()
        self.open.clear()


GATE: Gate | None = None


async def hold(note: str) -> str:
    """Waits until the test opens the gate."""
    assert GATE is not None
    GATE.waiting += 1
    try:
        await GATE.open.wait()
    finally:
        GATE.waiting -= 1
    return f"held {note}"


@pytest.fixture
def gate() -> Gate:
    global GATE
    GATE = Gate()
    return GATE


def cell(grid: AgentGrid, index: int) -> tuple[str, Style]:
    """Agent `index`'s cell as drawn (text, style): its row rendered, cut at its columns."""
    row, col = divmod(index, grid.columns)  # the agents are 0..n-1 in order
    strip = grid.render_line(row * (1 + grid.row_gap) - grid.scroll_offset.y)
    x = col * grid.pitch
    segments = list(strip.crop(x, x + grid.cell_width))
    return "".join(s.text for s in segments), segments[0].style or Style()


def panel_text(app: SwarmApp) -> str:
    panel = app.query_one(RunPanel)
    return "\n".join(panel.render_line(y).text for y in range(panel.size.height))


async def wait_for(pilot, condition, what: str) -> None:
    await ui_wait_for(pilot, condition, timeout=20, what=what)


def tools_session(tmp_path, sim, agents: int) -> SwarmSession:
    tools = ToolsSpec(python=(PythonToolSpec(f"{__name__}:hold", where="tools.python[0]"),), source="job.toml")
    job = agents_job(tmp_path, [f"agent {i} [[sim:tools=2]]" for i in range(agents)], tools)
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=agents))
    return SwarmSession.open_new(job, plan, tmp_path / "run")


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_a_cell_shows_the_step_and_whether_the_agent_thinks_or_runs_a_tool(tmp_path, sim_factory, gate, size):
    agents = 12
    sim = sim_factory(latency_ms=800, latency_sigma=0.0)  # a model call: long enough to be seen thinking
    session = tools_session(tmp_path, sim, agents)
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=size) as pilot:
            grid = app.grid
            beside = size == (120, 40)  # 4-wide cells there; at 80x24 a glyph and the 2 digits fill it
            assert grid.step_beside_number is beside

            def shows(index: int, mark: str, step: int) -> str:
                return f"{index + 1 if beside else ''}{mark}{step}".rjust(grid.cell_width)

            def calls_asked() -> int:  # by the steps the agents are in (the simulator may ask for several)
                return sum(len((grid.facts.step_of(i) or (0, ()))[1] or ()) for i in range(agents))

            def all_show(mark: str, step: int):
                return lambda: all(cell(grid, i)[0] == shows(i, mark, step) for i in range(agents))

            drawn: set[tuple[int, str, object]] = set()  # every cell as each drain had it drawn
            update_cells = grid.update_cells

            def recording(indices) -> None:
                update_cells(indices)
                for i in indices:
                    text, style = cell(grid, i)
                    drawn.add((i, text, style.bgcolor))

            grid.update_cells = recording  # type: ignore[method-assign]
            tool = grid.tool_style().bgcolor
            running = grid.state_style(TaskState.RUNNING).bgcolor
            assert tool != running

            await wait_for(pilot, all_show("*", 1), "every agent in its tool at step 1 (held there)")
            await wait_for(pilot, lambda: gate.waiting == calls_asked(), "every tool call at the gate")
            assert {cell(grid, i)[1].bgcolor for i in range(agents)} == {tool}
            await wait_for(pilot, lambda: f"{agents} in tools" in panel_text(app), "the legend to count them")
            text = panel_text(app)
            assert "0 thinking" in text
            assert "▸ agent 1: step 1, in hold" in text
            assert ("7*3 agent 7, step 3" if beside else "*3 step 3") in text  # the legend's sample cell
            for theme in [t.name for t in bundled_themes()]:  # the tool colour, readable in every theme
                app.theme = theme
                await pilot.pause()
                await pilot.wait_for_scheduled_animations()
                await pilot.pause()
                assert low_contrast_text(app) == [], theme
            app.theme = "swarm-dark"
            await pilot.pause()

            gate.let_through()  # each agent's second model call: it thinks at step 2, then holds again
            await wait_for(pilot, all_show("*", 2), "every agent in its tool at step 2")
            await wait_for(pilot, lambda: gate.waiting == calls_asked(), "every tool call at the gate again")
            thinking = {i for i, text, colour in drawn if text == shows(i, ":", 2) and colour == running}
            assert thinking, "no agent was drawn thinking at step 2 (its model call in flight)"
            assert not {(text, colour) for _, text, colour in drawn if ":" in text} - {
                (shows(i, ":", 2), running) for i in range(agents)
            }, "thinking is at step 2, in the running colour"

            gate.open.set()  # for good: they answer (a third model call) and are done
            await wait_for(pilot, lambda: app.phase == "DONE", "the run to end")
            await pilot.pause()
            assert [cell(grid, i)[0] for i in range(agents)] == [
                f"o{' ' if beside else ''}{i + 1:>2}" for i in range(agents)
            ], "a glyph and the number"
            assert grid.facts.in_tools == 0
            assert session.engine.stats.critical_path == 3
            await pilot.press("q")
        assert app.return_value == 0
    finally:
        await session.aclose()


async def test_a_job_without_tools_never_shows_steps(tmp_path, sim):
    job = load_job(write_batch(tmp_path / "job.jsonl", [f"plain {i} [[sim:tools=3]]" for i in range(6)]))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=6))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.phase == "DONE", "the run to end")
            assert not app.grid.facts.stepping
            text = panel_text(app)
            assert "in tools" not in text and "thinking" not in text and " running" in text
            await pilot.press("q")
    finally:
        await session.aclose()


# ----------------------------------------------------------------- the grid alone, deterministic

MID_RUN = {
    **dict.fromkeys(range(0, 30), TaskState.SUCCEEDED),
    **dict.fromkeys(range(30, 60), TaskState.RUNNING),
    **dict.fromkeys(range(60, 100), TaskState.QUEUED),
    35: TaskState.RETRYING,
    36: TaskState.FAILED,
}


def step_through(grid: AgentGrid) -> None:
    """Agents 31-60 mid-run, as the app tells the grid: 31-34 thinking before any step; then in
    their tools at steps 1-3 (even) or thinking at steps 2-4 (odd); 36 retrying; 37 failed; 60 at
    step 12, in its tools."""
    for index in range(34, 60):
        if MID_RUN[index] is TaskState.FAILED:
            continue
        step = 1 + index % 3
        grid.facts.agent_stepped(index, step, ("lookup",))
        if index % 2:
            grid.facts.left_tools(index)  # its next model call started: thinking at step + 1
    grid.facts.agent_stepped(59, 12, ("add", "note"))


class GridHost(App[None]):
    """Grids alone, fitted as the console fits them: by default the two layouts it gives 100
    agents, at 120x40 (wide cells) and 80x24 (narrow ones)."""

    CSS = "AgentGrid { margin-bottom: 1; }"

    def __init__(
        self, layouts=(("wide", 100, (120 - 40, 40 - 12, 120 - 28)), ("narrow", 100, (80 - 40, 24 - 12, 80 - 28)))
    ) -> None:
        super().__init__()
        self.layouts = layouts

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return swarm_variable_defaults()

    def compose(self) -> ComposeResult:
        for name, agents, _ in self.layouts:
            yield AgentGrid(range(agents), {i: MID_RUN.get(i, TaskState.QUEUED) for i in range(agents)}, id=name)

    def on_mount(self) -> None:
        for theme in bundled_themes():
            self.register_theme(theme)
        self.theme = "swarm-dark"
        for name, agents, room in self.layouts:
            grid = self.query_one(f"#{name}", AgentGrid)
            grid.fit(*room)
            step_through(grid)
            grid.update_cells(range(agents))


def test_grid_mid_run_snapshot(snap_compare):
    assert snap_compare(GridHost(), terminal_size=(60, 30))


async def test_the_grid_s_cells_in_each_layout():
    shown = (30, 34, 35, 36, 37, 38, 59, 60)
    app = GridHost()
    async with app.run_test(size=(60, 30)):
        wide, narrow = app.query_one("#wide", AgentGrid), app.query_one("#narrow", AgentGrid)
        assert (wide.cell_width, narrow.cell_width) == (5, 4)
        assert [cell(wide, i)[0] for i in shown] == [
            ">  31",
            " 35*2",
            " 36~4",
            "x  37",
            " 38:3",
            " 39*3",
            "60*12",
            ".  61",
        ]
        assert [cell(narrow, i)[0] for i in shown] == ["> 31", "  *2", "  ~4", "x 37", "  :3", "  *3", " *12", ". 61"]
        assert cell(wide, 34)[1].bgcolor == wide.tool_style().bgcolor
        assert cell(wide, 35)[1].bgcolor == wide.state_style(TaskState.RETRYING).bgcolor  # retrying, at step 4
        assert cell(wide, 37)[1].bgcolor == wide.state_style(TaskState.RUNNING).bgcolor
        assert wide.facts.step_of(34) == (2, ("lookup",)) and wide.facts.step_of(37) == (3, None)
        assert wide.facts.step_of(59) == (12, ("add", "note")) and wide.facts.step_of(30) is None
        assert wide.facts.in_tools == 13

    app = GridHost((("compact", 1000, (40, 12, 52)),))  # one character a cell: a glyph, no step
    async with app.run_test(size=(60, 30)):
        compact = app.query_one("#compact", AgentGrid)
        assert compact.compact
        assert [cell(compact, i)[0] for i in shown] == [">", "*", "~", "x", ">", "*", "*", "."]


def test_tool_cells_stand_apart_in_every_theme():
    """(The text on `$swarm-tool` is held to AA by the theme test, as every `swarm-*` colour is.)
    A cell in its tools looks like no other state's, and not like a thinking one even without its
    hue: black text on one, white on the other, or a clear step in lightness."""
    for theme in bundled_themes():
        colours = theme.variables
        tool = Color.parse(colours["swarm-tool"])
        for state in ("running", "queued", "retrying", "succeeded", "failed", "cancelled", "cached"):
            other = Color.parse(colours[f"swarm-{state}"])
            distance = sum((a - b) ** 2 for a, b in zip(tool.rgb, other.rgb, strict=True)) ** 0.5
            assert distance >= 90, f"{theme.name}: $swarm-tool is too close to $swarm-{state}"
        running = Color.parse(colours["swarm-running"])
        assert readable_on(tool) != readable_on(running) or contrast_ratio(tool, running) >= 1.5, theme.name


CELL_KINDS = (
    *("queued", "running", "tool", "batch", "cached"),
    *("low-score", "retrying", "succeeded", "failed", "cancelled"),
)


@pytest.mark.parametrize("theme", ["swarm-dark", "swarm-light", "swarm-high-contrast"])
async def test_every_kind_of_cell_has_a_colour_of_its_own_at_16_colours(app_on_run, theme):
    """On a 16-colour terminal (`TERM=xterm`, `screen`) each colour is shown as the nearest of the
    16 (Rich's downgrade, which Textual's output goes through): done and queued cells were the one
    grey there (and cancelled too; running and tool one blue). Each kind of cell keeps a colour of
    its own, and none is the screen's background."""
    from rich.color import ColorSystem

    app = app_on_run(theme=theme)
    async with app.run_test(size=(120, 40)):
        grid = app.grid

        def sixteen(component: str) -> int | None:
            colour = grid.get_component_rich_style(component).bgcolor
            assert colour is not None, component
            return colour.downgrade(ColorSystem.STANDARD).number

        shown = {kind: sixteen(f"agent-grid--{kind}") for kind in CELL_KINDS}
        background = app.screen.rich_style.bgcolor.downgrade(ColorSystem.STANDARD).number
    same = {kind: n for kind, n in shown.items() if list(shown.values()).count(n) > 1}
    assert not same, f"{theme}: cells that look alike at 16 colours: {same}"
    assert background not in shown.values(), f"{theme}: a cell the colour of the background: {shown}"
