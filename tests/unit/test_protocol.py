"""The committed protobuf modules are exactly what protoc makes of proto/ (run `make proto`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTOS = sorted((ROOT / "proto" / "pgshovel" / "protocol").glob("*.proto"))
PROTOC = shutil.which("protoc")


def test_every_proto_has_its_committed_modules() -> None:
    assert PROTOS
    for proto in PROTOS:
        for suffix in ("_pb2.py", "_pb2.pyi"):
            generated = ROOT / "pgshovel" / "protocol" / (proto.stem + suffix)
            assert generated.is_file(), f"{generated} is missing: run `make proto`"


@pytest.mark.skipif(PROTOC is None, reason="protoc is not installed (make setup installs it)")
@pytest.mark.parametrize("proto", PROTOS, ids=[proto.name for proto in PROTOS])
def test_committed_modules_are_current(proto: Path, tmp_path: Path) -> None:
    subprocess.run(
        [
            str(PROTOC),
            "-Iproto",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            str(proto.relative_to(ROOT)),
        ],
        cwd=ROOT,
        check=True,
    )
    for suffix in ("_pb2.py", "_pb2.pyi"):
        name = proto.stem + suffix
        fresh = (tmp_path / "pgshovel" / "protocol" / name).read_text()
        committed = (ROOT / "pgshovel" / "protocol" / name).read_text()
        assert committed == fresh, f"pgshovel/protocol/{name} is stale: run `make proto`"
