"""Loading pydantic-settings classes from a TOML file plus command-line flags; shared by
every role's CLI (defaults < TOML < environment < command line)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic_settings import (
    BaseSettings,
    CliSettingsSource,
    PydanticBaseSettingsSource,
    TomlConfigSettingsSource,
)
S = TypeVar("S", bound=BaseSettings)


def load_settings(settings_cls: type[S], toml_path: str | Path | None, argv: list[str]) -> S:
    """Build `settings_cls` from defaults < TOML file < environment < command line."""
    toml = Path(toml_path) if toml_path else None
    if toml is not None and not toml.is_file():
        raise FileNotFoundError(f"config file {toml} does not exist")

    class _FromToml(settings_cls):  # type: ignore[valid-type, misc]
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            sources: tuple[PydanticBaseSettingsSource, ...] = (init_settings, env_settings)
            if toml is not None:
                sources += (TomlConfigSettingsSource(settings_cls, toml_file=toml),)
            return sources

    cli = CliSettingsSource(_FromToml, cli_parse_args=argv, cli_prog_name=settings_cls.__name__.lower())
    loaded = _FromToml(_cli_settings_source=cli)
    return settings_cls.model_validate(loaded.model_dump())


def describe_error(exc: BaseException) -> str:
    """One line for a CLI: the first field error of a ValidationError, else the message."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        return f"invalid setting {where}: {first['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
