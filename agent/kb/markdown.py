"""A Markdown file as the knowledge base reads it: one section per `##` or `###` heading (and the
text before the first, under the `#` title), headings inside fenced code left alone."""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADING = re.compile(r"^(#{1,3})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


@dataclass(frozen=True)
class Section:
    """A heading and the text under it, up to the next heading of any of the three levels.
    `path` is the section's headings from the `##` down (empty for the text under the title)."""

    title: str  # the file's `#` heading
    path: tuple[str, ...]
    slug: str
    line: int  # of the heading (1 for the text under the title)
    body: str

    @property
    def heading(self) -> str:
        return self.path[-1] if self.path else self.title


def plain(heading: str) -> str:
    """A heading without its links' targets: `[the kernel](#2-the-kernel)` -> `the kernel`."""
    return _LINK.sub(r"\1", heading).strip()


def slug(heading: str) -> str:
    """`7. Memory accesses` -> `7-memory-accesses`, `3.3 The DMA counter` -> `3-3-the-dma-counter`."""
    return re.sub(r"[^a-z0-9]+", "-", plain(heading).lower()).strip("-") or "section"


def sections(text: str) -> list[Section]:
    """The file's sections in order; a slug that repeats gets `-2`, `-3`... The text under the
    title is the section `intro` (left out when there is none)."""
    title = ""
    heads: list[tuple[int, str, int]] = []  # (level, heading, line index)
    lines = text.splitlines()
    fence = ""
    for i, line in enumerate(lines):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                if not line.strip().strip(fence[0]):
                    fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        m = _HEADING.match(line)
        if m is None:
            continue
        level = len(m.group(1))
        if level == 1 and not title and not heads:
            title = plain(m.group(2))
            heads.append((1, title, i))
        elif level > 1:
            heads.append((level, plain(m.group(2)), i))
    if not heads or heads[0][0] != 1:
        heads.insert(0, (1, title, -1))
    out: list[Section] = []
    used: dict[str, int] = {}
    parent = ""
    for n, (level, heading, at) in enumerate(heads):
        end = heads[n + 1][2] if n + 1 < len(heads) else len(lines)
        body = "\n".join(lines[at + 1 : end]).strip()
        if level == 1:
            path: tuple[str, ...] = ()
            name = "intro"
        elif level == 2:
            parent = heading
            path = (heading,)
            name = slug(heading)
        else:
            path = (parent, heading) if parent else (heading,)
            name = slug(heading)
        if level == 1 and not body:
            continue
        count = used.get(name, 0) + 1
        used[name] = count
        out.append(Section(title, path, name if count == 1 else f"{name}-{count}", max(at, 0) + 1, body))
    return out
