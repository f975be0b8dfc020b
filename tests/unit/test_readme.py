"""README.md and docs/ stay true: the commands they show exist, the quick start stays short."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from pgshovel import _clidoc

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
#: README.md and the pages moved out of it (docs/cli.md is the --help itself)
PAGES = {
    path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
    for path in [README, *sorted((ROOT / "docs").glob("*.md"))]
    if path.name != "cli.md"
}
ENTRY_POINTS = _clidoc.ENTRY_POINTS
COMMAND = r"pgshovel-(?:admin|relay|replicate|sandbox)"


def test_starts_with_the_two_commands() -> None:
    first_block = TEXT.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.strip().splitlines()] == [
        ["make", "demo"],
        ["make", "test"],
    ]


def test_the_quick_start_comes_next_and_is_short() -> None:
    headings = re.findall(r"^## (.*)$", TEXT, flags=re.M)
    assert headings[0].startswith("Quick start"), headings[:3]
    section = TEXT.split("\n## ", 2)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    assert len(block.splitlines()) <= 25


def _shown(text: str) -> list[str]:
    """Every `pgshovel-...` invocation in code spans, and the command lines of sh blocks."""
    found = re.findall(rf"`([^`\n]*{COMMAND}[^`\n]*)`", text)
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            for command in line.split("#", 1)[0].split("; "):
                if re.match(COMMAND, command.strip()):
                    found.append(command.strip().rstrip("&").strip())
    return found


def _command_lines() -> list[tuple[str, list[str]]]:
    found = []
    for page, text in PAGES.items():
        for span in _shown(text):
            text = span.strip()
            if text.startswith("eval"):
                text = text.split("$(", 1)[1].rstrip(')"')
            if text.split()[0] in ENTRY_POINTS:
                found.append((page, shlex.split(text)))
    return found


COMMAND_LINES = _command_lines()


def test_the_readme_shows_commands() -> None:
    assert len([page for page, _words in COMMAND_LINES if page == "README.md"]) >= 8
    assert {page for page, _words in COMMAND_LINES} >= {"README.md", "docs/security.md"}


@pytest.mark.parametrize(
    ("page", "words"), COMMAND_LINES, ids=[f"{p}: {' '.join(w)}" for p, w in COMMAND_LINES]
)
def test_every_command_shown_exists_with_its_options(page: str, words: list[str]) -> None:
    command: click.Command = ENTRY_POINTS[words[0]]
    for word in words[1:]:
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            options = {opt for param in command.params for opt in getattr(param, "opts", [])}
            shown = " ".join(words)
            assert name in options, f"{page}: {shown}: {command.name} has no option {name}"
        elif isinstance(command, click.Group) and word in command.commands:
            command = command.commands[word]
        elif isinstance(command, click.Group):
            pytest.fail(f"{page}: {' '.join(words)}: no subcommand {word!r}")
