"""Components named in YAML as ``path: package.module:Name`` plus ``configuration:``.

Loading one is checked in this order, and nothing of the component is called
before every check passed:

1. the path has the form ``package.module:Name`` and names a class (importing
   its module is the only code run);
2. the class provides every method and property of its contract (a
   ``typing.Protocol`` of ``pgshovel.abc``); the optional capabilities of the
   contract it provides whole are noted (``offered``), one it provides only in
   part is reported with what it lacks (it will not be used);
3. the configuration is validated against the type hints of the class's
   constructor, as a frozen model with no unknown keys (strings from
   ``${VAR}`` become numbers and booleans where the hints say so);
4. only then is the class constructed, with the validated values.

Every failure is a ``ConfigurationError`` naming the key (``writer.path``,
``target.configuration.dsn``); every problem of a configuration is listed, an
unknown key with the closest key the constructor takes.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from pgshovel.settings import SUBPATH, Settings, explain, problems

logger = logging.getLogger(__name__)

_PATH_FORM = "'package.module:Name'"


def _refuse(subpath: str, message: str) -> PydanticCustomError:
    return PydanticCustomError(
        "pgshovel_component", "{message}", {"message": message, SUBPATH: subpath}
    )


def load_class(path: str) -> type[Any]:
    """Import ``package.module:Name`` and return the class (errors refer to ``path``)."""
    module_name, separator, attribute = path.partition(":")
    if not separator or not module_name or not attribute or ":" in attribute:
        raise _refuse("path", f"expected {_PATH_FORM}, got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise _refuse("path", f"cannot import module {module_name!r}: {error}") from error
    loaded = getattr(module, attribute, None)
    if loaded is None:
        raise _refuse("path", f"module {module_name!r} has no {attribute!r}")
    if not inspect.isclass(loaded):
        raise _refuse("path", f"{path!r} is not a class")
    return loaded


def contract_members(contract: type[Any]) -> list[str]:
    """The methods and properties a class must define to satisfy ``contract``."""
    return sorted(
        name
        for name, member in vars(contract).items()
        if not name.startswith("_") and (callable(member) or isinstance(member, property))
    )


def check_contract(cls: type[Any], contract: type[Any], path: str) -> None:
    """Refuse a class that lacks a member of its contract."""
    missing = [name for name in contract_members(contract) if not hasattr(cls, name)]
    if missing:
        raise _refuse(
            "path",
            f"{path!r} is not a {contract.__name__} (it lacks {', '.join(missing)})",
        )


def offered_capabilities(
    cls: type[Any], capabilities: tuple[type[Any], ...], path: str
) -> list[str]:
    """The names of the ``capabilities`` (protocols extending the contract) ``cls`` provides
    whole; one it provides only in part is logged with the members it lacks."""
    offered = []
    for capability in capabilities:
        members = contract_members(capability)
        missing = [name for name in members if not hasattr(cls, name)]
        if not missing:
            offered.append(capability.__name__)
        elif len(missing) < len(members):
            logger.warning(
                "%r provides part of %s (it lacks %s): it is used without that capability",
                path,
                capability.__name__,
                ", ".join(missing),
            )
    return offered


def arguments_model(cls: type[Any]) -> type[BaseModel]:
    """A frozen model of the keyword arguments ``cls``'s constructor takes, from its hints."""
    signature = inspect.signature(cls)
    try:
        hints = typing.get_type_hints(cls.__init__, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    fields: dict[str, Any] = {}
    takes_any = False
    for name, parameter in signature.parameters.items():
        if parameter.kind is parameter.VAR_KEYWORD:
            takes_any = True
            continue
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            continue
        hint = hints.get(name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[name] = (hint, default)
    config = ConfigDict(
        extra="allow" if takes_any else "forbid", frozen=True, arbitrary_types_allowed=True
    )
    model: type[BaseModel] = create_model(
        f"{cls.__name__}Configuration", __config__=config, **fields
    )
    return model


def validate_arguments(cls: type[Any], configuration: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration validated against ``cls``'s constructor; every problem names its key
    under ``configuration`` (an unknown key with the closest one the constructor takes)."""
    model = arguments_model(cls)
    try:
        validated = model.model_validate(dict(configuration))
    except ValidationError as error:
        found: list[InitErrorDetails] = []
        for problem in problems(error):
            location, message = explain(problem, model)
            if problem["type"] == "extra_forbidden" and len(location) == 1:
                message = message.replace("unknown key", f"unknown key for {cls.__name__}", 1)
            found.append(
                InitErrorDetails(
                    type=PydanticCustomError(
                        "pgshovel_component", "{message}", {"message": message}
                    ),
                    loc=("configuration", *location),
                    input=problem.get("input"),
                )
            )
        raise ValidationError.from_exception_data(model.__name__, found) from error
    arguments = {name: getattr(validated, name) for name in model.model_fields}
    arguments.update(validated.model_extra or {})
    return arguments


class ComponentSpec(Settings):
    """``{path, configuration}`` in a configuration file; subclasses name the contract."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The ``pgshovel.abc`` protocol the class must satisfy (set by each subclass).
    contract: ClassVar[type[Any]]
    #: Protocols extending the contract the class may also satisfy (``pgshovel.abc``).
    capabilities: ClassVar[tuple[type[Any], ...]] = ()

    path: str
    configuration: dict[str, Any] = {}

    _class: type[Any] = PrivateAttr()
    _arguments: dict[str, Any] = PrivateAttr()
    _offered: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _resolve(self) -> ComponentSpec:
        cls = load_class(self.path)
        check_contract(cls, self.contract, self.path)
        self._offered = offered_capabilities(cls, self.capabilities, self.path)
        self._class = cls
        self._arguments = validate_arguments(cls, self.configuration)
        return self

    @property
    def offered(self) -> list[str]:
        """The optional capabilities the class provides (names of ``capabilities``)."""
        return list(self._offered)

    def build(self) -> Any:
        """A new instance of the component, from the validated configuration."""
        return self._class(**self._arguments)
