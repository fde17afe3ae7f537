"""The user documentation: a short README, no work-log words, no broken links.

README.md and every page under docs/ are read as text (no model, no network): the
README stays a front page (at most 200 lines), no page names work items ("issue 12",
"#12") or how the work was organised, every relative markdown link or image points at a
file or folder of the repository, and a link's #anchor names a heading of its page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

README_MAX_LINES = 200

# Pages written elsewhere that may not exist yet in a checkout: a link to one of them is
# checked only once the page is there.
PAGES_WRITTEN_ELSEWHERE = {
    DOCS / "operations.md",
    DOCS / "settings.md",
    DOCS / "security.md",
}

FORBIDDEN = {
    "an issue number": re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE),
    "a #number reference": re.compile(r"(?<![\w&/#])#\d+\b"),
    "the word 'session'": re.compile(r"\bsessions?\b", re.IGNORECASE),
    "the word 'helper'": re.compile(r"\bhelpers?\b", re.IGNORECASE),
}

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target), with an optional "title"
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text outside fenced code blocks (links in code are examples, not links)."""
    return FENCE.sub("", text)


def _relative_links(text: str) -> list[str]:
    """Relative link targets (``page.md#anchor``, ``#anchor``), not external URLs."""
    targets = []
    for match in LINK.finditer(INLINE_CODE.sub("", _prose(text))):
        target = match.group(1)
        if EXTERNAL.match(target):
            continue
        targets.append(target)
    return targets


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped,
    spaces as hyphens, a repeated heading numbered ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    anchors = set()
    for match in HEADING.finditer(_prose(text)):
        title = re.sub(r"[`*_]|<[^>]+>", "", match.group(1)).strip().lower()
        # a link in a heading keeps its text only
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; keep it <= {README_MAX_LINES} and move the "
        "detail into docs/<topic>.md"
    )


def test_docs_folder_has_the_topic_pages() -> None:
    for name in ("architecture.md", "configuration.md", "development.md", "results/README.md"):
        assert (DOCS / name).is_file(), f"docs/{name} is missing"


@pytest.mark.parametrize("page", _pages(), ids=_page_id)
def test_page_names_no_work_items(page: Path) -> None:
    problems = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        for what, pattern in FORBIDDEN.items():
            found = pattern.search(line)
            if found:
                problems.append(f"{_page_id(page)}:{number}: {what} ({found.group(0)!r})")
    assert not problems, "documentation is for users; reword:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", _pages(), ids=_page_id)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in _relative_links(page.read_text(encoding="utf-8")):
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if resolved in PAGES_WRITTEN_ELSEWHERE and not resolved.exists():
            continue
        if not resolved.exists():
            broken.append(f"{_page_id(page)}: {target} (no such file)")
        elif (
            anchor
            and resolved.suffix == ".md"
            and anchor not in _anchors(resolved.read_text(encoding="utf-8"))
        ):
            broken.append(f"{_page_id(page)}: {target} (no such heading)")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_link_finder_reads_markdown_links() -> None:
    text = (
        'See [the gateway](gateway.md#answer), ![a figure](img/x.png "title"), '
        "[a site](https://example.org) and [a heading](#deadlines).\n"
        "```\n[not a link](nowhere.md)\n```\n`[code](nowhere-either.md)`\n"
    )
    assert _relative_links(text) == ["gateway.md#answer", "img/x.png", "#deadlines"]


def test_anchors_follow_github_headings() -> None:
    text = (
        "# Gateway\n## The path of one label job\n## LLM engine: judging speed\n"
        "### The debate read from logits (1.5B)\n## Notes\n## Notes\n```\n# not a heading\n```\n"
    )
    assert _anchors(text) == {
        "gateway",
        "the-path-of-one-label-job",
        "llm-engine-judging-speed",
        "the-debate-read-from-logits-15b",
        "notes",
        "notes-1",
    }


def test_forbidden_patterns_catch_work_log_words() -> None:
    def flagged(line: str) -> bool:
        return any(pattern.search(line) for pattern in FORBIDDEN.values())

    assert flagged("as decided in issue 12")
    assert flagged("see #13 for the sweep")
    assert flagged("measured this session")
    assert not flagged("the gateway's [decision logic](gateway.md#answer)")
    assert not flagged("HTML entity &#39; and a URL path /pull/12")
