"""Where the CLI finds the API and its key: options, then the environment, then a config file.

    CARDHOUR_URL       the server (default http://127.0.0.1:8000, where `make run` serves)
    CARDHOUR_API_KEY   an organization's API key (`ch_...`)
    CARDHOUR_CONFIG    the config file (default ~/.config/cardhour/config.toml, or
                       $XDG_CONFIG_HOME/cardhour/config.toml)

The config file is TOML with the same two settings:

    url = "https://cardhour.example.com"
    api_key = "ch_..."
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8000"


class ConfigError(Exception):
    """The settings cannot be read, or a needed one is missing."""


def default_config_path() -> Path:
    """~/.config/cardhour/config.toml, under XDG_CONFIG_HOME when it is set."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cardhour" / "config.toml"


@dataclass(frozen=True)
class Settings:
    """The server's base URL (without /api/v1) and the API key, if any."""

    url: str
    api_key: str | None
    source: str  # where the key came from, for error messages

    @property
    def api_base(self) -> str:
        return f"{self.url.rstrip('/')}/api/v1"


def _read_file(path: Path, *, explicit: bool) -> dict[str, str]:
    if not path.exists():
        if explicit:
            raise ConfigError(f"The config file {path} does not exist.")
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"The config file {path} cannot be read: {error}") from error
    unknown = sorted(set(data) - {"url", "api_key"})
    if unknown:
        raise ConfigError(f"The config file {path} has unknown settings: {', '.join(unknown)}.")
    for name, value in data.items():
        if not isinstance(value, str):
            raise ConfigError(f"In {path}, `{name}` must be a string.")
    return dict(data)


def load_settings(
    *, url: str | None = None, api_key: str | None = None, config: Path | None = None
) -> Settings:
    """Options win over the environment, which wins over the config file."""
    explicit = config is not None or bool(os.environ.get("CARDHOUR_CONFIG"))
    path = config or Path(os.environ.get("CARDHOUR_CONFIG") or default_config_path())
    from_file = _read_file(path.expanduser(), explicit=explicit)
    key_sources = [
        (api_key, "--api-key"),
        (os.environ.get("CARDHOUR_API_KEY"), "CARDHOUR_API_KEY"),
        (from_file.get("api_key"), str(path)),
    ]
    key, source = next(((k, s) for k, s in key_sources if k), (None, "nowhere"))
    base = url or os.environ.get("CARDHOUR_URL") or from_file.get("url") or DEFAULT_URL
    if not base.startswith(("http://", "https://")):
        raise ConfigError(f"The server URL must start with http:// or https://, not {base!r}.")
    return Settings(url=base.rstrip("/"), api_key=key, source=source)
