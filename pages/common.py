"""What every page shares: the database engine, the signed-in user, the role check, the study picker, the
rubric form and the item view.

The browser keeps only a random session token, in an HttpOnly cookie (:mod:`medhelm_core.accounts.session_cookie`;
the tab's session state holds it too); who it belongs to, their role and whether the session is still open are
read from the database on every page run (:func:`medhelm_core.accounts.auth.resolve_session`),
so an expired or revoked session or a disabled account stops at once, and the role check in
:func:`require_page` happens on the server for every page, not by hiding links. It reads the same table as
the navigation (:data:`medhelm_core.accounts.roles.PAGE_ROLES`).

Streamlit also runs code of a page without running the page: a widget's ``on_click``/``on_change`` callback
(before the page script), a fragment's re-run (instead of it) and a download button's ``data`` callable (when
the file is asked for, in a thread of its own). Each goes through the same check, :func:`admit`:
:func:`session_checked` wraps callbacks and fragment bodies, :func:`checked_download` wraps download data. A
new one of these on a page must use them.

Text from data reaches the screen through :mod:`medhelm_core.text`: :func:`~medhelm_core.text.markdown_literal`
for anything Streamlit renders as markdown, :func:`~medhelm_core.text.as_stored` for plain text.

Charts go through :func:`chart`: building an Altair chart and converting it to its Vega-Lite spec took 0.5 s of
every 0.7 s run of the Agreement page at 20,000 items, for charts of figures that had not changed.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import pandas as pd
import streamlit as st
from sqlalchemy.engine import Engine
from sqlmodel import Session

from medhelm_core.accounts import auth, session_cookie
from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.roles import may_open
from medhelm_core.db.engine import shared_engine, transaction
from medhelm_core.db.migrate import require_current_schema
from medhelm_core.db.models import Study
from medhelm_core.errors import AccessDenied, MedhelmError, NotEnoughRatingsError
from medhelm_core.rubric import CriterionSpec
from medhelm_core.settings import database_url
from medhelm_core.studies import list_studies
from medhelm_core.text import DIRECTION_NOTE, as_stored, has_direction_controls, markdown_literal

if TYPE_CHECKING:  # the figures load altair and the statistics: only the Agreement page pays for them
    from medhelm_core.figures.drilldown import ItemDetail

TOKEN_KEY = "session_token"
#: session-state keys: the nonce of a sign-in to hand to the browser's cookie, and a sign-out whose cookie to clear
CLAIM_KEY = "session_claim"
END_KEY = "session_end"
SIGN_IN = "Please sign in."
NOT_YOUR_PAGE = "Your account cannot open this page."

P = ParamSpec("P")
R = TypeVar("R")

try:  # Streamlit's own conversion, as st.altair_chart runs it (its theme, its Arrow datasets); private, so guarded
    from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec as _vega_lite_spec
except ImportError:  # a Streamlit without it: charts are converted on every run, as st.altair_chart does
    _vega_lite_spec = None
#: the Vega-Lite spec of each chart drawn, per (id of the figures it draws, name), dropped with those figures
_SPECS: dict[tuple[int, Hashable], dict[str, Any]] = {}
_SPECS_LOCK = threading.Lock()


class SignedOut(AccessDenied):
    """Nobody is signed in, or the session is no longer open (expired, revoked, account disabled)."""


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    engine = shared_engine(url)
    require_current_schema(engine)
    return engine


def engine() -> Engine:
    """The app's engine; stops the page with a clear message if the database is not ready."""
    try:
        return _engine(database_url())
    except MedhelmError as exc:
        st.error(markdown_literal(f"The database is not ready: {exc}"))
        st.stop()
        raise  # unreachable; st.stop raises


def sign_in(username: str, password: str) -> str | None:
    """Try to sign in; returns None on success, else the message to show."""
    # The engine, not a transaction: auth.sign_in counts the attempt, checks the password with no connection
    # held, then records the outcome. st.context.ip_address keys the per-client back-off (None in tests).
    result = auth.sign_in(engine(), username.strip(), password, client=st.context.ip_address,
                          browser_token=browser_token())
    return _signed_in(result)


def _signed_in(result: auth.SignInResult) -> str | None:
    """Keep a new session in this tab, and its nonce for :func:`hand_session_to_browser`; the refusal if any."""
    if result.token is None:
        return result.message
    st.session_state[TOKEN_KEY] = result.token
    if result.claim_nonce is not None:
        st.session_state[CLAIM_KEY] = result.claim_nonce
    return None


def browser_token() -> str | None:
    """The browser's session cookie as this page run sees it (from the WebSocket's request), if any."""
    return session_cookie.browser_token(st.context.cookies, st.context.url)


def hand_session_to_browser() -> None:
    """Right after a sign-in (or a sign-out), have the browser claim the session for its cookie (or clear the
    cookie), then reload: a constant script of ours, holding only the claim's nonce, never a token."""
    nonce = st.session_state.pop(CLAIM_KEY, None)
    if nonce is not None:
        st.html(session_cookie.claim_script(nonce), unsafe_allow_javascript=True)
    if st.session_state.pop(END_KEY, False):
        st.html(session_cookie.end_script(), unsafe_allow_javascript=True)


def sso_configured() -> bool:
    """True when .streamlit/secrets.toml has an [auth] section (Streamlit's OIDC sign-in)."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def sign_in_with_identity_provider() -> str | None:
    """After ``st.login`` came back: map the provider's identity to our account; None on success."""
    with transaction(engine()) as session:
        result = auth.sign_in_external(session, st.user.get("sub"), st.user.get("email"),
                                       browser_token=browser_token())
    return _signed_in(result)


def sign_out() -> None:
    """Close the session on the server and forget its token; the next run clears the browser's cookie."""
    token = st.session_state.pop(TOKEN_KEY, None)
    st.session_state.pop(CLAIM_KEY, None)
    cookie = browser_token()
    with transaction(engine()) as session:
        auth.sign_out(session, token)
        if cookie is not None and cookie != token:
            auth.sign_out(session, cookie)
    if cookie is not None:
        st.session_state[END_KEY] = True
    if sso_configured() and st.user.is_logged_in:
        st.logout()


def current_user() -> Principal | None:
    """The signed-in user, or None when nobody is signed in or the session is no longer open: the tab's token,
    else the browser's cookie (a reload, a bookmark, a new tab), each checked against the database."""
    tab, cookie = st.session_state.get(TOKEN_KEY), browser_token()
    for token in dict.fromkeys(t for t in (tab, cookie) if t):
        with transaction(engine()) as session:
            who = auth.resolve_session(session, token)
        if who is not None:
            st.session_state[TOKEN_KEY] = token
            return who
    st.session_state.pop(TOKEN_KEY, None)
    return None


def admit(page: str, *, token: str | None = None, eng: Engine | None = None) -> Principal:
    """The session check: the principal of ``token`` (by default the browser session's), read afresh from the
    database, if its session is open and its role may open ``page`` (its name in
    :data:`~medhelm_core.accounts.roles.PAGE_ROLES`). Raises :class:`SignedOut` or
    :class:`~medhelm_core.errors.AccessDenied` otherwise.

    Everything a page runs goes through here: the page itself (:func:`require_page`), its callbacks and
    fragments (:func:`session_checked`) and its downloads (:func:`checked_download`).
    """
    if token is None:
        token = st.session_state.get(TOKEN_KEY)
    if not token:
        raise SignedOut(SIGN_IN)
    with transaction(eng or engine()) as session:
        who = auth.resolve_session(session, token)
    if who is None:
        raise SignedOut(SIGN_IN)
    if not may_open(who.role, page):
        raise AccessDenied(NOT_YOUR_PAGE)
    return who


def _refuse(refusal: AccessDenied) -> None:
    """Say why, forget a session that is no longer open, and stop the run (page, callback or fragment)."""
    if isinstance(refusal, SignedOut):
        st.session_state.pop(TOKEN_KEY, None)
        st.warning(SIGN_IN)
    else:
        st.error(NOT_YOUR_PAGE)
    st.stop()


def require_page(page: str) -> Principal:
    """The signed-in user if their role may open ``page`` (see :func:`admit`); otherwise the page stops here."""
    try:
        return admit(page)
    except AccessDenied as refusal:
        _refuse(refusal)
        raise  # unreachable; st.stop raises


def session_checked(page: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a callback (``on_click``, ``on_change``) or a fragment's function so that it runs only after
    :func:`admit` lets the session in to ``page``; otherwise it draws why and stops.

    A callback runs before the page script and a fragment's re-run runs instead of it, so neither passes
    :func:`require_page` at the top of the page: without this, a disabled account's click still acts.

    Examples
    --------
    >>> st.button("Next", on_click=session_checked("rate")(go), args=(1,))  # doctest: +SKIP
    >>> @st.fragment(run_every=1.0)  # doctest: +SKIP
    ... @session_checked("jury")
    ... def progress() -> None: ...
    """
    def decorate(action: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(action)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                admit(page)
            except AccessDenied as refusal:
                _refuse(refusal)
            return action(*args, **kwargs)
        return checked
    return decorate


def rerun_when_done(updating: Callable[[], bool], page: str, every: str) -> None:
    """Poll ``updating()`` (figures computed in the background) every ``every`` until it is False, then rerun the page
    to draw what is ready.

    Streamlit keeps a page's fragments after the run. A fragment defined in the page, or a lambda of the page's,
    would keep the page's globals alive with it, and with them the figures and scores that run drew: after a rating,
    the previous version's as well as the current one (tens of MB at 20,000 items). So the fragment is defined here
    and ``updating`` is a library function bound with ``functools.partial``, never a lambda of the page's.
    """

    @st.fragment(run_every=every)
    @session_checked(page)
    def poll() -> None:
        if not updating():
            st.rerun()

    poll()


def checked_download(page: str, make: Callable[[Principal], bytes | str]) -> Callable[[], bytes | str]:
    """The ``data`` callable for ``st.download_button``: ``make(who)`` once :func:`admit` lets the session in to
    ``page`` at the moment the file is asked for; otherwise :class:`~medhelm_core.errors.AccessDenied` is raised
    and Streamlit sends no file.

    Streamlit calls it in a thread of its own, outside any page run (no session state there), so the session's
    token and the engine are taken now, while the page runs, and checked against the database at the click:
    an account disabled, a session revoked or expired in between gets nothing.
    """
    token, eng = st.session_state.get(TOKEN_KEY), engine()

    def build() -> bytes | str:
        # "" rather than None when the page had no token: the click's thread has no session state to fall back on.
        return make(admit(page, token=token or "", eng=eng))

    return build


def pick_study(empty: str = "No studies yet.", *, key: str | None = None) -> Study:
    """The study chosen in a "Study" selectbox of every study by name; with no study, ``empty`` is shown and the
    page stops. The row is read in a session of its own: pass its id or name on, not the row, to a write."""
    with Session(engine()) as session:
        studies = {s.name: s for s in list_studies(session)}
    if not studies:
        st.info(empty)
        st.stop()
    return studies[st.selectbox("Study", list(studies), key=key)]


def criterion_inputs(criteria: Iterable[CriterionSpec], current: Mapping[str, int], key: str, *,
                     label: Callable[[CriterionSpec], str] | None = None) -> dict[str, int | None]:
    """One horizontal radio per criterion over its scale, its anchors underneath; the chosen score per criterion
    (None where nothing is chosen). Call it inside the form; ``current`` preselects earlier scores and each
    radio's key is ``{key}_{criterion name}``."""
    values: dict[str, int | None] = {}
    for criterion in criteria:
        levels = list(range(criterion.scale_min, criterion.scale_max + 1))
        chosen = current.get(criterion.name)
        values[criterion.name] = st.radio(
            markdown_literal(label(criterion) if label else criterion.label),
            levels,
            index=levels.index(chosen) if chosen in levels else None,
            horizontal=True,
            key=f"{key}_{criterion.name}",
            help=markdown_literal(criterion.description) if criterion.description else None,
        )
        if criterion.anchors:
            anchors = sorted(criterion.anchors.items())
            st.caption("  \n".join(f"{level}: {markdown_literal(text)}" for level, text in anchors))
    return values


def show_item_texts(input_text: str, output_text: str, reference_text: str | None, *,
                    output_label: str = "Response", height: int = 260) -> None:
    """The request, the response and (folded) the reference, each as plain text in a scrolling box.

    st.text draws characters, never markdown or HTML, so nothing a model wrote can render or run; each goes
    through :func:`show_text`, so direction-control characters show as markers, in the stored order.
    """
    st.markdown("**Request**")
    with st.container(height=height, border=True):
        show_text(input_text)
    st.markdown(f"**{output_label}**")
    with st.container(height=height, border=True):
        show_text(output_text)
    if reference_text is not None:
        with st.expander("Reference answer", expanded=False):
            show_text(reference_text)


def show_text(text: str | None) -> None:
    """Stored text (a model's output, an input, a reference, a comment, a judge's explanation) as plain text in
    the order it is stored: direction-control characters become visible markers, with a note under the text.

    Without this a right-to-left override shows a clinician "test is POSITIVE" for the stored
    "EVITISOP si tset", which the judges read in its stored order.
    """
    st.text(as_stored(text))
    if has_direction_controls(text):
        st.caption(DIRECTION_NOTE)


def in_stored_order(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with :func:`~medhelm_core.text.as_stored` applied to every text cell (comments, labels), for a
    table of stored text."""
    return frame.apply(lambda column: column.map(lambda v: as_stored(v) if isinstance(v, str) else v)
                       if column.dtype == object else column)


def stop_on(error: BaseException) -> None:
    """Say in one line why there is nothing to show, and stop: not enough ratings yet is news (st.info), another
    error of ours a problem (st.error); an error that is not ours is raised (a bug)."""
    if isinstance(error, NotEnoughRatingsError):
        st.info(markdown_literal(error))
    elif isinstance(error, MedhelmError):
        st.error(markdown_literal(error))
    else:
        raise error
    st.stop()


def show_item_detail(detail: ItemDetail) -> None:
    """One item with everything said about it (the Agreement page's drill-down): its ids and model, its texts,
    each clinician's latest scores and each judge's verdict and explanations, all drawn as plain text or tables."""
    st.markdown(f"**Item {detail.item_id}**")
    show_text(f"benchmark: {detail.benchmark}   instance: {detail.instance_id}   model: {detail.model}")
    for label, text in (("Input", detail.input_text), ("Output", detail.output_text),
                        ("Reference", detail.reference_text)):
        if text:
            st.caption(label)
            show_text(text)
    st.caption("Clinicians (latest revision each)")
    if detail.clinicians.empty:
        st.text("No clinician has rated this item.")
    else:
        st.dataframe(in_stored_order(detail.clinicians), hide_index=True)
    st.caption("Judges of the jury run")
    if detail.judges.empty:
        st.text("No verdicts for this item in this run.")
    else:
        st.dataframe(detail.judge_scores, hide_index=True)
        for judge, criterion, text in detail.explanations():
            show_text(f"{judge} on {criterion}: {text}")


def newest_pick(scope: str, sources: Mapping[str, list[str]]) -> str:
    """The value picked last among several pickers (a chart click, a table row, a typed id): the last pick of
    whichever source changed in this run, else the one kept from before (under ``scope`` in the session)."""
    seen = st.session_state.setdefault(f"{scope}_seen", {})
    chosen = st.session_state.get(f"{scope}_chosen", "")
    for name, picks in sources.items():
        if seen.get(name) != picks:
            seen[name] = picks
            chosen = picks[-1] if picks else chosen
    st.session_state[f"{scope}_chosen"] = chosen
    return chosen


def chart(source: object, name: Hashable, build: Callable[[], Any], *, room: int | None = None, **options: Any) -> Any:
    """``st.altair_chart(build(), **options)``, with the chart built and converted once per ``source`` and ``name``.

    ``source`` is what the chart draws and must never change: figures kept by :mod:`medhelm_core.figures` (a new
    version of them is a new object). ``name`` tells its charts apart (with the criterion, when the chart depends
    on it). The spec is kept as long as ``source`` lives. ``room``: draw the chart at its own height plus that
    many pixels for its title, legend and axis labels (Streamlit squeezes nominal layered charts into the height
    it is given); otherwise ``options`` decide, as for ``st.altair_chart``.
    """
    key = (id(source), name)
    with _SPECS_LOCK:
        spec = _SPECS.get(key)
    if spec is None:
        built = build()
        if _vega_lite_spec is None:
            if room is not None:
                options["height"] = _room(getattr(built, "height", None), room)
            return st.altair_chart(built, **options)
        spec = _vega_lite_spec(built)
        with _SPECS_LOCK:
            if not any(k[0] == id(source) for k in _SPECS):
                weakref.finalize(source, _forget_specs, id(source))
            _SPECS[key] = spec
    if room is not None:
        options["height"] = _room(spec.get("height"), room)
    return st.vega_lite_chart(spec=dict(spec), **options)  # Streamlit takes its datasets out of a copy


def _room(height: object, room: int) -> int | str:
    return int(height) + room if isinstance(height, (int, float)) else "content"


def _forget_specs(owner: int) -> None:
    with _SPECS_LOCK:
        for key in [k for k in _SPECS if k[0] == owner]:
            del _SPECS[key]
