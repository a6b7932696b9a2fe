"""The command-line reference, generated from the parser itself so it cannot drift from it.

`reference_markdown(parser)` is a pure function (argparse in, Markdown out) that the tests call
without mkdocs; `on_page_markdown` is the mkdocs hook that puts its output into
`reference/cli.md` where that page holds the `MARKER`, and `on_files` adds the console's
screenshot (the main screen's snapshot SVG, which the UI tests keep current) to the site.

Every command, sub-command, argument group and option of `swarm_tui.cli.main.build_parser()`
appears: the description, the usage line, each option with its value and help, and the epilog's
examples, as `swarm-tui COMMAND --help` prints them.
"""

# argparse has no public way to walk a parser's commands, groups and options, nor to format one
# option as --help does: its private parts are the only way in (stable since Python 3.2).
# ruff: noqa: SLF001

from __future__ import annotations

import argparse
import re
from pathlib import Path

MARKER = "<!-- cli-reference -->"
"""Where `reference/cli.md` takes the generated reference."""
REFERENCE_PAGE = "reference/cli.md"
REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "tests" / "__snapshots__" / "test_ui_snapshots" / "test_main_screen[120x40].svg"
"""The console at 120x40 as the snapshot tests render it; the site serves it as `assets/console.svg`."""
USAGE_WIDTH = 88


def reference_markdown(parser: argparse.ArgumentParser) -> str:
    """The whole reference: an index of the commands, then one section for the program's own
    options and one for each command (and each command of a command, should one have some)."""
    commands = list(_commands(parser))
    lines = ["| command | what it does |", "|---|---|"]
    for name, _, summary in commands:
        anchor = _anchor(name)
        lines.append(f"| [`{name}`](#{anchor}) | {_inline(summary)} |")
    sections = [_section(parser.prog, parser)]
    sections += [_section(name, sub) for name, sub, _ in commands]
    return "\n".join(lines) + "\n\n" + "\n".join(sections)


def command_sections(markdown: str) -> dict[str, str]:
    """The generated reference cut into its sections, by command (`swarm-tui`, `swarm-tui run`...)."""
    parts = re.split(r"^## `([^`]+)`(?: \{: #[a-z0-9-]+ \})?$", markdown, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _commands(parser: argparse.ArgumentParser, prefix: str | None = None):
    """(full name, parser, one-line help) of every command below `parser`, depth first."""
    prefix = prefix or parser.prog
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            full = f"{prefix} {name}"
            yield full, sub, helps.get(name, "")
            yield from _commands(sub, full)


def _section(name: str, parser: argparse.ArgumentParser) -> str:
    out = [f"## `{name}` {{: #{_anchor(name)} }}", ""]
    if parser.description:
        out += [_text_block(parser.description), ""]
    out += ["```text", _usage(parser).rstrip(), "```", ""]
    for group in parser._action_groups:
        entries = [_entry(parser, action) for action in group._group_actions if _shown(action)]
        if not entries:
            continue
        title = (group.title or "options").strip()
        out += [f"### {title[0].upper()}{title[1:]} {{: #{_anchor(name)}-{_anchor(title)} }}", ""]
        if group.description:
            out += [_inline(group.description), ""]
        out += entries
        out.append("")
    if parser.epilog:
        out += ["```text", parser.epilog.rstrip(), "```", ""]
    return "\n".join(out)


def _shown(action: argparse.Action) -> bool:
    """Every argument but `-h/--help` (argparse's own, on every command) and hidden ones."""
    if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
        return False
    return action.help != argparse.SUPPRESS


def _entry(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    invocation = formatter._format_action_invocation(action)
    help_text = formatter._expand_help(action) if action.help else ""
    tail = " (required)" if action.required and action.option_strings else ""
    return f"- `{invocation}`: {_inline(help_text)}{tail}".rstrip()


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help()


def _text_block(text: str) -> str:
    """A description as Markdown: its prose as paragraphs, its indented lines (lists, examples)
    as a block of their own, as --help shows them."""
    out: list[str] = []
    prose: list[str] = []
    pre: list[str] = []

    def flush() -> None:
        if prose:
            out.append(_inline(" ".join(line.strip() for line in prose)))
            out.append("")
            prose.clear()
        if pre:
            out.extend(["```text", *pre, "```", ""])
            pre.clear()

    for line in text.rstrip().splitlines():
        if not line.strip():
            flush()
        elif line.startswith((" ", "\t")):
            if prose:
                flush()
            pre.append(line)
        else:
            if pre:
                flush()
            prose.append(line)
    flush()
    return "\n".join(out).rstrip()


def _inline(text: str) -> str:
    """Help text as inline Markdown: `code` kept, everything else taken literally."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(part if part.startswith("`") else _escape(part) for part in parts)


def _escape(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\*_\[\]|#])", r"\\\1", text)


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# -- mkdocs hooks --------------------------------------------------------------------------------


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001  (mkdocs' hook signature)
    if page.file.src_uri != REFERENCE_PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{REFERENCE_PAGE} lost its {MARKER!r}: the generated reference has nowhere to go")
    from swarm_tui.cli.main import build_parser

    return markdown.replace(MARKER, reference_markdown(build_parser()))


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, "assets/console.svg", abs_src_path=str(SCREENSHOT)))
    return files
