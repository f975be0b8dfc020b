"""Every link between README.md, docs/*.md and the repository's files resolves: file and anchor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to dashes."""
    title = heading.lstrip("#").strip().lower()
    return "".join(c for c in title if c.isalnum() or c in " -_").replace(" ", "-")


def outside_code(text: str) -> str:
    """The text without its fenced blocks (a `#` there is no heading, a `](` no link)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def anchors(path: Path) -> set[str]:
    text = outside_code(path.read_text(encoding="utf-8"))
    return {anchor(line) for line in text.splitlines() if line.startswith("#")}


def links() -> list[tuple[Path, str]]:
    found = []
    for page in PAGES:
        for target in LINK.findall(outside_code(page.read_text(encoding="utf-8"))):
            if not re.match(r"[a-z]+:", target):
                found.append((page, target))
    return found


LINKS = links()


def test_there_are_links_to_check() -> None:
    assert len(LINKS) > 30


@pytest.mark.parametrize(
    ("page", "target"), LINKS, ids=[f"{p.relative_to(ROOT)}->{t}" for p, t in LINKS]
)
def test_the_link_resolves(page: Path, target: str) -> None:
    path, _, fragment = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    assert destination.exists(), f"{page.relative_to(ROOT)}: {target}: no such file"
    if fragment:
        assert fragment in anchors(destination), (
            f"{page.relative_to(ROOT)}: {target}: no heading with that anchor"
        )
