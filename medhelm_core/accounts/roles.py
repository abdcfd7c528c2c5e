"""Which role may open which page: the one table that both the navigation and each page's own check read.

The app's navigation (``app.py``) offers a page only to the roles listed here, and every page checks the
same entry on the server when it runs (``pages.common.require_page``), so a link that is shown always
opens and a page reached by a crafted request refuses exactly whom the navigation leaves out.
"""

from __future__ import annotations

from types import MappingProxyType

from medhelm_core.db.models import Role

__all__ = ["PAGE_ROLES", "may_open", "pages_for"]

_EVERYONE = frozenset(Role)
_RESEARCH = frozenset({Role.admin, Role.researcher})

#: page name (the file under ``pages/`` without ``.py``) -> the roles that may open it, in navigation order.
#: Rate is open to every role: anyone can be assigned items (an adjudicator or a researcher who also rates);
#: without assignments the page says so and shows nothing else.
PAGE_ROLES: MappingProxyType[str, frozenset[Role]] = MappingProxyType({
    "home": _EVERYONE,
    "rate": _EVERYONE,
    "raters": _RESEARCH,
    "data": _RESEARCH,
    "metrics": _RESEARCH,
    "jury": _RESEARCH,
    "agreement": _RESEARCH,
    "verdict": _RESEARCH,
    "models": _RESEARCH,
    "review": _RESEARCH,
    "adjudicate": frozenset({Role.admin, Role.researcher, Role.adjudicator}),
    "admin": frozenset({Role.admin}),
})


def may_open(role: str, page: str) -> bool:
    """True when an account with ``role`` may open ``page``; an unknown page is open to nobody.

    Examples
    --------
    >>> may_open("clinician", "rate"), may_open("clinician", "data"), may_open("adjudicator", "adjudicate")
    (True, False, True)
    """
    return role in PAGE_ROLES.get(page, frozenset())


def pages_for(role: str) -> list[str]:
    """The pages ``role`` may open, in navigation order.

    Examples
    --------
    >>> pages_for("clinician")
    ['home', 'rate']
    """
    return [page for page in PAGE_ROLES if may_open(role, page)]
