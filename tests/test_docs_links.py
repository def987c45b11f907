"""The README and the docs link only to files that exist (a relative link to a missing file fails)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")])
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1\s*$", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")


def relative_links(text: str) -> list[str]:
    """Link targets of a markdown page that point at files of the repository (not URLs, not anchors
    of the page itself, not inside code)."""
    prose = _CODE.sub("", _FENCE.sub("", text))
    targets = [*_INLINE.findall(prose), *_REFERENCE.findall(prose)]
    return [t for t in targets if not re.match(r"^([a-z][a-z0-9+.-]*:|#|//)", t, re.IGNORECASE)]


def test_the_link_finder() -> None:
    text = (
        '[a](docs/x.md) [b](https://example.com) [c](#here) ![d](img/p.png "t") [e](<y z.md>)\n'
        "`[f](in-code.md)`\n```\n[g](in-fence.md)\n```\n[h]: ref/target.md\n[i](mailto:x@example.com)\n"
    )
    assert sorted(relative_links(text)) == ["docs/x.md", "img/p.png", "ref/target.md"]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_relative_links_point_at_existing_files(page: Path) -> None:
    missing = [
        target
        for target in relative_links(page.read_text(encoding="utf-8"))
        if not (page.parent / target.split("#", 1)[0]).exists()
    ]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"
