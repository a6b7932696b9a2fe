"""The `swarm-tui` command line: `main` runs it, `build_parser` builds its parser (the docs' command
reference is generated from it). Each command is a module of its own (`<command>_cmd.py`) that adds
its parser and handles it, importing what its handler needs only when it runs: building the parser
(`--version`, `--help`) loads what the options' choices come from, not what the commands do. A
command line that names its command builds that command's parser alone (`build_parser(only=...)`):
`swarm-tui ctl RUN status` loads the control command's few modules, not the engine and its SDK that
`run`'s options name, so a script's status poll answers in a fraction of a second.

Every failure a user can meet ends in one line and its exit code (`run.exit_codes`), never a
traceback: bad input 2 (nothing sent), Ctrl-C at any moment 130.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from swarm_tui import __version__
from swarm_tui.cli.help import HELP_FORMAT, JOB_FORMATS
from swarm_tui.core.errors import InputError
from swarm_tui.run.exit_codes import EXIT_ABORTED, EXIT_BAD_INPUT
from swarm_tui.util import secrets
from swarm_tui.util.interrupts import stop_if_interrupted

COMMANDS = {
    "run": "run_cmd",
    "resume": "resume_cmd",
    "attach": "attach_cmd",
    "ctl": "ctl_cmd",
    "runs": "runs_cmd",
    "mcp": "mcp_cmd",
    "sim": "sim_cmd",
    "providers": "providers_cmd",
    "estimate": "estimate_cmd",
    "shadow": "shadow_cmd",
    "cache": "cache_cmd",
    "export": "export_cmd",
    "export-traces": "traces_cmd",
    "replay": "replay_cmd",
    "report": "report_cmd",
}
"""Each command's name and its module in `swarm_tui.cli`, in the order `--help` lists them."""


def main(argv: list[str] | None = None) -> int:
    """Every failure a user can meet ends in one line and its exit code, never a traceback: bad
    input 2 (nothing sent), Ctrl-C at any moment 130 (`swarm_tui.__main__` covers the imports)."""
    from swarm_tui.journal import IncompleteRunError

    secrets.install_log_masking()
    given = command_line(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(only=given[0] if given[0] in COMMANDS else None)
        args = parser.parse_args(given)
        stop_if_interrupted()  # a Ctrl-C lost while the command's modules loaded: it does not start
        return args.handler(args)
    except (InputError, FileNotFoundError, FileExistsError, IncompleteRunError) as exc:
        print(f"swarm-tui: {secrets.mask(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C before the run's own handler was installed (or after it ended)
        return interrupted()


def command_line(given: list[str]) -> list[str]:
    """The command line to parse: one that names no command (empty, or starting with an option
    other than `--help` and `--version`) is the demo's, `run`'s without a job (`swarm-tui` starts
    the console on it, `swarm-tui --headless` runs it headless)."""
    if not given or (given[0].startswith("-") and given[0] not in ("-h", "--help", "--version")):
        return ["run", *given]
    return given


def interrupted() -> int:
    """Ctrl-C outside the run's own handler: one line, exit 130 (a second Ctrl-C meanwhile is ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("\nswarm-tui: interrupted", file=sys.stderr)
    return EXIT_ABORTED


MAIN_EPILOG = f"""\
{JOB_FORMATS}
examples:
  swarm-tui                                   the console on the 100-agent demo (simulator)
  swarm-tui run job.jsonl --headless          a job, no UI: progress on stderr
  swarm-tui run job.toml --provider openai    on a real provider (key in OPENAI_API_KEY)
  swarm-tui attach runs/NAME                  watch and steer a run from another terminal
  swarm-tui COMMAND --help                    a command's options and examples

exit codes: 0 every task succeeded; 1 the run ended with failed or unfinished tasks;
  2 bad input or configuration (nothing was sent); 130 aborted (resumable)
"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; `only`: with that command's parser alone (a command line that names
    it parses the same, and loads nothing the other commands' options need)."""
    parser = Parser(
        prog="swarm-tui",
        description="Run, watch and steer a swarm of LLM sub-agents against any OpenAI-compatible endpoint.\n"
        "Without a command: the console on the 100-agent demo, on the built-in simulator (no key, no\n"
        "network); run's options apply to it (swarm-tui --headless).\n",
        epilog=MAIN_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    parser.add_argument("--version", action="version", version=f"swarm-tui {__version__}")
    # shown here for the bare command; a command line that starts with it is run's (`command_line`)
    parser.add_argument("--theme", default=argparse.SUPPRESS, help="TUI theme name or a theme file (bare swarm-tui)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"swarm_tui.cli.{module}").add_parser(commands)
    return parser


class Parser(argparse.ArgumentParser):
    """Every parser of the command line (its commands' parsers are made of the same class): no
    abbreviated option is taken for a longer one (`--id` was once read as `--idle-timeout`)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
