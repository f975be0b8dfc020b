"""Read YAML configuration files safely, expanding ``${VAR}`` and ``${VAR:-default}``.

Expansion happens in string scalars after parsing (never in keys), so a value
from the environment can't change the document's structure. A reference to an
unset variable without a default is an error naming the file and the variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pgshovel.errors import ConfigurationError

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand(value: Any, source: str, environ: Mapping[str, str] | None = None) -> Any:
    """Return ``value`` with environment references expanded in every string scalar."""
    env = os.environ if environ is None else environ
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise ConfigurationError(
                f"{source}: environment variable {name!r} is not set and has no default "
                f"(write ${{{name}:-default}} to give one)"
            )

        return _REFERENCE.sub(substitute, value)
    if isinstance(value, list):
        return [expand(item, source, env) for item in value]
    if isinstance(value, dict):
        return {key: expand(item, source, env) for key, item in value.items()}
    return value


def load_yaml(path: Path | str, environ: Mapping[str, str] | None = None) -> Any:
    """Parse a YAML file with the safe loader and expand environment references."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigurationError(f"{path}: cannot read: {error.strerror}") from error
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{path}: invalid YAML: {error}") from error
    return expand(document, str(path), environ)
