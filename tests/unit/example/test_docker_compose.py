"""docker-compose.yml cannot run here (no Docker engine), so check it statically.

The file must be valid against the Compose Specification's JSON Schema
(vendored in ``compose_spec/``, see its README), and hold what running it
needs: services start only once what they need is healthy or has completed;
the postgres healthcheck waits for the init scripts; each image is built once
and reused by name; the relay's image has neither Java nor Spark; the set's
topic is created with one partition before the relay and the worker start;
nothing is published beyond loopback or on PostgreSQL's usual port. Every
pgshovel service runs a console script setup.py declares (or ``python -m`` a
module of the repository), and every mounted file and build file exists.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pgshovel.cluster import names

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
SCHEMA = Path(__file__).resolve().parent / "compose_spec" / "compose-spec.json"
PGSHOVEL_DOCKERFILE = "example/docker/pgshovel.Dockerfile"
ENTRY_POINT = re.compile(r'"([A-Za-z0-9_-]+)\s*=\s*([A-Za-z0-9_.]+):([A-Za-z0-9_]+)"')
VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}")
STAGE = re.compile(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE | re.MULTILINE)


def document() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def services() -> dict[str, dict[str, Any]]:
    found = document().get("services")
    assert isinstance(found, dict)
    return found


def console_scripts() -> dict[str, tuple[str, str]]:
    """``name -> (module, function)`` from setup.py's console_scripts."""
    text = (ROOT / "setup.py").read_text(encoding="utf-8")
    section = text[text.index("console_scripts") :]
    return {name: (module, function) for name, module, function in ENTRY_POINT.findall(section)}


def words(value: Any) -> list[str]:
    if value is None:
        return []
    return value.split() if isinstance(value, str) else [str(word) for word in value]


def command_words(service: dict[str, Any]) -> list[str]:
    """The command's words; a ``sh -c SCRIPT`` contributes the script's words."""
    command = words(service.get("entrypoint")) + words(service.get("command"))
    if command[:2] == ["sh", "-c"]:
        return shlex.split(command[2].replace("||", " ").replace(">", " "))
    return command


def defaults(text: str) -> str:
    """``text`` with every ``${VAR:-default}`` replaced by its default (as with VAR unset)."""
    return VARIABLE.sub(lambda match: match.group(1) or "", text)


def builds() -> dict[str, dict[str, Any]]:
    """``image -> build section`` of every service that builds an image."""
    found = {}
    for name, service in services().items():
        if "build" in service:
            assert service.get("image"), f"service {name!r} builds an image without naming it"
            found[service["image"]] = service["build"]
    return found


def pgshovel_services() -> dict[str, dict[str, Any]]:
    """The services that run an image built from pgshovel's Dockerfile."""
    ours = {
        image for image, build in builds().items() if build["dockerfile"] == PGSHOVEL_DOCKERFILE
    }
    return {name: service for name, service in services().items() if service["image"] in ours}


def one_shot(service: dict[str, Any]) -> bool:
    return service.get("restart") == "no"


def dockerfile_stages(path: Path) -> dict[str, tuple[str, str]]:
    """``stage name -> (what it is FROM, its instructions)`` of a multi-stage Dockerfile."""
    text = path.read_text(encoding="utf-8")
    matches = list(STAGE.finditer(text))
    stages = {}
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        stages[match.group(2) or match.group(1)] = (match.group(1), text[match.end() : end])
    return stages


def stage_text(path: Path, target: str) -> str:
    """The instructions of ``target`` and of every stage it is built FROM."""
    stages = dockerfile_stages(path)
    text = ""
    while target in stages:
        base, body = stages[target]
        text += body
        target = base
    return text


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


def schema_errors(candidate: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    # The draft its $schema names (spelt in a form jsonschema does not look up).
    jsonschema.Draft201909Validator.check_schema(schema)
    validator = jsonschema.Draft201909Validator(schema)
    return [
        f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(candidate)
    ]


def test_the_file_is_valid_against_the_compose_specification() -> None:
    assert schema_errors(document()) == []


@pytest.mark.parametrize(
    "breakage",
    [
        lambda d: d["services"]["relay"]["depends_on"]["kafka"].update(condition="ready"),
        lambda d: d["services"]["postgres"].update(healthchek={"test": ["CMD", "true"]}),
        lambda d: d["services"]["worker"].update(pull_policy="sometimes"),
    ],
    ids=["unknown-condition", "misspelt-key", "unknown-pull-policy"],
)
def test_the_schema_rejects_a_broken_file(breakage: Any) -> None:
    broken = copy.deepcopy(document())
    breakage(broken)
    assert schema_errors(broken) != []


def test_the_stack_has_the_documented_services() -> None:
    assert {"postgres", "zookeeper", "kafka", "create-topic", "relay", "worker"} <= set(services())
    assert {"relay", "worker", "set-create", "cluster-initialize", "workload"} <= set(
        pgshovel_services()
    )


@pytest.mark.parametrize("name", sorted(services()))
def test_dependencies_wait_for_readiness_or_completion(name: str) -> None:
    depends_on = services()[name].get("depends_on", {})
    assert isinstance(depends_on, dict), (
        f"service {name!r}: a list of dependencies only waits for them to start"
    )
    for dependency, rule in depends_on.items():
        condition = rule["condition"]
        if one_shot(services()[dependency]):
            assert condition == "service_completed_successfully", (name, dependency)
        else:
            assert condition == "service_healthy", (name, dependency)
            assert "healthcheck" in services()[dependency], (name, dependency)


def test_the_postgres_healthcheck_asks_over_tcp() -> None:
    # Without -h, pg_isready reaches the entrypoint's temporary socket-only
    # server and reports ready before the init scripts (the schema) ran.
    check = services()["postgres"]["healthcheck"]["test"]
    assert check[:2] == ["CMD", "pg_isready"] and "-h" in check


def test_each_image_is_built_once_and_reused_by_name() -> None:
    recipes = [
        (build["context"], build.get("dockerfile"), build.get("target"))
        for build in builds().values()
    ]
    assert len(recipes) == len(set(recipes)), "two services build the same image"
    built_by = [service["image"] for service in services().values() if "build" in service]
    assert len(built_by) == len(set(built_by)), "two services build the same image name"
    for name, service in services().items():
        if "build" not in service and service["image"] in builds():
            assert service.get("pull_policy") == "never", (
                f"service {name!r} reuses the local image {service['image']!r}: without "
                "pull_policy: never compose would try to pull it from a registry"
            )


def test_the_relay_image_has_neither_java_nor_spark() -> None:
    dockerfile = ROOT / PGSHOVEL_DOCKERFILE
    relay_build = builds()[services()["relay"]["image"]]
    worker_build = builds()[services()["worker"]["image"]]
    assert relay_build["target"] != worker_build["target"]
    relay = stage_text(dockerfile, relay_build["target"])
    worker = stage_text(dockerfile, worker_build["target"])
    for heavy in ("openjdk", "[spark]", "pyspark"):
        assert heavy not in relay
    assert "openjdk" in worker and "'pgshovel[spark]'" in worker
    # The admin steps and the workload need no more than the relay.
    for name in ("cluster-initialize", "set-create", "workload"):
        assert services()[name]["image"] == services()["relay"]["image"]


def test_the_topic_is_created_with_one_partition_before_relay_and_worker() -> None:
    (creator,) = [
        name
        for name, service in services().items()
        if {"kafka-topics", "--create"} <= set(words(service.get("command")))
    ]
    command = words(services()[creator]["command"])
    relay = services()["relay"]
    cluster = relay["environment"]["PGSHOVEL_CLUSTER"]
    set_name = words(relay["command"])[-1]
    assert command[command.index("--topic") + 1] == names.topic_name(cluster, set_name)
    assert command[command.index("--partitions") + 1] == "1"
    assert one_shot(services()[creator])
    for name in ("relay", "worker"):
        rule = services()[name]["depends_on"][creator]
        assert rule == {"condition": "service_completed_successfully"}
    kafka = services()["kafka"]["environment"]
    assert kafka["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


@pytest.mark.parametrize("name", sorted(services()))
def test_published_ports_are_on_loopback_and_clear_of_local_servers(name: str) -> None:
    for port in services()[name].get("ports", []):
        host_ip, host_port, _container = defaults(str(port)).split(":")
        assert host_ip == "127.0.0.1", f"service {name!r} publishes {port!r} beyond loopback"
        assert host_port not in ("5432", "2181", "9092"), f"{port!r} clashes with local servers"


def test_the_comments_say_how_to_tail_the_stream() -> None:
    comments = [line for line in COMPOSE.read_text().splitlines() if line.startswith("#")]
    tails = [line for line in comments if "pgshovel-admin set tail" in line]
    assert tails, "docker-compose.yml does not say how to run set tail"
    # It runs in a service that has pgshovel-admin and the stack's addresses.
    service = tails[0].split("exec", 1)[1].split()[0]
    assert service in pgshovel_services()
    assert "PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS" in services()[service]["environment"]


def test_console_scripts_in_setup_py_exist_in_the_package() -> None:
    scripts = console_scripts()
    assert {"pgshovel-admin", "pgshovel-relay", "pgshovel-replicate"} <= set(scripts)
    for name, (module, function) in scripts.items():
        assert callable(getattr(importlib.import_module(module), function, None)), name


@pytest.mark.parametrize("name", sorted(pgshovel_services()))
def test_every_pgshovel_service_runs_a_declared_console_script(name: str) -> None:
    command = command_words(pgshovel_services()[name])
    assert command, f"service {name!r} has no command"
    if command[0] in ("python", "python3"):
        assert command[1] == "-m", f"service {name!r}: expected 'python -m MODULE'"
        module = Path(*command[2].split("."))
        assert (ROOT / f"{module}.py").exists() or (ROOT / module / "__main__.py").exists()
        return
    assert command[0] in console_scripts(), (
        f"service {name!r} runs {command[0]!r}, not a console script of setup.py"
    )
    for word in command:
        if word.startswith("pgshovel-"):
            assert word in console_scripts(), f"service {name!r} runs unknown {word!r}"


@pytest.mark.parametrize("name", sorted(pgshovel_services()))
def test_config_files_named_by_commands_are_mounted(name: str) -> None:
    service = pgshovel_services()[name]
    mounted = {container for _host, container in bind_mounts(service)}
    for word in command_words(service):
        if word.startswith("/config/"):
            assert word in mounted, f"service {name!r} names {word!r} but does not mount it"


@pytest.mark.parametrize("name", sorted(services()))
def test_every_bind_mounted_host_path_exists(name: str) -> None:
    for host, _container in bind_mounts(services()[name]):
        assert (ROOT / host).exists(), f"service {name!r} mounts {host!r}, missing in the repo"


@pytest.mark.parametrize("name", sorted(services()))
def test_every_build_context_dockerfile_and_target_exists(name: str) -> None:
    build = services()[name].get("build")
    if build is None:
        assert services()[name].get("image"), f"service {name!r} has neither build nor image"
        return
    context = ROOT / build.get("context", ".")
    assert context.is_dir()
    dockerfile = context / build.get("dockerfile", "Dockerfile")
    assert dockerfile.is_file(), f"service {name!r}: no {dockerfile}"
    if "target" in build:
        assert build["target"] in dockerfile_stages(dockerfile), (name, build["target"])
