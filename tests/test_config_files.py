"""The config file is private: 0600 in a 0700 directory whatever the umask, written atomically,
and a profile that would store a key (or a URL with credentials) is never written."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from swarm_tui.config import Config, load_config
from swarm_tui.core.errors import InputError
from swarm_tui.providers.profile import ProviderProfile

from tests.conftest import run_cli

KEY = "sk-proj-abcDEF0123456789ghiJKL0123456789"
RELAY = ProviderProfile(name="relay", base_url="https://api.example.com/v1", model="kimi-k2.5", api_key_env="RELAY_KEY")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask():
    """The most permissive umask a user could have: nothing the config writes may rely on it."""
    old = os.umask(0)
    yield
    os.umask(old)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != "config.toml")


def test_a_saved_profile_is_0600_in_a_0700_directory_whatever_the_umask(tmp_path, loose_umask):
    path = tmp_path / "xdg" / "swarm-tui" / "config.toml"
    Config(path=path).save_profile(RELAY)
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert mode(path.parent.parent) == 0o700, "a directory the save had to create is private too"
    assert leftovers(path.parent) == []
    assert load_config(path).profile("relay") == RELAY


def test_saving_over_a_world_readable_config_makes_it_private_and_keeps_what_the_user_wrote(tmp_path, loose_umask):
    directory = tmp_path / "swarm-tui"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    path = directory / "config.toml"
    path.write_text('[defaults]\ntheme = "swarm-light"\n\n[providers.old]\nbase_url = "http://127.0.0.1:9/v1"\n')
    os.chmod(path, 0o644)
    Config(path=path).save_profile(RELAY)
    assert (mode(path), mode(directory)) == (0o600, 0o700)
    config = load_config(path)
    assert config.theme == "swarm-light" and set(config.profiles) >= {"old", "relay"}
    assert leftovers(directory) == []


def test_a_directory_the_user_chose_is_left_as_it_is_but_the_file_is_private(tmp_path, loose_umask):
    os.chmod(tmp_path, 0o755)
    path = tmp_path / "my-config.toml"
    Config(path=path).save_profile(RELAY)
    assert (mode(path), mode(tmp_path)) == (0o600, 0o755)


def test_a_symlinked_config_is_written_through_its_link(tmp_path):
    real = tmp_path / "dotfiles" / "swarm.toml"
    real.parent.mkdir()
    real.write_text('[defaults]\ntheme = "swarm-light"\n')
    link_dir = tmp_path / "swarm-tui"
    link_dir.mkdir()
    (link_dir / "config.toml").symlink_to(real)
    Config(path=link_dir / "config.toml").save_profile(RELAY)
    assert (link_dir / "config.toml").is_symlink()
    assert mode(real) == 0o600 and "relay" in load_config(link_dir / "config.toml").profiles


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch, failing):
    path = tmp_path / "swarm-tui" / "config.toml"
    Config(path=path).save_profile(RELAY)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, boom)
    with pytest.raises(OSError, match="No space"):
        Config(path=path).save_profile(ProviderProfile(name="other", base_url="https://api.other.com/v1"))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert leftovers(path.parent) == []


@pytest.mark.parametrize(
    "profile, field",
    [
        (ProviderProfile(name="relay", base_url="https://api.example.com/v1", api_key_env=KEY), "api_key_env"),
        (ProviderProfile(name="relay", base_url=f"https://me:{KEY}@api.example.com/v1"), "base_url"),
        (
            ProviderProfile(
                name="relay",
                base_url="https://api.example.com/v1",
                fallback_base_url="https://b.example.com/v1",
                fallback_api_key_env=KEY,
            ),
            "fallback_api_key_env",
        ),
        (
            ProviderProfile(
                name="relay", base_url="https://api.example.com/v1", fallback_base_url=f"https://{KEY}@b.example.com/v1"
            ),
            "fallback_base_url",
        ),
    ],
    ids=["api_key_env", "base_url", "fallback_api_key_env", "fallback_base_url"],
)
def test_a_profile_holding_a_key_is_never_written(tmp_path, profile, field):
    path = tmp_path / "swarm-tui" / "config.toml"
    with pytest.raises(InputError) as caught:
        Config(path=path).save_profile(profile)
    assert f"providers.relay.{field}" in str(caught.value) and KEY not in str(caught.value)
    assert not path.exists()


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "RELAY_KEY", "moonshot_api_key", "HF_TOKEN", "_K2", "X"])
def test_ordinary_env_var_names_are_accepted(name):
    assert ProviderProfile(name="p", base_url="https://api.example.com/v1", api_key_env=name).problem() is None


def test_a_profile_saved_with_a_good_name_is_listed_with_its_name(tmp_path):
    path = tmp_path / "config" / "config.toml"
    Config(path=path).save_profile(RELAY)
    result = run_cli("providers", "list", env={"SWARM_TUI_CONFIG": str(path)})
    assert result.returncode == 0, result.stderr
    assert "relay: https://api.example.com/v1  model kimi-k2.5  key RELAY_KEY: missing" in result.stdout
