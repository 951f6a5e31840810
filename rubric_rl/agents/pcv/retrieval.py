"""BM25 retrieval over a local folder of documentation (the user's copy of NVIDIA's guides), for the Verifier.

Files (``.md``, ``.markdown``, ``.txt``, ``.rst``, ``.html``, ``.htm``) are cut into passages of about
``passage_chars`` characters at paragraph boundaries, each remembering its file and the nearest heading above it,
and ranked by Okapi BM25 (``rank_bm25``). Nothing is fetched: the folder is all there is.
"""

from __future__ import annotations

import html
import logging
import re
from html.parser import HTMLParser
from pathlib import Path

from pydantic import BaseModel

log = logging.getLogger(__name__)

SUFFIXES = {".md", ".markdown", ".txt", ".rst", ".html", ".htm"}
_WORD = re.compile(r"[a-z0-9]+(?:[_-][a-z0-9]+)*")
_STOP = frozenset(
    "a an and are as at be by for from has have in into is it its of on or that the this to was were will with "
    "you your can may not use used using which when than then these those".split()
)


class Passage(BaseModel):
    source: str
    heading: str
    text: str


class Hit(BaseModel):
    passage: Passage
    score: float


def tokenize(text: str) -> list[str]:
    """Lower-case words; identifiers are kept whole and also split at ``_`` and ``-`` (``__syncthreads`` finds
    ``syncthreads``)."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word in _STOP or len(word) < 2:
            continue
        out.append(word)
        parts = re.split(r"[_-]", word)
        if len(parts) > 1:
            out.extend(p for p in parts if len(p) > 1 and p not in _STOP)
    return out


class _HtmlText(HTMLParser):
    """Text of an HTML page, headings as Markdown headings, scripts and styles dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.parts.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in ("p", "div", "li", "pre", "br", "tr", "section"):
            self.parts.append("\n\n" if tag != "br" else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif re.fullmatch(r"h[1-6]", tag):
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def _text_of(path: Path) -> str:
    raw = path.read_text(errors="replace")
    if path.suffix.lower() in (".html", ".htm"):
        parser = _HtmlText()
        parser.feed(raw)
        return html.unescape("".join(parser.parts))
    return raw


def split_passages(text: str, source: str, passage_chars: int) -> list[Passage]:
    """Passages of at most about ``passage_chars`` (a longer paragraph is cut at sentence or word boundaries)."""
    passages: list[Passage] = []
    heading = ""
    buf: list[str] = []

    def flush() -> None:
        body = "\n\n".join(buf).strip()
        if body:
            passages.append(Passage(source=source, heading=heading, text=body))
        buf.clear()

    for block in re.split(r"\n\s*\n", text):
        block = re.sub(r"[ \t]+", " ", block).strip()
        if not block:
            continue
        m = re.match(r"^#{1,6}\s+(.*)$", block.splitlines()[0])
        if m:
            flush()
            heading = m.group(1).strip()[:200]
            block = "\n".join(block.splitlines()[1:]).strip()
            if not block:
                continue
        while len(block) > passage_chars:
            cut = max(block.rfind(". ", 0, passage_chars), block.rfind(" ", 0, passage_chars))
            cut = cut + 1 if cut > passage_chars // 2 else passage_chars
            flush()
            buf.append(block[:cut].strip())
            flush()
            block = block[cut:].strip()
        if buf and sum(len(b) for b in buf) + len(block) > passage_chars:
            flush()
        buf.append(block)
    flush()
    return passages


class DocIndex:
    """A BM25 index of one documentation folder."""

    def __init__(self, root: Path, passage_chars: int = 700) -> None:
        from rank_bm25 import BM25Okapi

        self.root = root
        self.passages: list[Passage] = []
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES):
            self.passages += split_passages(_text_of(path), str(path.relative_to(root)), passage_chars)
        tokens = [tokenize(f"{p.heading}\n{p.text}") for p in self.passages]
        self._bm25 = BM25Okapi(tokens) if any(tokens) else None
        log.info("indexed %d passages from %s", len(self.passages), root)

    def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` best passages for ``query`` with a positive score, best first."""
        words = tokenize(query)
        if self._bm25 is None or not words or k <= 0:
            return []
        scores = self._bm25.get_scores(words)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return [Hit(passage=self.passages[i], score=float(scores[i])) for i in order[:k] if scores[i] > 0]
