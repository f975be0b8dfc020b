"""Typed configuration: frozen pydantic models and one error format naming file and key.

Every configuration file (relay.yml, replication.yml, a set file) is parsed by
``pgshovel.config_files`` and validated by a ``Settings`` model: unknown keys
are refused (``extra="forbid"``), choices are ``Literal``s, numbers and
booleans may come as strings (from ``${VAR}``), and the result is frozen. A
validation failure becomes one ``ConfigurationError`` listing every problem,
one line each in the order of the file, ``<file>: <key.path>: <what is
expected>, got <value>``; an unknown key names the closest key the model (or
the nested section it is in) accepts: ``tick_intervall: unknown key; did you
mean 'tick_interval'?``.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union

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


def _arms(annotation: Any) -> list[Any]:
    """The types an annotation allows: ``X | None`` and ``Annotated[X, ...]`` unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _arms(typing.get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [arm for argument in typing.get_args(annotation) for arm in _arms(argument)]
    return [annotation]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _field_annotation(model: type[BaseModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field.annotation
    return None


def _step(annotation: Any, part: int | str) -> Any:
    """The annotation of ``part`` (a key or an index) inside a value of ``annotation``."""
    for arm in _arms(annotation):
        if _is_model(arm) and isinstance(part, str):
            found = _field_annotation(arm, part)
            if found is not None:
                return found
        origin = typing.get_origin(arm)
        arguments = typing.get_args(arm)
        if not arguments or not isinstance(origin, type):
            continue
        if isinstance(part, int) and issubclass(origin, Sequence) and not issubclass(origin, str):
            return arguments[0]
        if isinstance(part, str) and issubclass(origin, Mapping):
            return arguments[-1]
    return None


def accepted_keys(model: type[BaseModel], location: Sequence[int | str]) -> list[str]:
    """The keys the mapping at ``location`` of a ``model`` document accepts (aliases as
    written in files); empty when the location does not lead to a model."""
    annotation: Any = model
    for part in location:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    models = [arm for arm in _arms(annotation) if _is_model(arm)]
    if not models:
        return []
    return [field.alias or name for name, field in models[0].model_fields.items()]


def unknown_key(key: object, accepted: Sequence[str]) -> str:
    """``unknown key``, with the accepted key it most likely stands for, or those there are."""
    close = difflib.get_close_matches(str(key), list(accepted), n=1)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    if accepted:
        return f"unknown key; expected one of {sorted(accepted)!r}"
    return "unknown key"


def explain(
    error: ErrorDetails, model: type[BaseModel] | None = None
) -> tuple[list[int | str], str]:
    """The location and the message of one pydantic error, in pgshovel's words; an unknown
    key suggests what ``model`` accepts there."""
    location = list(error["loc"])
    context = error.get("ctx") or {}
    if SUBPATH in context:
        location += [part for part in str(context[SUBPATH]).split(".") if part]
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        accepted = accepted_keys(model, location[:-1]) if model is not None else []
        return location, unknown_key(location[-1], accepted)
    if kind == "missing":
        return location[:-1], f"missing {location[-1]!r}"
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
    return location, message


def describe(error: ErrorDetails, model: type[BaseModel] | None = None) -> tuple[str, str]:
    """The key path and the message of one pydantic error, in pgshovel's words."""
    location, message = explain(error, model)
    return key_path(location), message


def problems(error: ValidationError) -> list[ErrorDetails]:
    """The problems of a validation failure, unknown keys first (they often explain the rest)."""
    return sorted(
        error.errors(include_url=False), key=lambda problem: problem["type"] != "extra_forbidden"
    )


def document_position(document: Any, location: Sequence[int | str]) -> tuple[int, ...]:
    """Where ``location`` is in ``document``, as indexes of keys and items in the order of the
    text; a key the document lacks (a missing one) after those it has."""
    position: list[int] = []
    node = document
    for part in location:
        index = 0
        if isinstance(node, dict):
            keys = [str(key) for key in node]
            index = keys.index(str(part)) if str(part) in keys else len(keys)
            node = list(node.values())[index] if index < len(keys) else None
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            index, node = part, node[part]
        else:
            node = None
        position.append(index)
    return tuple(position)


def problem_lines(
    source: str, error: ValidationError, model: type[BaseModel], document: Any = None
) -> list[str]:
    """One line per problem of a validation failure, ``<source>: <key>: <message>``, in the
    order of the document's text."""
    found = sorted(problems(error), key=lambda problem: document_position(document, problem["loc"]))
    lines: list[str] = []
    for location, message in (explain(problem, model) for problem in found):
        where = key_path(location)
        line = f"{source}: {where}: {message}" if where else f"{source}: {message}"
        if line not in lines:
            lines.append(line)
    return lines


def format_errors(
    source: str, error: ValidationError, model: type[BaseModel], document: Any = None
) -> str:
    """Every problem of a validation failure, one line each."""
    return "\n".join(problem_lines(source, error, model, document))


def validate(model: type[M], document: Any, source: str) -> M:
    """``document`` validated as ``model``; a ``ConfigurationError`` listing every problem, one
    line each naming the file and the key."""
    if not isinstance(document, dict):
        raise ConfigurationError(f"{source}: expected a mapping at the top level, got {document!r}")
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise ConfigurationError(format_errors(source, error, model, document)) from error


def load(model: type[M], path: Path | str) -> M:
    """Read, expand and validate a YAML configuration file as ``model``."""
    return validate(model, load_yaml(path), str(path))
