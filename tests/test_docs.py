"""The documentation cannot drift from the program: the command-line reference is generated from
the parser and holds every command and option; the site's nav lists every page; the "Your first
job" page's example files run as written with the real CLI; summary.json's schema page names every
field a real run writes; every command's --help has a description and examples."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from swarm_tui.cli.main import build_parser

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def hook_module():
    """docs/hooks/cli_reference.py, loaded as mkdocs loads it (by path, without mkdocs)."""
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "hooks" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parsers(parser: argparse.ArgumentParser, name: str = "swarm-tui"):
    """(full command name, parser) of the program and every command below it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


def arguments(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string and positional name of one parser, but argparse's own -h/--help."""
    names: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        names += action.option_strings or [positional_name(action)]
    return names


def positional_name(action: argparse.Action) -> str:
    """A positional as --help shows it: its metavar, else its choices, else its name."""
    if action.metavar:
        return str(action.metavar)
    if action.choices:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest


def mkdocs_config() -> dict:
    return yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))


def test_every_command_and_option_is_in_the_generated_reference():
    parser = build_parser()
    sections = hook_module().command_sections(hook_module().reference_markdown(parser))
    commands = dict(parsers(parser))
    assert set(sections) == set(commands), "a command has no section of its own in the reference"
    assert len(commands) >= 12  # the program and its 11 commands: a walk that found none proves nothing
    for name, sub in commands.items():
        for argument in arguments(sub):
            # an entry is `INVOCATION`: the option string, then its value, a comma or the end
            entry = re.compile(rf"^- `{re.escape(argument)}[ `,]", re.MULTILINE)
            assert entry.search(sections[name]), f"{name} {argument} is missing from the reference"


def test_an_option_added_to_the_parser_reaches_the_reference():
    parser = build_parser()
    run = dict(parsers(parser))["swarm-tui run"]
    run.add_argument("--an-option-added-later", metavar="N", help="what it does")
    section = hook_module().command_sections(hook_module().reference_markdown(parser))["swarm-tui run"]
    assert "- `--an-option-added-later N`: what it does" in section


def test_the_reference_page_is_generated_at_build_time():
    hooks = hook_module()
    assert "docs/hooks/cli_reference.py" in mkdocs_config()["hooks"]
    page = (DOCS / hooks.REFERENCE_PAGE).read_text(encoding="utf-8")
    assert page.count(hooks.MARKER) == 1, "the generated reference needs its marker on the page"
    assert hooks.SCREENSHOT.exists(), "the console's screenshot the site serves is the main screen's snapshot"


def nav_pages(entries) -> list[str]:
    pages: list[str] = []
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_the_nav_lists_every_page_and_only_pages_that_exist():
    listed = nav_pages(mkdocs_config()["nav"])
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "hooks" not in p.parts}
    assert len(listed) == len(set(listed)), "a page is listed twice"
    assert set(listed) == on_disk, f"not in the nav: {on_disk - set(listed)}; missing: {set(listed) - on_disk}"


def first_job_files() -> dict[str, str]:
    """The example files of the "Your first job" page: its fenced blocks with a title."""
    page = (DOCS / "first-job.md").read_text(encoding="utf-8")
    blocks = re.findall(r'^```\w+ title="([^"]+)"\n(.*?)^```$', page, flags=re.MULTILINE | re.DOTALL)
    return dict(blocks)


def expected_ids(name: str, text: str) -> set[str]:
    if name.endswith(".jsonl"):
        return {json.loads(line)["custom_id"] for line in text.splitlines() if line.strip()}
    doc = tomllib.loads(text)
    if "tasks" in doc:
        count = doc["tasks"]["count"]
        return {f"agent-{i:0{len(str(count))}}" for i in range(1, count + 1)}
    return {task["id"] for task in doc["task"]}


def test_the_first_job_pages_files_run_as_written(tmp_path):
    files = first_job_files()
    page = (DOCS / "first-job.md").read_text(encoding="utf-8")
    assert {Path(name).suffix for name in files} == {".jsonl", ".toml"}, "the page shows a job of each format"
    for name, text in files.items():
        assert f"swarm-tui run {name} --headless" in page, f"the page never runs {name}"
        (tmp_path / name).write_text(text, encoding="utf-8")
        out = tmp_path / "runs" / name.replace(".", "-")
        done = run_cli(
            "run", name, "--headless", "--out", str(out), "--sim-latency-ms", "5", "--sim-error-rate", "0", cwd=tmp_path
        )
        assert done.returncode == 0, f"{name}: exit {done.returncode}\n{done.stderr}"
        results = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
        assert {r["custom_id"] for r in results} == expected_ids(name, text)
        assert all(r["response"]["status_code"] == 200 for r in results)


def keys_of(summary: dict) -> set[str]:
    """The field names of summary.json the schema page must name: every key, nested ones too,
    but the names that are data (an endpoint's name, a model's, a price row's fields)."""
    found: set[str] = set()
    for key, value in summary.items():
        found.add(key)
        if key in ("endpoints", "by_endpoint", "by_model", "price"):
            for inner in value.values():
                found |= {k for k in inner if k != "price"} if isinstance(inner, dict) else set()
        elif isinstance(value, dict):
            found |= keys_of(value)
    return found


def test_the_summary_schema_page_names_every_field_a_run_writes(tmp_path):
    job = tmp_path / "job.jsonl"
    job.write_text(next(text for name, text in first_job_files().items() if name.endswith(".jsonl")), encoding="utf-8")
    done = run_cli("run", str(job), "--headless", "--out", str(tmp_path / "run"), "--sim-latency-ms", "5")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    schema = (DOCS / "reference" / "summary.md").read_text(encoding="utf-8")
    missing = sorted(key for key in keys_of(summary) if f"`{key}`" not in schema)
    assert not missing, f"summary.json fields the schema page does not name: {missing}"


@pytest.mark.parametrize("name", [name for name, _ in parsers(build_parser())])
def test_every_commands_help_has_a_description_and_examples(name):
    sub = dict(parsers(build_parser()))[name]
    assert sub.description, f"{name} --help has no description"
    assert sub.epilog and "examples:" in sub.epilog, f"{name} --help has no examples"
    examples = sub.epilog.split("examples:", 1)[1]
    assert examples.count("swarm-tui") >= 2, f"{name} --help shows fewer than two examples"
    assert isinstance(sub.formatter_class, type) and issubclass(
        sub.formatter_class, argparse.RawDescriptionHelpFormatter
    ), f"{name} --help would rewrap its examples"


def test_run_help_names_the_job_formats_and_a_real_provider():
    run = dict(parsers(build_parser()))["swarm-tui run"]
    text = run.format_help()
    assert ".jsonl" in text and ".toml" in text and "custom_id" in text and "[tasks]" in text
    assert "--provider" in run.epilog and "--base-url" in run.epilog


def test_the_readme_is_a_page():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md is {len(lines)} lines: the rest belongs in docs/"
