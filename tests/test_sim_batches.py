"""The simulator's OpenAI Batch API, driven by the real openai SDK over loopback.

Each test starts its own thread-mode simulator (``sim_factory``) with a compressed batch
clock (``batch_seconds`` well under a second), so the whole file runs in a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx
import openai
import pytest
from swarm_tui.sim import SimConfig, add_arguments, config_from_args
from swarm_tui.sim.args import config_to_argv

from tests.helpers import wait_until

FINAL = ("completed", "expired", "cancelled", "failed")
ORDER = ["validating", "in_progress", "finalizing", "completed"]


def line(i: int | str, prompt: str | None = None, **body) -> dict:
    cid = i if isinstance(i, str) else f"task-{i:04d}"
    return {
        "custom_id": cid,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "sim-1",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": prompt or f"batch task {cid}"}],
            **body,
        },
    }


def jsonl(items: list) -> bytes:
    return ("\n".join(x if isinstance(x, str) else json.dumps(x) for x in items) + "\n").encode()


def sdk(sim, **kw) -> openai.AsyncOpenAI:
    kw.setdefault("api_key", "sk-test")
    return openai.AsyncOpenAI(base_url=sim.base_url, max_retries=0, **kw)


async def upload(client: openai.AsyncOpenAI, items: list, name: str = "requests.jsonl"):
    return await client.files.create(file=(name, jsonl(items)), purpose="batch")


async def start(client: openai.AsyncOpenAI, items: list, **kw):
    f = await upload(client, items)
    return await client.batches.create(
        input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h", **kw
    )


async def until_final(client: openai.AsyncOpenAI, batch_id: str, timeout: float = 10.0, seen: list | None = None):
    deadline = time.monotonic() + timeout
    while True:
        b = await client.batches.retrieve(batch_id)
        if seen is not None:
            seen.append(b)
        if b.status in FINAL:
            return b
        assert time.monotonic() < deadline, f"batch still {b.status} after {timeout}s"
        await asyncio.sleep(0.02)


async def lines_of(client: openai.AsyncOpenAI, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    content = await client.files.content(file_id)
    return [json.loads(x) for x in content.text.splitlines()]


def check_result_line(item: dict) -> None:
    """OpenAI's batch output line: exactly these keys, ``batch_req_`` ids."""
    assert set(item) == {"id", "custom_id", "response", "error"}
    assert item["id"].startswith("batch_req_")
    if item["response"] is not None:
        assert set(item["response"]) == {"status_code", "request_id", "body"}
        assert item["response"]["request_id"].startswith("req_")


# -- the happy path -------------------------------------------------------------------------


async def test_every_line_answered_once_with_progress_and_openai_shapes(sim_factory):
    sim = sim_factory(batch_seconds=1.0)
    client = sdk(sim)
    items = [line(i) for i in range(2000)]
    f = await upload(client, items)
    assert f.id.startswith("file-") and f.object == "file" and f.purpose == "batch" and f.status == "processed"
    assert f.bytes == len(jsonl(items)) and f.filename == "requests.jsonl"
    assert (await client.files.retrieve(f.id)).id == f.id
    assert (await client.files.content(f.id)).content == jsonl(items)

    b = await client.batches.create(
        input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h", metadata={"run": "r1"}
    )
    assert b.id.startswith("batch_") and b.object == "batch" and b.status == "validating"
    assert b.request_counts is not None and b.request_counts.total == 2000 and b.metadata == {"run": "r1"}
    assert b.output_file_id is None and b.expires_at == b.created_at + 86400

    seen: list = []
    done = await until_final(client, b.id, seen=seen)
    assert done.status == "completed"
    statuses = [x.status for x in seen]
    assert [s for i, s in enumerate(statuses) if i == 0 or s != statuses[i - 1]] == [
        s for s in ORDER if s in statuses
    ]  # never backwards
    progress = [x.request_counts.completed for x in seen]
    assert progress == sorted(progress)
    assert any(0 < x.request_counts.completed < 2000 for x in seen if x.status == "in_progress")
    assert done.request_counts.completed == 2000 and done.request_counts.failed == 0
    assert done.in_progress_at and done.finalizing_at and done.completed_at
    assert done.created_at <= done.in_progress_at <= done.finalizing_at <= done.completed_at
    assert done.error_file_id is None and done.model == "sim-1"

    out_file = await client.files.retrieve(done.output_file_id)
    assert out_file.purpose == "batch_output" and out_file.filename == f"{b.id}_output.jsonl"
    out = await lines_of(client, done.output_file_id)
    assert sorted(x["custom_id"] for x in out) == [f"task-{i:04d}" for i in range(2000)]
    assert len({x["id"] for x in out}) == 2000
    for item in out:
        check_result_line(item)
        assert item["error"] is None and item["response"]["status_code"] == 200
        openai.types.chat.ChatCompletion.model_validate(item["response"]["body"])
    assert out[0]["response"]["body"]["choices"][0]["message"]["content"].startswith("Sim answer to: batch task")
    usage = done.usage
    assert usage is not None
    assert usage.input_tokens == sum(x["response"]["body"]["usage"]["prompt_tokens"] for x in out)
    assert usage.output_tokens == sum(x["response"]["body"]["usage"]["completion_tokens"] for x in out)

    stats = sim.stats()
    batch = stats["batch"]
    assert batch["files_uploaded"] == 1 and batch["batches_created"] == 1 and batch["completed"] == 1
    assert batch["lines_submitted"] == 2000 and batch["lines_by_custom_id_max"] == 1
    assert batch["lines_succeeded"] == 2000 and batch["active"] == 0
    assert batch["chat"]["requests"] == 2000 and batch["chat"]["successes"] == 2000
    assert stats["requests"] == 0 and stats["successes"] == 0  # batch lines stay out of the live counters

    # the same file once more: every custom_id has now been submitted twice
    b2 = await client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert (await until_final(client, b2.id)).status == "completed"
    batch = sim.stats()["batch"]
    assert batch["lines_by_custom_id_max"] == 2 and batch["custom_ids_resubmitted"] == 2000
    assert batch["lines_submitted"] == 4000


async def test_batch_answers_are_those_of_live_calls(sim_factory):
    """Same seed, same bodies: a batch line's answer is the live call's (markers included)."""
    live, batched = sim_factory(seed=7, batch_seconds=0.0), sim_factory(seed=7, batch_seconds=0.0)
    prompts = ["summarise the report", "plan three steps", "flaky one [[sim:500]]", "json please"]
    items = [line(i, p) for i, p in enumerate(prompts)]
    items[3]["body"]["response_format"] = {"type": "json_object"}
    with httpx.Client(trust_env=False, timeout=5) as http:
        answers = [http.post(live.base_url + "/chat/completions", json=x["body"]) for x in items]
    client = sdk(batched)
    done = await until_final(client, (await start(client, items)).id)
    assert done.status == "completed"
    results = {x["custom_id"]: x for x in await lines_of(client, done.output_file_id)}
    results.update({x["custom_id"]: x for x in await lines_of(client, done.error_file_id)})
    for item, live_answer in zip(items, answers, strict=True):
        got = results[item["custom_id"]]["response"]
        assert got["status_code"] == live_answer.status_code
        want = live_answer.json()
        if live_answer.status_code == 200:
            assert got["body"]["choices"] == want["choices"] and got["body"]["usage"] == want["usage"]
        else:
            assert got["body"] == want
    assert done.request_counts.completed == 3 and done.request_counts.failed == 1


# -- failures -------------------------------------------------------------------------------


async def test_error_lines_go_to_the_error_file_seeded(sim_factory):
    def items() -> list:
        xs = [line(i) for i in range(400)]
        xs[10] = line(10, "scripted [[sim:429]]")
        xs[20] = {
            **line(20),
            "body": {"model": "sim-1", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]},
        }
        return xs

    failed_sets = []
    for _ in range(2):
        sim = sim_factory(seed=3, batch_seconds=0.2, batch_error_rate=0.25, rpm=1)  # live rpm does not apply
        client = sdk(sim)
        done = await until_final(client, (await start(client, items())).id)
        assert done.status == "completed"
        out = await lines_of(client, done.output_file_id)
        err = await lines_of(client, done.error_file_id)
        assert len(out) == done.request_counts.completed and len(err) == done.request_counts.failed
        assert len(out) + len(err) == 400
        assert {x["custom_id"] for x in out}.isdisjoint({x["custom_id"] for x in err})
        for item in err:
            check_result_line(item)
            assert item["error"] is None and item["response"]["status_code"] >= 400
            assert set(item["response"]["body"]["error"]) >= {"message", "type", "param", "code"}
        by_id = {x["custom_id"]: x["response"] for x in err}
        assert by_id["task-0010"]["status_code"] == 429 and by_id["task-0020"]["status_code"] == 400
        assert by_id["task-0020"]["body"]["error"]["code"] == "integer_below_min_value"
        batch = sim.stats()["batch"]
        assert 60 <= batch["lines_injected_errors"] <= 140  # a quarter of 400, seeded
        assert batch["lines_failed"] == len(err) and batch["lines_succeeded"] == len(out)
        assert batch["chat"]["requests"] == 400 - batch["lines_injected_errors"]
        assert batch["chat"]["rate_limited"] == 1  # the scripted 429 only
        assert sim.stats()["requests"] == 0
        failed_sets.append(sorted(by_id))
    assert failed_sets[0] == failed_sets[1]  # the same seed fails the same lines


async def test_expired_batch_keeps_what_ran_and_lists_the_rest_as_batch_expired(sim_factory):
    sim = sim_factory(batch_seconds=0.4, batch_expire_after=0.5)
    client = sdk(sim)
    b = await start(client, [line(i) for i in range(300)])
    assert b.expires_at is not None and b.expires_at - b.created_at <= 2
    done = await until_final(client, b.id)
    assert done.status == "expired" and done.expired_at and done.completed_at is None
    assert done.request_counts.completed == 150 and done.request_counts.failed == 150
    out = await lines_of(client, done.output_file_id)
    err = await lines_of(client, done.error_file_id)
    assert [x["custom_id"] for x in out] == [f"task-{i:04d}" for i in range(150)]
    assert [x["custom_id"] for x in err] == [f"task-{i:04d}" for i in range(150, 300)]
    for item in err:
        check_result_line(item)
        assert item["response"] is None
        assert item["error"]["code"] == "batch_expired" and "completion window expired" in item["error"]["message"]
    batch = sim.stats()["batch"]
    assert batch["expired"] == 1 and batch["lines_expired"] == 150 and batch["chat"]["requests"] == 150


async def test_cancel_keeps_completed_lines_and_runs_no_more(sim_factory):
    sim = sim_factory(batch_seconds=2.0)
    client = sdk(sim)
    b = await start(client, [line(i) for i in range(2000)])
    deadline = time.monotonic() + 30
    while (await client.batches.retrieve(b.id)).request_counts.completed < 100:
        assert time.monotonic() < deadline, "the batch never ran 100 lines"
        await asyncio.sleep(0.02)
    c = await client.batches.cancel(b.id)
    assert c.status == "cancelling" and c.cancelling_at
    ran = c.request_counts.completed
    assert 100 <= ran < 2000
    assert (await client.batches.cancel(b.id)).status in ("cancelling", "cancelled")  # idempotent
    done = await until_final(client, b.id)
    assert done.status == "cancelled" and done.cancelled_at and done.completed_at is None
    assert done.request_counts.completed == ran and done.request_counts.total == 2000
    out = await lines_of(client, done.output_file_id)
    assert [x["custom_id"] for x in out] == [f"task-{i:04d}" for i in range(ran)]
    assert done.error_file_id is None
    await wait_until(lambda: sim.stats()["batch"]["cancelled"] == 1, "the simulator to count the cancelled batch")
    stats = sim.stats()["batch"]
    assert stats["chat"]["requests"] == ran and stats["cancelled"] == 1
    assert stats["lines_not_run"] == 2000 - ran
    assert (await client.batches.cancel(b.id)).status == "cancelled"  # still idempotent


async def test_cancel_of_a_completed_batch_is_refused(sim_factory):
    client = sdk(sim_factory(batch_seconds=0.0))
    done = await until_final(client, (await start(client, [line(0)])).id)
    with pytest.raises(openai.ConflictError, match="status 'completed'"):
        await client.batches.cancel(done.id)


# -- refusals -------------------------------------------------------------------------------


def _bad_files() -> list[tuple[list, str, str]]:
    ok = [line(0), line(1)]
    missing_id = line(2)
    del missing_id["custom_id"]
    return [
        ([*ok, "{not json"], "Line 3", "invalid_json_line"),
        ([*ok, missing_id], "Line 3", "missing_required_parameter"),
        ([*ok, line(0)], "Line 3", "duplicate_custom_id"),
        ([*ok, {**line(2), "method": "GET"}], "Line 3", "invalid_method"),
        ([*ok, {**line(2), "url": "/v1/embeddings"}], "Line 3", "invalid_url"),
        ([*ok, {**line(2), "body": "hi"}], "Line 3", "invalid_body"),
        ([*ok, line(2, model="other")], "Line 3", "mismatched_model"),
        ([*ok, line(2, stream=True)], "Line 3", "invalid_value"),
        ([], "empty", "empty_file"),
    ]


@pytest.mark.parametrize(("items", "where", "code"), _bad_files())
async def test_invalid_file_is_refused_naming_the_line(sim_factory, items, where, code):
    sim = sim_factory()
    with pytest.raises(openai.BadRequestError) as e:
        await upload(sdk(sim), items)
    assert where in e.value.message
    assert isinstance(e.value.body, dict) and e.value.body["code"] == code
    if where.startswith("Line"):
        assert e.value.body["line"] == 3
    assert sim.stats()["batch"]["files_rejected"] == 1 and sim.stats()["batch"]["files_uploaded"] == 0


async def test_batch_creation_refusals_keys_and_down(sim_factory):
    sim = sim_factory(require_key="sk-right")
    good = sdk(sim, api_key="sk-right")
    with pytest.raises(openai.AuthenticationError):
        await upload(sdk(sim, api_key="sk-wrong"), [line(0)])
    f = await upload(good, [line(0)])
    with pytest.raises(openai.AuthenticationError):
        await sdk(sim, api_key="sk-wrong").batches.retrieve("batch_x")
    with pytest.raises(openai.NotFoundError):
        await good.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.BadRequestError, match="only '/v1/chat/completions'"):
        await good.batches.create(input_file_id=f.id, endpoint="/v1/embeddings", completion_window="24h")
    other = await good.files.create(file=("notes.txt", b"hello"), purpose="user_data")
    with pytest.raises(openai.BadRequestError, match="purpose 'batch'"):
        await good.batches.create(input_file_id=other.id, endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.NotFoundError):
        await good.batches.retrieve("batch_nope")
    sim.update_config(down=True)
    with pytest.raises(openai.InternalServerError):
        await good.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")


# -- listing, bare prefix, stats, config ------------------------------------------------------


async def test_list_pages_newest_first_and_bare_routes(sim_factory):
    sim = sim_factory(batch_seconds=0.0)
    client = sdk(sim)
    ids = [(await start(client, [line(i)])).id for i in range(3)]
    page = await client.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2] and page.has_more
    assert [b.id async for b in client.batches.list(limit=2)] == ids[::-1]
    with httpx.Client(base_url=sim.url, trust_env=False, timeout=5) as http:
        r = http.get("/batches", params={"after": ids[2], "limit": 5})
        assert r.status_code == 200 and [b["id"] for b in r.json()["data"]] == ids[1::-1]
        assert not r.json()["has_more"] and r.json()["last_id"] == ids[0]
        assert http.get(f"/batches/{ids[0]}").json()["status"] == "completed"
        assert http.get("/batches", params={"limit": 0}).status_code == 400
        up = http.post("/files", data={"purpose": "batch"}, files={"file": ("a.jsonl", jsonl([line(9)]))})
        assert up.status_code == 200 and up.json()["filename"] == "a.jsonl"
        assert http.get(f"/files/{up.json()['id']}/content").content == jsonl([line(9)])
        assert http.delete(f"/v1/files/{up.json()['id']}").json()["deleted"] is True
        assert http.get(f"/v1/files/{up.json()['id']}").status_code == 404
        assert http.post("/v1/files", json={"purpose": "batch"}).status_code == 400


async def test_reset_clears_batch_counters_and_objects(sim_factory):
    sim = sim_factory(batch_seconds=0.0)
    client = sdk(sim)
    done = await until_final(client, (await start(client, [line(i) for i in range(5)])).id)
    assert sim.stats()["batch"]["lines_submitted"] == 5
    sim.reset()
    batch = sim.stats()["batch"]
    assert batch["lines_submitted"] == batch["batches_created"] == batch["files_uploaded"] == 0
    assert batch["lines_by_custom_id_max"] == 0 and batch["chat"]["requests"] == 0
    with pytest.raises(openai.NotFoundError):
        await client.batches.retrieve(done.id)


def test_flags_and_runtime_config(sim_factory):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ns = parser.parse_args(["--batch-seconds", "0.5", "--batch-error-rate", "0.1", "--batch-expire-after", "0.3"])
    cfg = config_from_args(ns)
    assert (cfg.batch_seconds, cfg.batch_error_rate, cfg.batch_expire_after) == (0.5, 0.1, 0.3)
    assert config_from_args(parser.parse_args(config_to_argv(cfg))) == cfg
    assert SimConfig().batch_expire_after is None and SimConfig().batch_seconds == 3.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--batch-error-rate", "1.5"])
    for bad in ({"batch_seconds": -1}, {"batch_expire_after": 2}, {"batch_error_rate": "x"}):
        with pytest.raises(ValueError):
            SimConfig().patched(bad)
    sim = sim_factory()
    assert sim.update_config(batch_seconds=0.25, batch_expire_after=None)["batch_seconds"] == 0.25
    assert sim.update_config(batch_expire_after=0.5)["batch_expire_after"] == 0.5
    with pytest.raises(ValueError, match="batch_error_rate"):
        sim.update_config(batch_error_rate=3)
