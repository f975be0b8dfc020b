"""``pip install .`` from a clean checkout, into a fresh virtual environment, as a user would.

The build works on a copy of the tracked files (``git ls-files``) in a
temporary directory, so it never writes ``build/`` or ``*.egg-info`` into the
source tree, and every command runs outside the tree, so nothing is imported
from it. ``pip install .`` must give working admin and relay commands without
PySpark; ``pip install '.[spark]'`` adds the worker. The wheel must carry the
protocol modules and the SQL. pip's cache is used on purpose: after
``make setup`` the whole test takes about a minute (most of it installing
PySpark).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import pgshovel

# Needs no sandbox, but the package index (through pip's cache) and a minute.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("pgshovel-admin", "pgshovel-relay", "pgshovel-replicate", "pgshovel-sandbox")


def tracked_copy(destination: Path) -> Path:
    """Copy the files git tracks (as they are in the work tree) to ``destination``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is not copied
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def outside_env() -> dict[str, str]:
    """Our environment without anything that would point Python at the source tree."""
    return {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }


def run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=outside_env(), capture_output=True, text=True, timeout=timeout
    )


def pip(venv: Path, *arguments: str, cwd: Path) -> None:
    """The project's pip (and pip's cache) installing into ``venv``'s interpreter."""
    result = run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *arguments],
        cwd,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_pip_install_gives_admin_and_relay_without_spark_and_the_extra_adds_the_worker(
    tmp_path: Path,
) -> None:
    source = tracked_copy(tmp_path / "checkout")
    venv = tmp_path / "venv"
    created = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    assert created.returncode == 0, created.stderr
    bin_dir = venv / "bin"

    pip(venv, "install", "-q", str(source), cwd=tmp_path)

    for name in COMMANDS:
        version = run([str(bin_dir / name), "--version"], tmp_path)
        assert version.returncode == 0, version.stderr
        assert version.stdout == f"{name} {pgshovel.__version__}\n"
    relay_help = run([str(bin_dir / "pgshovel-relay"), "--help"], tmp_path)
    assert relay_help.returncode == 0 and "Usage: pgshovel-relay" in relay_help.stdout
    probe = run(
        [
            str(bin_dir / "python"),
            "-c",
            "import importlib.util, pgshovel;"
            "print(pgshovel.__file__);"
            "print([m for m in ('pyspark', 'pyarrow', 'pandas') if importlib.util.find_spec(m)])",
        ],
        tmp_path,
    )
    installed_at, spark_modules = probe.stdout.splitlines()
    assert Path(installed_at).is_relative_to(venv), "pgshovel was imported from elsewhere"
    assert spark_modules == "[]", "pip install pgshovel brought the spark extra"
    # The worker says what to install, in one line, instead of a traceback.
    worker = run(
        [str(bin_dir / "pgshovel-replicate"), str(source / "example/replication.yml"), "demo"],
        tmp_path,
    )
    assert worker.returncode == 1
    assert worker.stderr.count("\n") == 1 and "pip install 'pgshovel[spark]'" in worker.stderr
    # The installed package finds its SQL and protocol modules.
    resources = run(
        [
            str(bin_dir / "python"),
            "-c",
            "from importlib import resources;"
            "from pgshovel.protocol import stream_pb2, configuration_pb2;"
            "print(len(resources.files('pgshovel._sql').joinpath('capture.sql').read_text()))",
        ],
        tmp_path,
    )
    assert resources.returncode == 0 and int(resources.stdout) > 1000, resources.stderr

    pip(venv, "install", "-q", f"{source}[spark]", cwd=tmp_path)

    worker_help = run([str(bin_dir / "pgshovel-replicate"), "--help"], tmp_path)
    assert worker_help.returncode == 0, worker_help.stderr
    assert "Usage: pgshovel-replicate" in worker_help.stdout


def test_the_wheel_carries_the_protocol_modules_sql_and_entry_points(tmp_path: Path) -> None:
    source = tracked_copy(tmp_path / "checkout")
    wheels = tmp_path / "wheels"
    built = run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        tmp_path,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("pgshovel-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = f"pgshovel-{pgshovel.__version__}.dist-info"
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
    for proto in sorted((ROOT / "proto/pgshovel/protocol").glob("*.proto")):
        assert f"pgshovel/protocol/{proto.stem}_pb2.py" in names
        assert f"pgshovel/protocol/{proto.stem}_pb2.pyi" in names
    for sql_file in sorted((ROOT / "sql").glob("*.sql")):
        assert f"pgshovel/_sql/{sql_file.name}" in names
    assert "pgshovel/py.typed" in names
    assert "pgshovel/replication/log4j2-quiet.properties" in names  # Spark's quiet logging
    # The console's pages (pgshovel-admin serve).
    for template in sorted((ROOT / "pgshovel/console/templates").glob("*.html")):
        assert f"pgshovel/console/templates/{template.name}" in names
    # Only the package: no tests, examples or benchmarks next to it.
    assert {name.split("/")[0] for name in names} == {"pgshovel", dist_info}
    for name in COMMANDS:
        assert f"{name} = " in entry_points
    requirements = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    spark = [line for line in requirements if line.split()[1].startswith("pyspark")]
    assert spark and all('extra == "spark"' in line or 'extra == "dev"' in line for line in spark)
    assert "Provides-Extra: spark" in metadata
    console = [line for line in requirements if line.split()[1].startswith("uvicorn")]
    assert console and all(
        'extra == "console"' in line or 'extra == "dev"' in line for line in console
    )
