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
"""

from __future__ import annotations

import re

__all__ = ["DIRECTION_CONTROLS", "DIRECTION_NOTE", "as_stored", "has_direction_controls", "markdown_literal"]

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
