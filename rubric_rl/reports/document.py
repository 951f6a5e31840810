"""A report as a list of blocks (headings, paragraphs, tables, images), written as Markdown and as HTML from the
same blocks, so the two never disagree. Every text is escaped for HTML: task names and rule ids come from
records."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}
p.note{color:#555;font-size:14px}
"""


@dataclass
class Document:
    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("h", (level, text)))

    def para(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, headers: list[str], rows: list[list[Any]]) -> None:
        self.blocks.append(("table", (headers, rows)))

    def image(self, path: str, alt: str) -> None:
        self.blocks.append(("img", (path, alt)))

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for kind, value in self.blocks:
            if kind == "h":
                out += ["#" * value[0] + " " + value[1], ""]
            elif kind == "p":
                out += [value, ""]
            elif kind == "img":
                out += [f"![{value[1]}]({value[0]})", ""]
            else:
                headers, rows = value
                out.append("| " + " | ".join(headers) + " |")
                out.append("|" + "|".join("---" for _ in headers) + "|")
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
                out.append("")
        return "\n".join(out)

    def html(self) -> str:
        e = html.escape
        out = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{e(self.title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>{e(self.title)}</h1>",
        ]
        for kind, value in self.blocks:
            if kind == "h":
                out.append(f"<h{value[0]}>{e(value[1])}</h{value[0]}>")
            elif kind == "p":
                out.append(f'<p class="note">{e(value)}</p>')
            elif kind == "img":
                out.append(f'<img src="{e(value[0])}" alt="{e(value[1])}">')
            else:
                headers, rows = value
                out.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr></thead>")
                body = ["<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in rows]
                out.append("<tbody>" + "".join(body) + "</tbody></table>")
        out.append("</body></html>")
        return "\n".join(out)


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: numbers to ``digits`` significant digits, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
