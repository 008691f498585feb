"""The front door stays a front door: the README is short, its map lists exactly what is in
``stencil/``, and no link in README.md or docs/ leads out of the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_LINES = 150


def _map_entries() -> list[str]:
    """The names indented under ``stencil/`` in the README's map block."""
    text = README.read_text(encoding="utf-8")
    block = text.split("\n```\nstencil/\n", 1)[1].split("\n```", 1)[0]
    return [m.group(1).rstrip("/") for m in re.finditer(r"^  (\S+)", block, flags=re.M)]


def test_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


def test_map_matches_the_package() -> None:
    on_disk = sorted(
        p.name
        for p in (REPO / "stencil").iterdir()
        if not p.name.startswith((".", "__pycache__")) and not p.name.endswith(".egg-info")
    )
    assert sorted(_map_entries()) == on_disk


def test_links_stay_inside_the_repository() -> None:
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text, page
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if target.startswith(("http://", "https://")):
                continue
            assert (page.parent / target).resolve().is_relative_to(REPO), (page, target)
            assert (page.parent / target).exists(), (page, target)
