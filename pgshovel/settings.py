"""Typed configuration: frozen pydantic models and one error format naming file and key.

Every configuration file (relay.yml, replication.yml, a set file) is parsed by
``pgshovel.config_files`` and validated by a ``Settings`` model: unknown keys
are refused (``extra="forbid"``), choices are ``Literal``s, numbers and
booleans may come as strings (from ``${VAR}``), and the result is frozen. A
validation failure becomes one ``ConfigurationError`` line,
``<file>: <key.path>: <what is expected>, got <value>``, naming the first
problem (and how many more there are).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from pgshovel.config_files import load_yaml
from pgshovel.errors import ConfigurationError

M = TypeVar("M", bound=BaseModel)

#: The ``ctx`` key a validator may set to extend the location of its error (see components).
SUBPATH = "subpath"


#: Types for constructor hints of components (validated by ``pgshovel.components``).
NonEmptyText = Annotated[str, Field(min_length=1)]
PositiveInt = Annotated[int, Field(ge=1)]
PositiveSeconds = Annotated[float, Field(gt=0)]


def port_number(value: Any) -> Any:
    """A TCP port (0 to 65535) as an int, also from a string; None stays None."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise PydanticCustomError(
            "pgshovel_port", "expected a port number, got {value}", {"value": repr(value)}
        )
    return value


Port = Annotated[int | None, BeforeValidator(port_number)]


class Settings(BaseModel):
    """Base of every configuration model: frozen, no unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


def key_path(location: Sequence[int | str]) -> str:
    """``("tables", 0, "name")`` as ``tables[0].name``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


_EXPECTED = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
}


def describe(error: ErrorDetails) -> tuple[str, str]:
    """The key path and the message of one pydantic error, in pgshovel's words."""
    location = list(error["loc"])
    context = error.get("ctx") or {}
    if SUBPATH in context:
        location += [part for part in str(context[SUBPATH]).split(".") if part]
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        return key_path(location), "unknown key"
    if kind == "missing":
        return key_path(location[:-1]), f"missing {location[-1]!r}"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(context.get("expected", "")))
        message = f"expected one of {choices!r}"
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<="}.get(
            kind, "<"
        )
        bound = next(iter(context.values()), "")
        message = f"must be {sign} {bound}"
    elif kind in ("string_too_short", "too_short"):
        message = "must not be empty"
    elif kind in _EXPECTED:
        message = _EXPECTED[kind]
    else:
        text = error["msg"]
        message = text[:1].lower() + text[1:]
        if message.startswith("value error, "):
            message = message[len("value error, ") :]
    if kind not in ("value_error",) and not kind.startswith("pgshovel_"):
        message += f", got {value!r}"
    return key_path(location), message


def problems(error: ValidationError) -> list[ErrorDetails]:
    """The problems of a validation failure, an unknown key first (it often explains the rest)."""
    return sorted(
        error.errors(include_url=False), key=lambda problem: problem["type"] != "extra_forbidden"
    )


def format_errors(source: str, error: ValidationError) -> str:
    """One line for a validation failure: the first problem, and how many more there are."""
    found = problems(error)
    where, message = describe(found[0])
    line = f"{source}: {where}: {message}" if where else f"{source}: {message}"
    if len(found) > 1:
        line += f" (and {len(found) - 1} more problem(s))"
    return line


def validate(model: type[M], document: Any, source: str) -> M:
    """``document`` validated as ``model``; a one-line ``ConfigurationError`` naming the key."""
    if not isinstance(document, dict):
        raise ConfigurationError(f"{source}: expected a mapping at the top level, got {document!r}")
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise ConfigurationError(format_errors(source, error)) from error


def load(model: type[M], path: Path | str) -> M:
    """Read, expand and validate a YAML configuration file as ``model``."""
    return validate(model, load_yaml(path), str(path))
