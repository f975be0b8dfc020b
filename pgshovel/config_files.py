"""Read YAML configuration files safely, expanding ``${VAR}`` and ``${VAR:-default}``.

The file must be UTF-8 (anything else is refused with the offset of the first
bad byte) and may not repeat a key in one mapping (YAML would silently keep the
last one). Expansion happens in string scalars after parsing (never in keys),
so a value from the environment can't change the document's structure; the
typed models that validate the document then read numbers and booleans from
such strings (``metrics_port: ${PORT:-9188}``). A reference to an unset
variable without a default is an error naming the file and the variable.
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


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a key repeated in one mapping."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (each key may appear once in a mapping)",
                key_node.start_mark,
            )
        seen.add(key)
    return dict(loader.construct_pairs(node, deep=True))


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


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


def read_text(path: Path) -> str:
    """A configuration file's text; a one-line error when it is unreadable or not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigurationError(f"{path}: cannot read: {error.strerror}") from error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigurationError(
            f"{path}: not UTF-8 text (byte {data[error.start]:#04x} at offset {error.start}); "
            "save the file as UTF-8"
        ) from error


def parse_yaml(text: str, source: str, environ: Mapping[str, str] | None = None) -> Any:
    """Parse YAML text with the safe loader (no repeated keys) and expand references."""
    try:
        document = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        detail = " ".join(str(error).split())
        raise ConfigurationError(f"{source}: invalid YAML: {detail}") from error
    return expand(document, source, environ)


def load_yaml(path: Path | str, environ: Mapping[str, str] | None = None) -> Any:
    """Read, parse and expand a YAML configuration file."""
    path = Path(path)
    return parse_yaml(read_text(path), str(path), environ)
