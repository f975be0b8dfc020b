"""README.md stays true: its CLI reference is the commands' --help, its commands exist."""

from __future__ import annotations

import re
import shlex

import click
import pytest

from tests import readme_cli

TEXT = readme_cli.README.read_text(encoding="utf-8")
ENTRY_POINTS = {name: command for name, command, _path in readme_cli.COMMANDS}


def test_starts_with_the_two_commands() -> None:
    first_block = TEXT.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.strip().splitlines()] == [
        ["make", "demo"],
        ["make", "test"],
    ]


def test_cli_reference_is_the_current_help() -> None:
    assert readme_cli.current(TEXT) == readme_cli.render(), (
        "README.md's command reference is stale: run `.venv/bin/python -m tests.readme_cli`"
    )


def _command_lines() -> list[list[str]]:
    """Every `pgshovel-...` invocation the README shows (in code spans and blocks)."""
    found = []
    for span in re.findall(r"`([^`\n]*pgshovel-(?:admin|relay|replicate|sandbox)[^`\n]*)`", TEXT):
        text = span.strip()
        if text.startswith("eval"):
            text = text.split("$(", 1)[1].rstrip(')"')
        if text.split()[0] in ENTRY_POINTS:
            found.append(shlex.split(text))
    return found


COMMAND_LINES = _command_lines()


def test_the_readme_shows_commands() -> None:
    assert len(COMMAND_LINES) >= 8


@pytest.mark.parametrize("words", COMMAND_LINES, ids=[" ".join(w) for w in COMMAND_LINES])
def test_every_command_shown_exists_with_its_options(words: list[str]) -> None:
    command: click.Command = ENTRY_POINTS[words[0]]
    for word in words[1:]:
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            options = {opt for param in command.params for opt in getattr(param, "opts", [])}
            assert name in options, f"{' '.join(words)}: {command.name} has no option {name}"
        elif isinstance(command, click.Group) and word in command.commands:
            command = command.commands[word]
        elif isinstance(command, click.Group):
            pytest.fail(f"{' '.join(words)}: no subcommand {word!r}")
