"""docs/cli.md is what ``make docs`` makes of every command's and subcommand's ``--help`` now."""

from __future__ import annotations

from pathlib import Path

import click

from pgshovel import _clidoc

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_docs_cli_md_is_the_current_help() -> None:
    assert CLI_MD.read_text(encoding="utf-8") == _clidoc.render(), (
        "docs/cli.md is stale (a command's --help changed): run `make docs` and commit docs/cli.md"
    )


def test_every_subcommand_is_listed() -> None:
    titles = {" ".join([name, *path]) for name, _command, path in _clidoc.commands()}
    assert {
        "pgshovel-admin set wait",
        "pgshovel-admin set verify",
        "pgshovel-admin set resnapshot",
        "pgshovel-admin serve",
        "pgshovel-relay",
        "pgshovel-replicate",
        "pgshovel-sandbox spark kill-worker",
    } <= titles
    # a group's every command, as click lists it
    admin = _clidoc.ENTRY_POINTS["pgshovel-admin"]
    assert isinstance(admin, click.Group)
    admin_set = admin.commands["set"]
    assert isinstance(admin_set, click.Group)
    assert {f"pgshovel-admin set {name}" for name in admin_set.commands} <= titles


def test_each_command_has_its_heading_and_help() -> None:
    text = _clidoc.render()
    for name, _command, path in _clidoc.commands():
        title = " ".join([name, *path])
        assert f"## `{title}`\n\n```text\nUsage: {title} " in text
