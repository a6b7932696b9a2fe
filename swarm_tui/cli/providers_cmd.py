"""`swarm-tui providers [list|test NAME]`: the provider profiles, and one tiny call through one."""

from __future__ import annotations

import argparse
import asyncio

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.run.exit_codes import EXIT_FAILED, EXIT_OK

PROVIDERS_DESCRIPTION = """\
The provider profiles: the built-in `sim` (the embedded simulator, no key) and `openai`
(OPENAI_BASE_URL or api.openai.com, key in OPENAI_API_KEY), and the [providers.NAME]
tables of the config file ($SWARM_TUI_CONFIG, else ~/.config/swarm-tui/config.toml).
  list       each profile's URL, model, key variable (set or missing), headers and route;
             a config file that does not parse exits 2 naming file, line and field
  test NAME  one tiny call (max_tokens 1) through the profile, with its latency: exit 0 OK,
             exit 1 FAILED with the reason (no network, a refused key, an unknown model)
"""

PROVIDERS_EPILOG = """\
a profile, in the config file:
  [providers.deepseek]
  base_url = "https://api.deepseek.com/v1"
  model = "deepseek-chat"
  api_key_env = "DEEPSEEK_API_KEY"    # the env var's name, never the key

examples:
  swarm-tui providers                 the same as `providers list`
  swarm-tui providers test sim        a call to the simulator (always works)
  swarm-tui providers test deepseek   a call to the real endpoint
"""


def add_parser(commands) -> None:
    providers = commands.add_parser(
        "providers",
        help="list provider profiles, or test one",
        description=PROVIDERS_DESCRIPTION,
        epilog=PROVIDERS_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    providers.add_argument(
        "action",
        nargs="?",
        choices=["list", "test"],
        default="list",
        help="list: every profile and whether its key is set (default); test: one tiny call through NAME",
    )
    providers.add_argument("name", nargs="?", help="the profile to test")
    providers.set_defaults(handler=cmd_providers)


def cmd_providers(args: argparse.Namespace) -> int:
    from swarm_tui.config import load_config
    from swarm_tui.core.errors import InputError

    config = load_config()
    if args.action == "list":
        from swarm_tui.providers.listing import profile_lines

        print(f"config: {config.path}{'' if config.path.exists() else ' (not created yet)'}")
        for name, profile in sorted(config.profiles.items()):
            print("\n".join(profile_lines(name, profile, default=name == config.default_provider)))
        return EXIT_OK
    if not args.name:
        raise InputError.single("providers test", "name", "which profile? e.g. `swarm-tui providers test sim`")
    from swarm_tui.providers.probe import probe_profile

    result = asyncio.run(probe_profile(config.profile(args.name)))
    print(result.describe())
    return EXIT_OK if result.ok else EXIT_FAILED
