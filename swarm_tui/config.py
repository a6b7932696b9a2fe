"""The user's config file: provider profiles and display preferences.

Read with `tomllib`, written with `tomli-w`. Location: `$SWARM_TUI_CONFIG`, else
`$XDG_CONFIG_HOME/swarm-tui/config.toml` (default `~/.config/swarm-tui/config.toml`).
Two profiles are built in: `sim` (the embedded simulator, the default) and `openai`
(`OPENAI_BASE_URL` or api.openai.com, key in `OPENAI_API_KEY`, as the SDK does).

The file is private whatever the umask: written 0600 (through a temp file in the same
directory and `os.replace`, so a crash never leaves half a file), in a directory made 0700.
A profile whose `api_key_env` holds a key rather than a name fails to load (exit 2, naming the
file and field, never the value), so nothing prints a key a user once saved by mistake.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from swarm_tui.core.errors import InputError
from swarm_tui.providers.profile import SIM_PROFILE_NAME, ProviderProfile
from swarm_tui.providers.routes import route_table
from swarm_tui.util.textfile import TomlLines, read_text_file, split_lines

if TYPE_CHECKING:
    from swarm_tui.pricing.currency import DisplayCurrency


def config_path() -> Path:
    explicit = os.environ.get("SWARM_TUI_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "swarm-tui" / "config.toml"


def builtin_profiles() -> dict[str, ProviderProfile]:
    return {
        SIM_PROFILE_NAME: ProviderProfile(name=SIM_PROFILE_NAME),
        "openai": ProviderProfile(
            name="openai",
            base_url=os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
            model="gpt-4.1-mini",
            api_key_env="OPENAI_API_KEY",
        ),
    }


@dataclass
class Config:
    path: Path
    profiles: dict[str, ProviderProfile] = field(default_factory=builtin_profiles)
    default_provider: str = SIM_PROFILE_NAME
    theme: str = "swarm-dark"
    currency: str = "CNY"
    currency_rate: float | None = None
    prices: dict[str, Any] = field(default_factory=dict)
    """User price overrides, `[prices."provider/model"]` tables (see pricing)."""
    keys: dict[str, str] = field(default_factory=dict)
    """The TUI's keymap overrides, `[keys] binding-id = "key"` (`?` in the TUI lists the ids)."""
    billing: dict[str, Any] = field(default_factory=dict)
    """What a provider bills per $1 in a local currency, `[billing.<provider>] CNY = 1.0` (see currency)."""
    routes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`[routes.NAME]`: several profiles behind one run (`routes.route_table`), used as `--provider NAME`."""
    otel: dict[str, Any] = field(default_factory=dict)
    """`[otel]`: `enabled` (every run and resume exports its spans live, as `--otel`), `content`
    (as `--otel-content`), `endpoint` (the collector's OTLP/HTTP base URL; default: the
    `OTEL_EXPORTER_OTLP_*` variables)."""

    def profile(self, name: str) -> ProviderProfile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.profiles))
            raise InputError.single(self.path, "provider", f"no profile named {name!r} (known: {known})") from None

    def save_profile(self, profile: ProviderProfile) -> None:
        """Add or replace one profile in the file, keeping everything else the user wrote.

        A profile with a problem (a key where an env var's name belongs, a URL with
        credentials...) is refused before the file is touched.
        """
        problem = profile.problem()
        if problem:
            raise InputError.single(self.path, f"providers.{profile.name}.{problem[0]}", problem[1])
        doc = _read(self.path) if self.path.exists() else {}
        doc.setdefault("providers", {})[profile.name] = profile.to_toml()
        write_private(self.path, tomli_w.dumps(doc))
        self.profiles[profile.name] = profile


FILE_MODE = 0o600
DIR_MODE = 0o700
OWN_DIR_NAME = "swarm-tui"
"""The default config directory's name: an existing one is ours to make private."""


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, the file 0600 and a directory it needed 0700.

    The temp file is created 0600 (`O_EXCL`, so never someone else's file or symlink) in the
    target's directory, so `os.replace` is atomic; it is removed if anything fails.
    """
    target = Path(os.path.realpath(path))  # a symlinked config (dotfiles) is written through
    _private_dir(target.parent)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, FILE_MODE)
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, FILE_MODE)  # the umask may have taken bits away; never adds any
            data = text.encode("utf-8")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename durable; not every filesystem allows it
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _private_dir(directory: Path) -> None:
    """Create `directory` (and missing parents) 0700; make an existing `swarm-tui` dir 0700.

    A directory the user pointed `$SWARM_TUI_CONFIG` into (their home, /tmp...) is left as it
    is: the file itself is 0600 either way.
    """
    missing = []
    probe = directory
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    directory.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    for created in missing:
        os.chmod(created, DIR_MODE)
    if not missing and directory.name == OWN_DIR_NAME and hasattr(os, "getuid"):
        info = directory.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            os.chmod(directory, DIR_MODE)


def load_config(path: Path | None = None) -> Config:
    """The config file's settings; `InputError` (exit 2) naming file, line and field for a file that
    cannot be read (a directory, permission, not UTF-8, not TOML) or holds a value of the wrong type."""
    path = path or config_path()
    config = Config(path=path)
    if not path.exists() and not path.is_symlink():
        return config
    text = read_text_file(path, "config")
    doc = _parse(path, text)
    try:
        _apply(config, doc)
    except InputError as exc:  # a problem found in the parsed document: name its line
        lines = TomlLines(split_lines(text))
        exc.problems = [
            replace(p, line=lines.line_of(p.field)) if p.line is None and p.source == str(path) else p
            for p in exc.problems
        ]
        raise
    return config


def _apply(config: Config, doc: dict[str, Any]) -> None:
    path = config.path
    providers = _table(path, doc, "providers", "tables: [providers.NAME]")
    for name, table in providers.items():
        if not isinstance(table, dict):
            raise InputError.single(path, f"providers.{name}", "must be a table")
        _check_profile_types(path, name, table)
        config.profiles[name] = ProviderProfile.from_toml(name, table, source=str(path))
    for name, table in _table(path, doc, "routes", "tables: [routes.NAME]").items():
        if name in config.profiles:
            raise InputError.single(path, f"routes.{name}", "a profile has this name: name the route otherwise")
        config.routes[name] = route_table(path, name, table, config.profiles)
    defaults = _table(path, doc, "defaults", "a table: [defaults]")
    for key in ("provider", "theme", "currency"):
        value = defaults.get(key)
        if value is not None and not isinstance(value, str):
            raise InputError.single(path, f"defaults.{key}", f"must be a string, not {_type_name(value)}")
    config.default_provider = defaults.get("provider", config.default_provider)
    config.theme = defaults.get("theme", config.theme)
    config.currency = defaults.get("currency", config.currency)
    config.currency_rate = defaults.get("currency_rate", config.currency_rate)
    config.prices = doc.get("prices") or {}
    config.keys = keymap_of(path, doc.get("keys") or {})
    config.billing = doc.get("billing") or {}
    config.otel = _otel_table(path, _table(path, doc, "otel", "a table: [otel]"))
    _check_money(config)
    if config.default_provider not in config.profiles:
        raise InputError.single(path, "defaults.provider", f"no profile named {config.default_provider!r}")


def _table(path: Path, doc: dict[str, Any], key: str, what: str) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError.single(path, key, f"must be {what}, not {_type_name(value)}")
    return value


OTEL_KEYS = {"enabled": bool, "content": bool, "endpoint": str}


def _otel_table(path: Path, table: dict[str, Any]) -> dict[str, Any]:
    for key, value in table.items():
        kind = OTEL_KEYS.get(key)
        if kind is None:
            raise InputError.single(path, f"otel.{key}", f"unknown setting (known: {', '.join(sorted(OTEL_KEYS))})")
        if not isinstance(value, kind):
            raise InputError.single(path, f"otel.{key}", f"must be a {kind.__name__}, not {_type_name(value)}")
    endpoint = table.get("endpoint")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise InputError.single(path, "otel.endpoint", f"must be an http(s) URL, not {endpoint!r}")
    return dict(table)


_FIELD_TYPES = {"str": (str,), "int": (int,), "float": (int, float)}


def _check_profile_types(path: Path, name: str, table: dict[str, Any]) -> None:
    """Each setting of a profile has its field's type (a table or a list where a string or a number
    belongs fails here, naming it, not later in a request); what the values may be is
    `ProviderProfile.problem`'s to say. A value is named by its type only: it may be a key."""
    for field_ in fields(ProviderProfile):
        value = table.get(field_.name)
        if value is None:
            continue
        kinds = [t for part in str(field_.type).split("|") for t in _FIELD_TYPES.get(part.strip(), ())]
        if kinds and (isinstance(value, bool) or not isinstance(value, tuple(kinds))):
            expected = " or ".join(part.strip() for part in str(field_.type).split("|") if part.strip() != "None")
            wanted = {"str": "a string", "int": "an integer", "float": "a number"}.get(expected, expected)
            raise InputError.single(
                path, f"providers.{name}.{field_.name}", f"must be {wanted}, not {_type_name(value)}"
            )


def _type_name(value: Any) -> str:
    return {
        dict: "a table",
        list: "a list",
        bool: "a boolean",
        str: "a string",
        int: "an integer",
        float: "a number",
    }.get(type(value), type(value).__name__)


def keymap_of(path: Path, table: Any, prefix: str = "keys") -> dict[str, str]:
    """`[keys]` as binding id -> keys. A dotted id written bare (`grid.open = "o"`) is a nested
    table in TOML, so `[keys.grid]` and `grid.open` both mean the id `grid.open`; a list of keys
    means each of them (`["o", "enter"]` is `"o,enter"`). Which ids exist is the TUI's to say."""
    if not isinstance(table, dict):
        raise InputError.single(path, prefix, 'must be a table of binding-id = "key", e.g. app.retry_failed = "ctrl+r"')
    keys: dict[str, str] = {}
    for name, value in table.items():
        field_name = f"{prefix}.{name}"
        if isinstance(value, dict):
            keys.update({f"{name}.{k}": v for k, v in keymap_of(path, value, field_name).items()})
        elif isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
            keys[name] = ",".join(v.strip() for v in value)
        elif isinstance(value, str) and value.strip():
            keys[name] = value.strip()
        else:
            raise InputError.single(path, field_name, 'must be a key, e.g. "ctrl+r", or a list of keys')
    return keys


def configured_currency(*, provider: str | None = None, prices: dict[str, Any] | None = None) -> DisplayCurrency:
    """`display_currency` of the user's config file (with `prices` instead of the config's own
    overrides, e.g. those a run stored); USD when the file cannot be read. A run chooses it once,
    when it opens, and passes it down: a summary written at the end of a run must not fail over
    a display preference, nor export differently because the config changed meanwhile."""
    from swarm_tui.pricing import PriceTable
    from swarm_tui.pricing.currency import USD, from_config

    try:
        config = load_config()
        table = PriceTable.builtin(
            config.prices if prices is None else prices, billing=config.billing, source=config.path
        )
        return from_config(config, provider=provider, table=table)
    except (InputError, OSError, ValueError):
        return USD


def _check_money(config: Config) -> None:
    """Bad currency or price settings fail here (exit 2, naming the field), not mid-run."""
    from swarm_tui.pricing import PriceTable
    from swarm_tui.pricing.currency import resolve_currency

    if not isinstance(config.currency, str):
        raise InputError.single(
            config.path, "defaults.currency", f'must be a currency code such as "CNY", not {config.currency!r}'
        )
    resolve_currency(
        config.currency,
        config.currency_rate,
        source=str(config.path),
        code_field="defaults.currency",
        rate_field="defaults.currency_rate",
    )
    if not isinstance(config.prices, dict):
        raise InputError.single(config.path, "prices", 'must be tables: [prices."provider/model"]')
    if not isinstance(config.billing, dict):
        raise InputError.single(config.path, "billing", "must be tables: [billing.<provider>] CNY = 1.0")
    PriceTable.builtin(config.prices, billing=config.billing, source=config.path)


def _read(path: Path) -> dict[str, Any]:
    return _parse(path, read_text_file(path, "config"))


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError.single(path, "toml", message, line=int(match.group(1)) if match else None) from None
