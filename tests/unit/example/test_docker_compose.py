"""docker-compose.yml cannot run here, so check what would break it: commands and mounted files.

Every pgshovel service must run a console script that setup.py declares (or
``python -m`` a module of the repository), every bind-mounted host path and
build file must exist, and every /config file a command names must be mounted.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
PGSHOVEL_DOCKERFILE = "example/docker/pgshovel.Dockerfile"
ENTRY_POINT = re.compile(r'"([A-Za-z0-9_-]+)\s*=\s*([A-Za-z0-9_.]+):([A-Za-z0-9_]+)"')


def console_scripts() -> dict[str, tuple[str, str]]:
    """``name -> (module, function)`` from setup.py's console_scripts."""
    text = (ROOT / "setup.py").read_text(encoding="utf-8")
    section = text[text.index("console_scripts") :]
    return {name: (module, function) for name, module, function in ENTRY_POINT.findall(section)}


def services() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(document, dict) and isinstance(document.get("services"), dict)
    return document["services"]


def words(value: Any) -> list[str]:
    if value is None:
        return []
    return value.split() if isinstance(value, str) else [str(word) for word in value]


def pgshovel_services() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in services().items()
        if isinstance(service.get("build"), dict)
        and service["build"].get("dockerfile") == PGSHOVEL_DOCKERFILE
    }


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """``(host path, container path)`` of the service's bind mounts (named volumes skipped)."""
    mounts = []
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            if volume.get("type") == "bind":
                mounts.append((volume["source"], volume["target"]))
            continue
        host, container = volume.split(":")[:2]
        if host.startswith((".", "/")):
            mounts.append((host, container))
    return mounts


def test_the_stack_has_the_documented_services() -> None:
    assert {"postgres", "zookeeper", "kafka", "relay", "worker"} <= set(services())
    assert {"relay", "worker", "set-create", "cluster-initialize"} <= set(pgshovel_services())


def test_console_scripts_in_setup_py_exist_in_the_package() -> None:
    scripts = console_scripts()
    assert {"pgshovel-admin", "pgshovel-relay", "pgshovel-replicate"} <= set(scripts)
    for name, (module, function) in scripts.items():
        assert callable(getattr(importlib.import_module(module), function, None)), name


@pytest.mark.parametrize("name", sorted(pgshovel_services()))
def test_every_pgshovel_service_runs_a_declared_console_script(name: str) -> None:
    service = pgshovel_services()[name]
    command = words(service.get("entrypoint")) + words(service.get("command"))
    assert command, f"service {name!r} has no command"
    if command[0] in ("python", "python3"):
        assert command[1] == "-m", f"service {name!r}: expected 'python -m MODULE'"
        module = Path(*command[2].split("."))
        assert (ROOT / f"{module}.py").exists() or (ROOT / module / "__main__.py").exists()
    else:
        assert command[0] in console_scripts(), (
            f"service {name!r} runs {command[0]!r}, not a console script of setup.py"
        )


@pytest.mark.parametrize("name", sorted(pgshovel_services()))
def test_config_files_named_by_commands_are_mounted(name: str) -> None:
    service = pgshovel_services()[name]
    mounted = {container for _host, container in bind_mounts(service)}
    for word in words(service.get("command")):
        if word.startswith("/config/"):
            assert word in mounted, f"service {name!r} names {word!r} but does not mount it"


@pytest.mark.parametrize("name", sorted(services()))
def test_every_bind_mounted_host_path_exists(name: str) -> None:
    for host, _container in bind_mounts(services()[name]):
        assert (ROOT / host).exists(), f"service {name!r} mounts {host!r}, missing in the repo"


@pytest.mark.parametrize("name", sorted(services()))
def test_every_build_context_and_dockerfile_exists(name: str) -> None:
    build = services()[name].get("build")
    if build is None:
        assert services()[name].get("image"), f"service {name!r} has neither build nor image"
        return
    context = ROOT / (build if isinstance(build, str) else build.get("context", "."))
    assert context.is_dir()
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert (context / dockerfile).is_file(), f"service {name!r}: no {dockerfile!r} in {context}"
