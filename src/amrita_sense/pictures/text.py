"""Escaping label text for Mermaid and for DOT: each has its own rules, both give ASCII only.

Any text can be a label (tags and function names are the user's): quotes, brackets, `#`, `;`,
`|`, HTML-ish characters, backslashes, control characters, unicode, even lone surrogates. Mermaid
text comes out plain ASCII (entities); DOT text keeps printable unicode as itself (DOT is UTF-8,
and Graphviz mis-reads entities above U+FFFF). Either is the same bytes wherever it is made.
"""

from __future__ import annotations

import string

_MERMAID_SAFE = frozenset(string.ascii_letters + string.digits + " .,_-+=()/?!@*'~[]{}^$")
"""Characters Mermaid shows as themselves inside a quoted label; everything else is an entity."""

_DOT_SPECIAL = {'"': '\\"', "\\": "\\\\", "&": "&amp;", "\n": "\\n"}
"""What DOT needs escaped inside a double-quoted string (a newline: a centred line break)."""


def _visible_control(char: str) -> str:
    """A control character or a lone surrogate as visible text (`\\x07`, `\\ud800`)."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unprintable(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF or 0x80 <= code < 0xA0


def mermaid_text(text: str) -> str:
    """`text` for inside a quoted Mermaid label: entities `#N;` for anything not plainly safe,
    `<br>` for a newline, control characters spelled out."""
    out: list[str] = []
    for char in text:
        if char in _MERMAID_SAFE:
            out.append(char)
        elif char == "\n":
            out.append("<br>")
        elif _unprintable(char):
            out.append(mermaid_text(_visible_control(char)))
        else:
            out.append(f"#{ord(char)};")
    return "".join(out)


def dot_text(text: str) -> str:
    """`text` for inside a double-quoted DOT string: quotes and backslashes escaped, `\\n` line
    breaks, `&` as `&amp;` (Graphviz reads entities), control characters spelled out."""
    out: list[str] = []
    for char in text:
        special = _DOT_SPECIAL.get(char)
        if special is not None:
            out.append(special)
        elif _unprintable(char):
            out.append(dot_text(_visible_control(char)))
        else:
            out.append(char)
    return "".join(out)


__all__ = ["dot_text", "mermaid_text"]
