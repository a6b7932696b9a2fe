"""The user's config file: provider profiles and display preferences.

Read with `tomllib`, written with `tomli-w`. Location: `$SWARM_TUI_CONFIG`, else
`$XDG_CONFIG_HOME/swarm-tui/config.toml` (default `~/.config/swarm-tui/config.toml`).
Two profiles are built in: `sim` (the embedded simulator, the default) and `openai`
(`OPENAI_BASE_URL` or api.openai.com, key in `OPENAI_API_KEY`, as the SDK does).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from .errors import InputError
from .providers.profile import SIM_PROFILE_NAME, ProviderProfile


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
            name="openai", base_url=os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
            model="gpt-4.1-mini", api_key_env="OPENAI_API_KEY",
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
    """The TUI's keymap overrides, `[keys] binding-id = "key"` (ids: `?` in the TUI lists them)."""
    billing: dict[str, Any] = field(default_factory=dict)
    """What a provider bills per $1 in a local currency, `[billing.<provider>] CNY = 1.0` (see currency)."""

    def profile(self, name: str) -> ProviderProfile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.profiles))
            raise InputError.single(self.path, "provider", f"no profile named {name!r} (known: {known})") from None

    def save_profile(self, profile: ProviderProfile) -> None:
        """Add or replace one profile in the file, keeping everything else the user wrote."""
        doc = _read(self.path) if self.path.exists() else {}
        doc.setdefault("providers", {})[profile.name] = profile.to_toml()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".toml.tmp")
        tmp.write_text(tomli_w.dumps(doc), encoding="utf-8")
        tmp.replace(self.path)
        self.profiles[profile.name] = profile


def load_config(path: Path | None = None) -> Config:
    path = path or config_path()
    config = Config(path=path)
    if not path.exists():
        return config
    doc = _read(path)
    for name, table in (doc.get("providers") or {}).items():
        if not isinstance(table, dict):
            raise InputError.single(path, f"providers.{name}", "must be a table")
        config.profiles[name] = ProviderProfile.from_toml(name, table, source=str(path))
    defaults = doc.get("defaults") or {}
    config.default_provider = defaults.get("provider", config.default_provider)
    config.theme = defaults.get("theme", config.theme)
    config.currency = defaults.get("currency", config.currency)
    config.currency_rate = defaults.get("currency_rate", config.currency_rate)
    config.prices = doc.get("prices") or {}
    keys = doc.get("keys") or {}
    if not isinstance(keys, dict) or not all(isinstance(v, str) and v for v in keys.values()):
        raise InputError.single(path, "keys", 'must be a table of binding-id = "key" (e.g. retry-failed = "ctrl+r")')
    config.keys = dict(keys)
    config.billing = doc.get("billing") or {}
    _check_money(config)
    if config.default_provider not in config.profiles:
        raise InputError.single(path, "defaults.provider", f"no profile named {config.default_provider!r}")
    return config


def _check_money(config: Config) -> None:
    """Bad currency or price settings fail here (exit 2, naming the field), not mid-run."""
    from .currency import resolve_currency
    from .pricing import PriceTable

    if not isinstance(config.currency, str):
        raise InputError.single(config.path, "defaults.currency", f"must be a currency code such as \"CNY\", not {config.currency!r}")
    resolve_currency(config.currency, config.currency_rate, source=str(config.path),
                     code_field="defaults.currency", rate_field="defaults.currency_rate")
    if not isinstance(config.prices, dict):
        raise InputError.single(config.path, "prices", 'must be tables: [prices."provider/model"]')
    if not isinstance(config.billing, dict):
        raise InputError.single(config.path, "billing", "must be tables: [billing.<provider>] CNY = 1.0")
    PriceTable.builtin(config.prices, billing=config.billing, source=config.path)


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError.single(path, "toml", str(exc)) from None
