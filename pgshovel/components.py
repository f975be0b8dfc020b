"""Load components named in YAML as ``path: package.module:Name`` plus ``configuration:``.

A component class is constructed with its configuration mapping as keyword
arguments, so an unknown key fails like a bad keyword: the error names the
component, the key, and the keys it takes.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from pgshovel.errors import ComponentError


def load_class(path: str, where: str) -> type[Any]:
    """Import ``package.module:Name``; ``where`` names the config key for errors."""
    if not isinstance(path, str) or path.count(":") != 1:
        raise ComponentError(f"{where}.path: expected 'package.module:Name', got {path!r}")
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ComponentError(
            f"{where}.path: cannot import module {module_name!r}: {error}"
        ) from error
    try:
        loaded = getattr(module, attribute)
    except AttributeError as error:
        raise ComponentError(
            f"{where}.path: module {module_name!r} has no {attribute!r}"
        ) from error
    if not inspect.isclass(loaded):
        raise ComponentError(f"{where}.path: {path!r} is not a class")
    return loaded


def build(section: Any, where: str, expected: type[Any]) -> Any:
    """Build a component from a ``{path, configuration}`` mapping and check its contract."""
    if not isinstance(section, Mapping):
        raise ComponentError(f"{where}: expected a mapping with 'path' and 'configuration'")
    unknown = sorted(set(section) - {"path", "configuration"})
    if unknown:
        raise ComponentError(f"{where}: unknown keys {unknown!r}; expected 'path', 'configuration'")
    if "path" not in section:
        raise ComponentError(f"{where}: missing 'path' (e.g. 'package.module:Name')")
    cls = load_class(section["path"], where)
    configuration = section.get("configuration") or {}
    if not isinstance(configuration, Mapping):
        raise ComponentError(f"{where}.configuration: expected a mapping, got {configuration!r}")
    signature = inspect.signature(cls)
    accepted = [
        name
        for name, parameter in signature.parameters.items()
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    ]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    for key in configuration:
        if not takes_any and key not in accepted:
            raise ComponentError(
                f"{where}.configuration: unknown key {key!r} for {section['path']!r}; "
                f"expected one of {accepted!r}"
            )
    try:
        signature.bind(**configuration)
    except TypeError as error:
        raise ComponentError(f"{where}.configuration: {error}") from error
    instance = cls(**configuration)
    if not isinstance(instance, expected):
        raise ComponentError(f"{where}.path: {section['path']!r} is not a {expected.__name__}")
    return instance
