"""Text from data, made safe to show: one path for everything a page draws from the database or a file.

Two things go wrong when stored text is drawn as it comes:

* **Markdown.** Streamlit renders markdown in ``st.markdown``, ``st.caption``, the ``st.error`` family, widget
  labels and help, radio options and expander labels. A rubric label, a rater name or an import error quoting
  a file's field could then show an image loaded from any server (``![x](http://...)``), a link, an icon
  (``:material/...:``), coloured text (``:red[...]``) or a code span. :func:`markdown_literal` backslash-escapes
  what starts those constructs, so the reader sees the characters as stored.
* **Direction.** Bidirectional control characters (U+202E RIGHT-TO-LEFT OVERRIDE and its kin) make the browser
  draw characters in another order than stored: a clinician would read "test is POSITIVE" where the judge
  reads "EVITISOP si tset". :func:`as_stored` replaces each with a visible marker such as ``⟦U+202E⟧``.

Plain-text widgets (``st.text``, ``st.code``, dataframes) need :func:`as_stored` only; markdown-rendering ones
get :func:`markdown_literal`, which includes it.

A model's output is itself markdown (headings, lists, bold, tables): :func:`safe_markdown` keeps that formatting
and nothing else. It parses the text (CommonMark with tables and strike-through) and writes it out again as
markdown built only from those constructs, every piece of text passed through :func:`markdown_literal`: raw HTML
shows as its characters, an image as ``[image: alt]``, a link as its text with its address beside it, inert.
"""

from __future__ import annotations

import re

__all__ = ["DIRECTION_CONTROLS", "DIRECTION_NOTE", "as_stored", "has_direction_controls", "markdown_literal",
           "safe_markdown"]

#: LRE, RLE, PDF, LRO, RLO; LRI, RLI, FSI, PDI; LRM, RLM; ALM: every character that changes the drawing order
DIRECTION_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
#: what a page says under a text that held some
DIRECTION_NOTE = ("This text contains direction-control characters, shown as ⟦U+…⟧ markers: its characters "
                  "are drawn in the order they are stored (the order the judges read).")

_DIRECTION = re.compile(f"[{''.join(sorted(DIRECTION_CONTROLS))}]")
# Characters that open a markdown construct anywhere in a line: links and images ([ ]), code (`), HTML and
# autolinks (< >), entities (&), emphasis and strike-through (* _ ~), tables (|), and the backslash itself so
# that a stored backslash cannot cancel one of ours. ``.``, ``(`` and ``$`` stay: alone they start nothing
# that loads or links (``$`` is KaTeX, which Streamlit runs untrusted) and messages read better without.
_ANYWHERE = re.compile(r"([\\\[\]`<>&*_~|])")
# Markers that only mean something at the start of a line: headings, quotes, lists, rules, setext underlines.
_LINE_START = re.compile(r"^([ \t]*)([#>+\-=])", re.MULTILINE)
_ORDERED_ITEM = re.compile(r"^([ \t]*\d+)([.)])", re.MULTILINE)
# A colon starts a directive (:red[...], :material/icon:, :::block) when a character follows it, and it ends an
# emoji shortcode (:smile:) when a shortcode's characters precede it; a colon before a space does neither.
_OPENING_COLON = re.compile(r":(?=\S)")
_SHORTCODE = re.compile(r"(?=(:[\w+/-]+:))")  # with "/" for :material/icon:
# GitHub's autolink literals turn a bare http://, https:// or www. address into a link after parsing, whatever
# is escaped: an invisible WORD JOINER after the scheme (or www) keeps the text as it reads and stops the link.
_AUTOLINK = re.compile(r"(?i)\b(?:https?(?=://)|www(?=\.))")
WORD_JOINER = "\u2060"


def has_direction_controls(text: str | None) -> bool:
    r"""True when ``text`` holds a character that changes the order in which the browser draws it.

    Examples
    --------
    >>> has_direction_controls("\u202eEVITISOP si tset"), has_direction_controls("test is negative")
    (True, False)
    """
    return bool(text) and _DIRECTION.search(text) is not None


def as_stored(text: str | None) -> str:
    r"""``text`` with each direction-control character replaced by a visible marker, so it is drawn in the order
    it is stored; empty for None.

    Examples
    --------
    >>> as_stored("\u202eEVITISOP si tset")
    '⟦U+202E⟧EVITISOP si tset'
    >>> as_stored("plain"), as_stored(None)
    ('plain', '')
    """
    if not text:
        return ""
    return _DIRECTION.sub(lambda m: f"⟦U+{ord(m.group()):04X}⟧", str(text))


def markdown_literal(text: object) -> str:
    r"""``text`` (any value, as ``str``) escaped for a markdown-rendering widget, so it renders as the characters
    it holds: no image, link, code span, HTML, icon, emoji, colour, heading or list, and (see :func:`as_stored`)
    no change of direction. A bare web address stays readable but is not made a link (see ``_AUTOLINK``).

    Examples
    --------
    >>> markdown_literal("![x](ftp://127.0.0.1:9/pixel.png)")
    '!\\[x\\](ftp\\://127.0.0.1\\:9/pixel.png)'
    >>> markdown_literal("see https://example.org") == "see https\u2060\\://example.org"
    True
    >>> markdown_literal(":red[alarm] :smile: `code` <b>")
    '\\:red\\[alarm\\] \\:smile\\: \\`code\\` \\<b\\>'
    >>> markdown_literal("Saved medhelm v2."), markdown_literal("stemmer on: 3 scored")
    ('Saved medhelm v2.', 'stemmer on: 3 scored')
    """
    value = as_stored("" if text is None else str(text))
    value = _AUTOLINK.sub(lambda m: m.group() + WORD_JOINER, value)
    value = _ANYWHERE.sub(r"\\\1", value)
    shortcode_ends = {m.start() + len(m.group(1)) - 1 for m in _SHORTCODE.finditer(value)}
    value = "".join("\\:" if c == ":" and (i in shortcode_ends or _OPENING_COLON.match(value, i)) else c
                    for i, c in enumerate(value))
    value = _LINE_START.sub(r"\1\\\2", value)
    return _ORDERED_ITEM.sub(r"\1\\\2", value)


def safe_markdown(text: str | None) -> str:
    r"""``text`` (a model's output, written in markdown) as markdown that keeps its formatting and nothing that
    loads, links or runs: paragraphs, bold, italics, strike-through, lists, quotes, code and tables stay; headings
    become bold lines (a response is not a page); raw HTML is shown as its characters, an image as
    ``[image: alt]`` and a link as its text with the address beside it, neither of them loaded nor clickable.

    Every piece of text goes through :func:`markdown_literal` (and ``$`` is escaped: KaTeX would set prices as
    formulas), so nothing in it can open a construct; only the constructs written here are markup. A single line
    break is kept as a line break, as the model's line layout is part of what a clinician judges.

    Examples
    --------
    >>> safe_markdown("## Plan\n- **Stop** lisinopril\n- see <b>x</b>")
    '**Plan**\n\n- **Stop** lisinopril\n- see \\<b\\>x\\</b\\>'
    >>> safe_markdown("![scan](http://127.0.0.1:9/p.png) [leaflet](https://example.org/a)")
    '\\[image: scan\\] leaflet (https\u2060\\://example.org/a)'
    >>> safe_markdown("costs $5 to $10")
    'costs \\$5 to \\$10'
    """
    from markdown_it.tree import SyntaxTreeNode

    tree = SyntaxTreeNode(_markdown_parser().parse(as_stored(text or "")))
    return "\n\n".join(_blocks(tree.children)).strip("\n")


def _markdown_parser():  # noqa: ANN202 - a MarkdownIt, imported here so that pages without model text skip it
    global _PARSER
    if _PARSER is None:
        from markdown_it import MarkdownIt

        # html=True makes raw HTML its own tokens, which are then shown as text (never passed on as markup).
        _PARSER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    return _PARSER


_PARSER = None


def _literal(text: str) -> str:
    return markdown_literal(text).replace("$", "\\$")


def _code_span(code: str) -> str:
    ticks = "`" * (max((len(run) for run in re.findall("`+", code)), default=0) + 1)
    pad = " " if code.startswith("`") or code.endswith("`") or not code.strip() else ""
    return f"{ticks}{pad}{code}{pad}{ticks}"


def _inline(nodes) -> str:  # noqa: ANN001 - markdown_it tree nodes
    out: list[str] = []
    for node in nodes:
        kind = node.type
        if kind == "text":
            out.append(_literal(node.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append("  \n")
        elif kind == "code_inline":
            out.append(_code_span(node.content))
        elif kind in ("em", "strong", "s"):
            inner = _inline(node.children)
            mark = {"em": "*", "strong": "**", "s": "~~"}[kind]
            out.append(f"{mark}{inner}{mark}" if inner.strip() else inner)
        elif kind == "link":
            label = _inline(node.children)
            href = str(node.attrs.get("href", ""))
            shown = "".join(c.content for c in node.children if c.type == "text")
            out.append(_literal(href) if node.markup == "autolink" or not shown
                       else label if href in ("", shown) else f"{label} ({_literal(href)})")
        elif kind == "image":
            out.append(_literal(f"[image: {node.content}]" if node.content else "[image]"))
        else:  # html_inline, and anything a later parser version adds: its characters, as written
            out.append(_literal(node.content))
    return "".join(out)


def _indent(text: str, first: str, rest: str) -> str:
    lines = text.split("\n")
    return "\n".join([first + lines[0], *[(rest + line) if line else line for line in lines[1:]]])


def _blocks(nodes) -> list[str]:  # noqa: ANN001 - markdown_it tree nodes
    return [block for node in nodes if (block := _block(node))]


def _block(node) -> str:  # noqa: ANN001, C901 - one branch per kind of block
    kind = node.type
    if kind == "paragraph":
        return _inline(node.children[0].children) if node.children else ""
    if kind == "heading":
        inner = _inline(node.children[0].children) if node.children else ""
        return f"**{inner}**" if inner.strip() else ""
    if kind in ("bullet_list", "ordered_list"):
        start = int(node.attrs.get("start", 1)) if kind == "ordered_list" else 0
        tight = all(c.hidden for item in node.children for c in item.children if c.type == "paragraph")
        items = []
        for number, item in enumerate(node.children, start):
            marker = f"{number}. " if kind == "ordered_list" else "- "
            body = ("\n" if tight else "\n\n").join(_blocks(item.children))
            items.append(_indent(body, marker, " " * len(marker)) if body else marker.rstrip())
        return ("\n" if tight else "\n\n").join(items)
    if kind == "blockquote":
        body = "\n\n".join(_blocks(node.children))
        return "\n".join(f"> {line}" if line else ">" for line in body.split("\n"))
    if kind in ("fence", "code_block"):
        code = node.content if node.content.endswith("\n") else node.content + "\n"
        fence = "`" * max(3, max((len(run) for run in re.findall("`+", code)), default=0) + 1)
        return f"{fence}\n{code}{fence}"  # no language: the info string is the model's, not ours
    if kind == "hr":
        return "---"
    if kind == "table":
        return _table(node)
    if kind == "html_block":
        return "  \n".join(_literal(line) for line in node.content.rstrip("\n").split("\n"))
    return _literal(node.content) if node.content else "\n\n".join(_blocks(node.children))


def _table(node) -> str:  # noqa: ANN001 - a markdown_it table node
    rows = [row for section in node.children for row in section.children]
    if not rows:
        return ""
    width = max(len(row.children) for row in rows)
    align = {"text-align:left": ":--", "text-align:right": "--:", "text-align:center": ":-:"}

    def cells(row) -> list[str]:  # noqa: ANN001
        texts = [_inline(c.children[0].children) if c.children else "" for c in row.children]
        return texts + [""] * (width - len(texts))

    head = rows[0]
    rule = [align.get(str(c.attrs.get("style", "")), "---") for c in head.children]
    rule += ["---"] * (width - len(rule))
    lines = [cells(head), rule, *(cells(row) for row in rows[1:])]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)
