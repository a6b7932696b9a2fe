"""`swarm-tui shadow --judge`: a judge asked which answer of a mirrored pair is better, on loopback.

The simulator judges pairwise by the quality marks it puts on its own answers (8-9); a tiny fixed
server here answers with a mark of its own (q3: clearly worse), so a clearly better / worse pair
exists. Positions are balanced and mapped back; an unreadable verdict is re-asked once; judge
errors are counted and never stop the run; the judge is billed apart; a clear preference for the
secondary rolls back, a preference for the primary never overrules latency or errors."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable

import pytest
from aiohttp import web
from swarm_tui.cli import main
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.shadow import (
    ADOPT,
    ROLLBACK,
    ShadowConfig,
    ShadowJudge,
    decide_judged,
    mapped,
    run_shadow,
    sign_test_p,
)

from tests.conftest import run_cli

# 40 requests at 40/s, every other one mirrored: 20 pairs, all judged (--judge-rate defaults to 1)
QUICK = ["--duration", "1", "--rps", "40", "--rate", "0.5"]

Reply = Callable[[dict], "tuple[int, str]"]


class FixedServer:
    """An OpenAI-compatible server on loopback whose answer is `reply(body) -> (status, content)`;
    it keeps every body it was sent."""

    def __init__(self, reply: Reply, delay_s: float = 0.0) -> None:
        self.reply, self.delay_s = reply, delay_s
        self.bodies: list[dict] = []
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FixedServer:
        self._thread.start()
        assert self._started.wait(10), "the fixed server did not start"
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        status, content = self.reply(body)
        if status != 200:
            return web.json_response({"error": {"message": content, "type": "server_error"}}, status=status)
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.bodies)}",
                "object": "chat.completion",
                "created": 1,
                "model": body.get("model", "fixed-1"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
            }
        )


@pytest.fixture
def fixed():
    started: list[FixedServer] = []

    def start(reply: Reply, delay_s: float = 0.0) -> FixedServer:
        server = FixedServer(reply, delay_s).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def poor(body: dict) -> tuple[int, str]:
    """An answer the simulator's judge rates 3 (its own answers carry 8 or 9)."""
    return 200, "a vague answer ⟨q3⟩"


def judge_sections(body: dict) -> tuple[str, str, str]:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    task, rest = user.split("\n\nANSWER A:\n", 1)
    a, b = rest.split("\n\nANSWER B:\n", 1)
    return task.removeprefix("TASK:\n"), a, b


def test_a_secondary_judged_clearly_better_rolls_back_and_the_judge_is_billed_apart(tmp_path, sim_factory, fixed):
    primary = fixed(poor)  # fast, so latency alone would adopt it
    secondary = sim_factory(latency_ms=5.0, seed=11)
    judge = sim_factory(latency_ms=1.0, seed=3, judge_prose_first=1)  # the first verdict is prose: re-asked
    result = run_cli(
        "shadow",
        "--primary",
        primary.base_url,
        "--secondary",
        secondary.base_url,
        *QUICK,
        "--model",
        "gpt-4.1",
        "--judge",
        judge.base_url,
        "--judge-model",
        "gpt-4.1-mini",
        "--out",
        str(tmp_path / "s"),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "s" / "shadow.json").read_text())
    assert report["verdict"] == ROLLBACK and report["p95_ratio"] <= 2.0  # the judge decided, not latency
    assert report["agreement"]["compared"] == 20 and report["agreement"]["exact"] == 0
    ja = report["judged_agreement"]
    assert (ja["judged"], ja["primary_better"], ja["equal"], ja["secondary_better"]) == (20, 0, 0, 20)
    assert ja["secondary_better_share"] == 1.0 and ja["errors"] == 0
    assert ja["reasked"] == 1 and ja["calls"] == 21 == judge.stats()["judge"]["pairwise"]
    assert judge.stats()["judge"]["prose"] == 1
    # balanced positions, mapped back: the secondary won as A and as B
    assert ja["positions"] == {"primary_as_a": 10, "primary_as_b": 10, "said_a": 10, "said_b": 10, "said_equal": 0}
    # billed apart, at the judge model's price, never in the endpoints' own figures
    assert ja["judge"]["model"] == "gpt-4.1-mini" and ja["cost_usd"] > 0
    assert report["judge_cost_usd"] == ja["cost_usd"]
    assert report["primary"]["requests"] == 40 and report["secondary"]["requests"] == 20
    assert secondary.stats()["requests"] == 20 and judge.stats()["requests"] == 21
    reason = next(r for r in report["reasons"] if r.startswith("judge:"))
    assert "secondary better 20 (100%) of 20 judged pairs: the secondary's answers are clearly better" in reason
    assert "sign test p 9.54e-07 < 0.05" in reason
    assert report["judgement"]["judged_pairs"] == 20 and report["judgement"]["secondary_better_lead"] == 1.0
    assert "judged agreement over 20 pair(s)" in result.stdout and "secondary better 20 (100%)" in result.stdout
    assert "re-asked 1; errors 0" in result.stdout and "(apart)" in result.stdout
    assert "or the judge prefers the secondary's answers by at least 10 points of >= 10 judged pairs" in result.stdout


async def test_a_primary_judged_better_adopts_and_self_judges_on_the_primary(sim_factory, fixed):
    primary = sim_factory(latency_ms=5.0, seed=11)
    secondary = fixed(poor, delay_s=0.005)
    config = ShadowConfig(
        primary=ProviderProfile("p", base_url=primary.base_url),
        secondary=ProviderProfile("s", base_url=secondary.base_url),
        model="sim-1",
        rate=0.5,
        duration_s=1.0,
        rps=40,
        threshold=50.0,
        judge=ShadowJudge(),
    )  # --judge self
    report = await run_shadow(config)
    ja = report.judged_agreement
    assert report.verdict == ADOPT
    assert (ja["judged"], ja["primary_better"], ja["secondary_better"]) == (20, 20, 0)
    assert ja["judge"]["self"] and ja["judge"]["endpoint"] == "p" and ja["judge"]["model"] == "sim-1"
    # the judge's calls went to the primary, but are not counted as its traffic
    assert primary.stats()["judge"]["pairwise"] == 20
    assert primary.stats()["requests"] == report.primary.requests + 20 and report.primary.requests == 40
    assert any(
        r.startswith("judge: primary better 20 (100%)") and "never overrules latency or errors" in r
        for r in report.reasons
    )
    assert any("--judge self" in note for note in report.notes)
    assert ja["cost_usd"] is None and "price unknown" in ja["cost_display"]  # sim-1 has no price


async def test_a_position_biased_judge_is_cancelled_by_balanced_positions(fixed):
    primary = fixed(lambda body: (200, "primary's answer"))
    secondary = fixed(lambda body: (200, "secondary's answer"))
    always_a = fixed(lambda body: (200, '{"better": "A", "reason": "the first one reads better"}'))
    config = ShadowConfig(
        primary=ProviderProfile("p", base_url=primary.base_url),
        secondary=ProviderProfile("s", base_url=secondary.base_url),
        model="m",
        rate=0.5,
        duration_s=1.0,
        rps=40,
        threshold=1000.0,
        judge=ShadowJudge(endpoint=ProviderProfile("j", base_url=always_a.base_url)),
    )
    report = await run_shadow(config)
    ja = report.judged_agreement
    shown_first = [judge_sections(body)[1] for body in always_a.bodies]
    assert len(shown_first) == 20 and {a for a in shown_first} == {"primary's answer", "secondary's answer"}
    # every "A" mapped back to whichever endpoint the judge saw first
    assert ja["primary_better"] == shown_first.count("primary's answer") == ja["positions"]["primary_as_a"] == 10
    assert ja["secondary_better"] == shown_first.count("secondary's answer") == 10
    assert ja["positions"]["said_a"] == 20
    assert report.verdict == ADOPT
    assert any("said A in 20 of 20 decisive verdicts: a position bias" in note for note in report.notes)
    # the task shown is the request's own question
    task, _, _ = judge_sections(always_a.bodies[0])
    assert task and task in json.dumps(primary.bodies, ensure_ascii=False)
    assert mapped("A", True) == "primary" and mapped("A", False) == "secondary"
    assert mapped("B", True) == "secondary" and mapped("B", False) == "primary" and mapped("equal", False) == "equal"


def test_judge_errors_are_counted_and_the_run_goes_on(tmp_path, sim_factory, fixed):
    def judge(body: dict) -> tuple[int, str]:
        task, _, _ = judge_sections(body)
        if "17 * 23" in task:
            return 500, "the judge is down"
        if "Translate" in task:
            return 200, "Both are fine, honestly."  # never JSON, even re-asked
        return 200, '{"better": "equal", "reason": "the same answer"}'

    flaky = fixed(judge)
    primary, secondary = sim_factory(latency_ms=5.0, seed=11), sim_factory(latency_ms=5.0, seed=11)
    rubric = tmp_path / "rubric.md"
    rubric.write_text("Prefer the answer with the right number.\n", encoding="utf-8")
    result = run_cli(
        "shadow",
        "--primary",
        primary.base_url,
        "--secondary",
        secondary.base_url,
        *QUICK,
        "--model",
        "sim-1",
        "--judge",
        flaky.base_url,
        "--judge-rubric",
        str(rubric),
        "--json",
        "--out",
        str(tmp_path / "s"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["primary"]["requests"] == 40 and report["secondary"]["requests"] == 20  # the traffic ran out
    ja = report["judged_agreement"]
    # mirrored requests are the odd ones: prompts 1, 3, 5, 7 of the probe cycle, 5 pairs each
    assert ja["selected"] == 20 and ja["judged"] == 10 and ja["equal"] == 10
    assert ja["errors"] == 10 and ja["errors_by_kind"] == {"server_error": 5, "unreadable": 5}
    assert ja["reasked"] == 5 and ja["calls"] == 25 == len(flaky.bodies)
    assert all("Prefer the answer with the right number." in b["messages"][0]["content"] for b in flaky.bodies)
    assert report["verdict"] == ADOPT
    assert any(
        "the judge gave no verdict on 10 of 20 pair(s) (server_error 5, unreadable 5)" in n for n in report["notes"]
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--judge-model", "m"], "--judge-model needs --judge PROFILE|URL|self"),
        (["--judge-rate", "0.5"], "--judge-rate needs --judge"),
        (["--judge-rubric", "rubric.md"], "--judge-rubric needs --judge"),
        (["--judge", "self", "--judge-rubric", "/nonexistent/rubric.md"], "cannot read the rubric"),
        (["--judge", "self", "--judge-rate", "0"], "--judge-rate"),
        (["--judge", "nobody"], "no profile named 'nobody'"),
        (["--judge", "https://judge.example.invalid/v1"], "OPENAI_API_KEY is not set"),
    ],
)
def test_judge_options_that_cannot_work_exit_2_before_anything_is_sent(argv, message, capsys, sim):
    try:
        code = main(
            [
                "shadow",
                "--primary",
                sim.base_url,
                "--secondary",
                sim.base_url,
                "--model",
                "m",
                "--duration",
                "2",
                "--headless",
                *argv,
            ]
        )
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert sim.stats()["requests"] == 0


def _judged(pb: int, eq: int, sb: int, errors: int = 0, said_a: int | None = None) -> dict:
    said_a = (pb + sb + 1) // 2 if said_a is None else said_a
    return {
        "judged": pb + eq + sb,
        "primary_better": pb,
        "equal": eq,
        "secondary_better": sb,
        "errors": errors,
        "errors_by_kind": {"server_error": errors} if errors else {},
        "positions": {"said_a": said_a, "said_b": pb + sb - said_a, "said_equal": eq},
    }


RULE = {"min_pairs": 10, "margin": 0.1, "alpha": 0.05}


@pytest.mark.parametrize(
    "pb, eq, sb, rollback, why",
    [
        pytest.param(0, 0, 20, True, "clearly better (100 points ahead >= 10, sign test p 9.54e-07", id="all 20"),
        pytest.param(2, 9, 9, True, "clearly better (35 points ahead >= 10, sign test p 0.0327", id="9 to 2, 9 equal"),
        pytest.param(2, 10, 8, False, "could be chance (sign test p 0.0547 >= 0.05)", id="8 to 2 could be chance"),
        pytest.param(1, 6, 3, False, "could be chance", id="20 points ahead but 3 to 1"),
        pytest.param(0, 2, 7, False, "9 judged pair(s), under the minimum of 10", id="too few judged pairs"),
        pytest.param(0, 37, 3, False, "no clear preference", id="mostly equal: 7.5 points ahead"),
        pytest.param(5, 10, 5, False, "no clear preference", id="even"),
        pytest.param(15, 5, 0, False, "judged better (this never overrules latency or errors)", id="primary better"),
    ],
)
def test_the_judges_rule(pb, eq, sb, rollback, why):
    got, reasons, _ = decide_judged(_judged(pb, eq, sb), **RULE)
    assert got is rollback
    assert len(reasons) == 1 and reasons[0].startswith("judge:") and why in reasons[0]


def test_the_sign_test_and_the_notes():
    assert sign_test_p(5, 0) == 1 / 32 and sign_test_p(0, 0) == 1.0 and sign_test_p(3, 1) == 5 / 16
    assert sign_test_p(8, 2) == pytest.approx(56 / 1024)  # 8 of 10: not under 0.05
    assert sign_test_p(9, 2) == pytest.approx(67 / 2048)
    _, _, notes = decide_judged(_judged(0, 0, 12, errors=3, said_a=11), **RULE)
    assert notes[0] == "the judge gave no verdict on 3 of 15 pair(s) (server_error 3): not counted"
    assert notes[1].startswith("the judge said A in 11 of 12 decisive verdicts: a position bias")
    assert decide_judged(None, **RULE) == (False, [], [])
