"""Figures that stay on screen while fresh ones are computed: a process-wide, thread-safe store.

A running study changes all the time (a rating a minute or more), and recomputing a 20,000-item study's
agreement takes seconds, so a page that waited for fresh figures after every change would nearly always be
slow. :class:`RefreshStore` keeps, per key (a study and the page's choices), the latest figures with the data
version they were computed at, and answers a page run at once ("stale while revalidate"):

- figures for the current version: draw them;
- older figures only: draw them, marked stale with the time they were computed, while one background
  thread computes the current ones (the page polls and reruns itself when they are ready);
- nothing yet (the first visit since the app started): compute in the caller's thread, which waits; or, for
  what a page can draw later (``wait=False``), in the background while the page draws the rest.

One computation runs per key at a time; a caller that needs the result (a first visit, a report export)
waits for it rather than starting a second. A computation's error is kept with the version it failed at and
reported to every caller at that version, so a failure is shown, not retried in a loop and not lost; it is
also logged with its traceback. Nothing here knows Streamlit: the page reads a :class:`Lookup` and draws.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from medhelm_core.errors import MedhelmError
from medhelm_core.tuning import release_free_memory

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot(Generic[T]):
    """One finished computation: its value or its error, and the data version it was computed at."""

    version: Hashable
    value: T | None
    error: BaseException | None
    #: when the computation began: the data it read is at least this recent
    started_at: datetime

    @property
    def ok(self) -> bool:
        """True when the computation returned a value."""
        return self.error is None


@dataclass(frozen=True)
class Lookup(Generic[T]):
    """What the store holds for a key, seen from one data version (``version``).

    ``figures`` is the latest successful snapshot (None before the first); it may be older than
    ``version``. ``updating`` says a computation for a newer version is running; ``error`` is the failure of
    the computation at ``version`` itself (then nothing newer is coming until the data changes or
    :meth:`RefreshStore.retry` is called).
    """

    version: Hashable
    figures: Snapshot[T] | None
    updating: bool
    error: BaseException | None

    @property
    def current(self) -> bool:
        """True when the figures were computed at the version asked about."""
        return self.figures is not None and self.figures.version == self.version

    @property
    def stale(self) -> bool:
        """True when there are figures, but from an older version: never to be shown as current."""
        return self.figures is not None and not self.current

    @property
    def value(self) -> T:
        """The figures' value; raises the kept error when there are none."""
        if self.figures is None:
            raise self.error or LookupError("no figures computed yet")
        return self.figures.value  # type: ignore[return-value]


class _Job:
    """A computation in flight: the version it computes and an event set when it has finished."""

    def __init__(self, version: Hashable) -> None:
        self.version = version
        self.started_at = _utcnow()
        self.began = _now()
        self.done = threading.Event()


class _Entry:
    """Per key: the latest success, the latest outcome (success or failure), the job in flight, and the latest
    version asked for while it ran (computed next)."""

    def __init__(self) -> None:
        self.good: Snapshot | None = None
        self.last: Snapshot | None = None
        self.last_began = float("-inf")  # when the computation behind ``last`` began (monotonic clock)
        self.job: _Job | None = None
        self.wanted: tuple[Hashable, Callable[[], object]] | None = None


class RefreshStore(Generic[T]):
    """Latest figures per key with the data version they were computed at; stale ones served while fresh ones
    are computed in a background thread.

    Parameters
    ----------
    max_keys : int
        Keys kept; the least recently used one without a computation in flight goes first.
    name : str
        Names the background threads and the log lines.

    Examples
    --------
    >>> store = RefreshStore(max_keys=4)
    >>> store.lookup("study-1", 1, lambda: "figures at version 1").value
    'figures at version 1'
    >>> seen = store.lookup("study-1", 2, lambda: "figures at version 2")  # a rating arrived: version 2
    >>> seen.stale, seen.value  # the old figures at once, the new ones computing in the background
    (True, 'figures at version 1')
    >>> store.wait("study-1")
    True
    >>> store.lookup("study-1", 2, lambda: "unused").value
    'figures at version 2'
    """

    def __init__(self, max_keys: int = 32, *, name: str = "figures") -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be at least 1")
        self.max_keys = max_keys
        self.name = name
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def lookup(self, key: Hashable, version: Hashable, compute: Callable[[], T], *, wait: bool = True) -> Lookup[T]:
        """What to draw for ``key`` at data ``version``, without waiting when earlier figures exist.

        ``compute`` returns the figures for the data as it is now (read at ``version`` or later). It runs in
        a background thread when older figures can be shown meanwhile, else in the calling thread (or the
        caller waits for the computation already running for this key). With ``wait=False`` it runs in the
        background even when there is nothing to show yet: the lookup then has no figures and is ``updating``
        (a page draws what it has and polls for the rest).
        """
        while True:
            with self._lock:
                entry = self._entry(key)
                if entry.last is not None and entry.last.version == version:
                    error = None if entry.last.ok else entry.last.error
                    return Lookup(version, entry.good, entry.job is not None, error)
                if entry.good is not None or not wait:
                    entry.wanted = (version, compute)
                    if entry.job is None:
                        self._start(key, entry)
                    return Lookup(version, entry.good, True, None)
                job, mine = self._claim(entry, version)
            if mine:
                self._finish(key, job, compute)
            else:
                job.done.wait()

    def fresh(self, key: Hashable, version: Hashable, compute: Callable[[], T]) -> T:
        """The figures computed at ``version``, waiting for (or running) their computation; never stale ones.

        A computation that began after this call (so after ``version`` was read) counts as well: its data is at
        least as recent, whatever version it is labelled with. Raises the computation's error when it failed.
        """
        asked = _now()
        while True:
            with self._lock:
                entry = self._entry(key)
                if entry.last is not None and (entry.last.version == version or entry.last_began >= asked):
                    if entry.last.ok:
                        return entry.last.value  # type: ignore[return-value]
                    raise entry.last.error  # type: ignore[misc]
                job, mine = self._claim(entry, version)
            if mine:
                self._finish(key, job, compute)
            else:
                job.done.wait()

    def latest(self, key: Hashable) -> Snapshot[T] | None:
        """The latest successful snapshot of ``key`` (whatever its version), or None."""
        with self._lock:
            entry = self._entries.get(key)
            return entry.good if entry is not None else None

    def updating(self, key: Hashable) -> bool:
        """True while a computation for ``key`` is in flight (or queued behind one)."""
        with self._lock:
            entry = self._entries.get(key)
            return entry is not None and (entry.job is not None or entry.wanted is not None)

    def wait(self, key: Hashable, timeout: float | None = None) -> bool:
        """Wait until no computation for ``key`` is in flight or queued; False when ``timeout`` ran out first."""
        deadline = None if timeout is None else _now() + timeout
        while True:
            with self._lock:
                entry = self._entries.get(key)
                job = entry.job if entry is not None else None
            if job is None:
                return not self.updating(key)
            left = None if deadline is None else deadline - _now()
            if left is not None and left <= 0:
                return False
            if not job.done.wait(left):
                return False

    def wait_all(self, timeout: float | None = None) -> bool:
        """Wait until no computation of any key is in flight; False when ``timeout`` ran out first."""
        deadline = None if timeout is None else _now() + timeout
        with self._lock:
            keys = list(self._entries)
        for key in keys:
            left = None if deadline is None else max(0.0, deadline - _now())
            if not self.wait(key, left):
                return False
        return True

    def retry(self, key: Hashable) -> None:
        """Forget a failed computation of ``key``, so that the next lookup computes again."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.last is not None and not entry.last.ok:
                entry.last, entry.last_began = entry.good, float("-inf")

    def clear(self) -> None:
        """Forget every key that has no computation in flight (tests, and a database swapped under the app)."""
        with self._lock:
            for key in [k for k, e in self._entries.items() if e.job is None]:
                del self._entries[key]

    # -- inside the lock -------------------------------------------------------------------------------------

    def _entry(self, key: Hashable) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
            idle = [k for k, e in self._entries.items() if e.job is None and k != key]
            for old in idle[: max(0, len(self._entries) - self.max_keys)]:
                del self._entries[old]
        self._entries.move_to_end(key)
        return entry

    def _claim(self, entry: _Entry, version: Hashable) -> tuple[_Job, bool]:
        """The job in flight (to wait for), or a new one for ``version`` that the caller runs."""
        if entry.job is not None:
            return entry.job, False
        entry.job = _Job(version)
        return entry.job, True

    def _start(self, key: Hashable, entry: _Entry) -> None:
        assert entry.wanted is not None
        version, compute = entry.wanted
        entry.wanted = None
        job = entry.job = _Job(version)
        threading.Thread(
            target=self._finish, args=(key, job, compute), name=f"{self.name}-refresh", daemon=True
        ).start()

    # -- outside the lock ------------------------------------------------------------------------------------

    def _finish(self, key: Hashable, job: _Job, compute: Callable[[], T]) -> None:
        """Run ``compute`` for ``job`` and record its outcome; then start what was asked for meanwhile."""
        snapshot: Snapshot | None = None
        try:
            snapshot = Snapshot(job.version, compute(), None, job.started_at)
            log.info("%s for %r at version %r computed in %.2f s", self.name, key, job.version, _now() - job.began)
        except Exception as exc:  # kept and reported to every caller at this version, never swallowed
            if isinstance(exc, MedhelmError):  # a message for the user (too few ratings, say), shown by the page
                log.info("%s for %r at version %r: %s", self.name, key, job.version, exc)
            else:
                log.error("%s for %r at version %r failed", self.name, key, job.version, exc_info=exc)
            snapshot = Snapshot(job.version, None, _without_tracebacks(exc), job.started_at)
        finally:
            release_free_memory()
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:  # evicted while running: keep the outcome anyway
                    entry = self._entries[key] = _Entry()
                entry.job = None
                if snapshot is not None:  # None: interrupted (KeyboardInterrupt, SystemExit); nothing to keep
                    entry.last, entry.last_began = snapshot, job.began
                    if snapshot.ok:
                        entry.good = snapshot
                if entry.wanted is not None and entry.wanted[0] == job.version:
                    entry.wanted = None
                if entry.wanted is not None and entry.good is not None:
                    self._start(key, entry)
                else:
                    entry.wanted = None
                job.done.set()


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _now() -> float:
    return time.monotonic()


def _without_tracebacks(exc: BaseException) -> BaseException:
    # A kept error's tracebacks hold the failed computation's frames (and their data frames); they are logged.
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = None
        current = current.__cause__ or current.__context__
    return exc
