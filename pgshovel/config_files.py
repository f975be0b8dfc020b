"""Read YAML configuration files safely, expanding ``${VAR}`` and ``${VAR:-default}``.

The file must be UTF-8 (anything else is refused with the offset of the first
bad byte), may not repeat a key in one mapping (YAML would silently keep the
last one; every repetition is listed with its line) and may not expand,
through anchors and aliases (``&a`` ... ``*a``), beyond ``MAX_VALUES`` values
or into itself: a kilobyte of nested aliases would otherwise build 10^8
objects and hang the process for minutes.
Expansion happens in string scalars after parsing (never in keys), so a value
from the environment can't change the document's structure; the
typed models that validate the document then read numbers and booleans from
such strings (``metrics_port: ${PORT:-9188}``). A reference to an unset
variable without a default is an error naming the file, the key and the
variable (every such reference, one line each).
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

#: The most values (scalars, sequences, mappings, aliases counted as what they stand for) a
#: configuration document may expand to: far above any real set file or process
#: configuration, far below what takes a noticeable time to build.
MAX_VALUES = 1_000_000


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, noting every key repeated in one mapping (``duplicates``)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        #: ``line N: duplicate key 'k' ...`` for each repetition, in the order of the text
        self.duplicates: list[str] = []


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            repeated = key in seen
        except TypeError:  # an unhashable key: construct_pairs says what is wrong with it
            continue
        if repeated:
            loader.duplicates.append(
                f"line {key_node.start_mark.line + 1}: duplicate key {key!r} (each key may "
                "appear once in a mapping)"
            )
        seen.add(key)
    return dict(loader.construct_pairs(node, deep=True))


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def _location(prefix: str, key: object) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else str(key)


def _expand(
    value: Any, environ: Mapping[str, str], where: str, unset: list[tuple[str, str]]
) -> Any:
    """``value`` expanded; ``(where, name)`` noted in ``unset`` for each reference to an unset
    variable without a default."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            unset.append((where, name))
            return match.group(0)

        return _REFERENCE.sub(substitute, value)
    if isinstance(value, list):
        return [
            _expand(item, environ, _location(where, index), unset)
            for index, item in enumerate(value)
        ]
    if isinstance(value, dict):
        return {
            key: _expand(item, environ, _location(where, key), unset) for key, item in value.items()
        }
    return value


def expand(
    value: Any, source: str, environ: Mapping[str, str] | None = None, *, where: str = ""
) -> Any:
    """Return ``value`` with environment references expanded in every string scalar; a
    ``ConfigurationError`` naming every unset variable without a default (and its key, under
    ``where`` when ``value`` is part of a larger document)."""
    unset: list[tuple[str, str]] = []
    expanded = _expand(value, os.environ if environ is None else environ, where, unset)
    if unset:
        lines = []
        for key, name in unset:
            prefix = f"{source}: {key}: " if key else f"{source}: "
            lines.append(
                f"{prefix}environment variable {name!r} is not set and has no default "
                f"(write ${{{name}:-default}} to give one)"
            )
        raise ConfigurationError("\n".join(dict.fromkeys(lines)))
    return expanded


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


def _expanded_size(root: yaml.Node, source: str) -> int:
    """How many values ``root`` stands for once every alias is replaced by its node.

    An alias is the very node object its anchor names, so each distinct node is sized
    once (linear in the text, whatever it expands to).
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            raise ConfigurationError(
                f"{source}: an alias (*name) refers to a node that contains it (line "
                f"{node.start_mark.line + 1}): a configuration cannot contain itself"
            )
        open_nodes.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(item) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(key) + size(value) for key, value in node.value)
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    return size(root)


def _compose(text: str, source: str) -> Any:
    """The document of ``text``, refused before it is built when it expands too far."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        values = _expanded_size(node, source)
        if values > MAX_VALUES:
            raise ConfigurationError(
                f"{source}: the document expands to {values:,} values through its anchors and "
                f"aliases (&name, *name), more than the {MAX_VALUES:,} a configuration may "
                "hold; write the repeated parts out, or fewer of them"
            )
        document = loader.construct_document(node)
        if loader.duplicates:
            raise ConfigurationError(
                "\n".join(f"{source}: {duplicate}" for duplicate in loader.duplicates)
            )
        return document
    finally:
        loader.dispose()


def parse_yaml(text: str, source: str, environ: Mapping[str, str] | None = None) -> Any:
    """Parse YAML text with the safe loader (no repeated keys, bounded expansion) and expand
    references."""
    try:
        document = _compose(text, source)
    except yaml.YAMLError as error:
        detail = " ".join(str(error).split())
        raise ConfigurationError(f"{source}: invalid YAML: {detail}") from error
    except RecursionError as error:
        raise ConfigurationError(
            f"{source}: invalid YAML: nested too deeply for a configuration"
        ) from error
    return expand(document, source, environ)


def load_yaml(path: Path | str, environ: Mapping[str, str] | None = None) -> Any:
    """Read, parse and expand a YAML configuration file."""
    path = Path(path)
    return parse_yaml(read_text(path), str(path), environ)
