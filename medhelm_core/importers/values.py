"""What a value read from a file may be before any of it is sent to the database.

Both databases must store the same thing or refuse the same way, and a refusal must come from us with the
file, line and field, not from the server: PostgreSQL rejects a NUL character, NaN in JSON and an id
longer than its column (and logs the statement with the item's text), while SQLite stores them silently and
the report crashes on them later. So every item is checked here first, for both databases alike.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from medhelm_core.db.models import Item
from medhelm_core.errors import InputFileError

#: Nesting deeper than this in an item's metadata is refused (real files nest a few levels; JSON nested
#: thousands deep exhausts Python's recursion when it is written, read back or shown).
MAX_META_DEPTH = 32
#: How long each identifying field may be: the database column's length.
ID_LENGTHS = {name: Item.__table__.c[name].type.length for name in ("benchmark", "instance_id", "model")}


def check_text(value: str, source: str, line: int | None, field: str) -> str:
    """``value`` if the database can store it as text: no NUL character, no lone surrogate."""
    if "\x00" in value:
        raise InputFileError(source, "holds a NUL character (\\x00), which cannot be stored", line=line, field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputFileError(
            source, f"holds U+{ord(value[exc.start]):04X}, a lone surrogate that is not valid Unicode",
            line=line, field=field,
        ) from None
    return value


def check_identifier(value: str, source: str, line: int | None, field: str, max_length: int) -> str:
    """``value`` if it can name a thing: storable text, at most ``max_length`` characters, no control
    or format characters (an escape code or a direction override in a model's name corrupts every table and
    report that prints it)."""
    check_text(value, source, line, field)
    if len(value) > max_length:
        raise InputFileError(
            source, f"is {len(value):,} characters long; at most {max_length} are allowed", line=line, field=field
        )
    bad = next((c for c in value if unicodedata.category(c).startswith("C")), None)
    if bad is not None:
        raise InputFileError(
            source, f"holds the control character U+{ord(bad):04X}, which a name or id may not contain",
            line=line, field=field,
        )
    return value


def check_meta(meta: dict[str, Any], source: str, line: int | None) -> dict[str, Any]:
    """``meta`` if it can be stored as JSON on both databases: storable text, finite numbers, shallow.

    The walk is iterative, so a deeply nested value is refused instead of exhausting the recursion limit.
    """
    stack: list[tuple[Any, str, int]] = [(meta, "", 0)]
    while stack:
        value, field, depth = stack.pop()
        where = field or None
        if depth > MAX_META_DEPTH:
            raise InputFileError(source, f"is nested more than {MAX_META_DEPTH} levels deep", line=line, field=where)
        if isinstance(value, str):
            check_text(value, source, line, where or "")
        elif isinstance(value, float) and not math.isfinite(value):
            raise InputFileError(
                source, f"{value} is not a number JSON can hold; leave the value empty instead", line=line, field=where
            )
        elif isinstance(value, dict):
            for key, child in value.items():
                key = str(key)
                check_text(key, source, line, where or key)
                stack.append((child, key if not field else field, depth + 1))
        elif isinstance(value, (list, tuple)):
            stack.extend((child, field, depth + 1) for child in value)
    return meta
