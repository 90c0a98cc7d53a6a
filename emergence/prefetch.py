"""Download pipeline: fetch (and load) revision i+1 in the background while revision i is screened.

:class:`Pipeline` walks a list of items (revisions) and hands each one to the caller with what
``fetch(item)`` returned (a local folder), or the exception it raised (that item fails alone).
``fetch`` runs in one background thread, **at most one item ahead**: when the caller receives
item i, the fetch of item i+1 has been started and nothing beyond it. With ``load`` given, the
same thread then runs ``load(item, fetched)``, so revision i+1 is downloaded *and* loaded while
revision i is screened (two models held at once). When the caller asks for the next item,
``evict(item i, fetched)`` is called first (if given), so with eviction at most two items are on
disk. Per item the wall time is then close to max(fetch + load, screen) instead of their sum.
The functions are injected: a job passes its model source's ``fetch`` and ``evict``
(emergence/sources/), tests a fetch that sleeps and copies.
"""

from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, List, Optional, Sequence, TypeVar

from emergence.sources import folder_bytes

T = TypeVar("T")


class FetchFailed(RuntimeError):
    """A revision could not be fetched; its run is FAILED with this message and the job's
    other revisions go on."""


@dataclass
class Fetched(Generic[T]):
    item: T
    #: What ``fetch(item)`` returned (None when it raised).
    value: Any = None
    #: The exception ``fetch(item)`` raised, else None.
    error: Optional[BaseException] = None
    #: Seconds the caller waited for this item's fetch (and load) (0 when it was ready in time).
    waited_s: float = 0.0
    #: What ``load(item, value)`` returned (None without a load stage, or when it raised:
    #: then :attr:`error` holds the exception).
    loaded: Any = None
    #: Seconds the background fetch and the load took (their own time, overlapped or not).
    fetch_s: float = 0.0
    load_s: float = 0.0


class Pipeline(Generic[T]):
    """Iterate ``items`` with ``fetch`` running one item ahead (module docstring). An item is evicted
    only when its fetch succeeded. Leaving the loop early does not wait for the fetch in flight; it is
    evicted when it lands. ``ahead=0`` fetches each item only when it is asked for (no overlap; for comparison)."""

    def __init__(self, items: Sequence[T], fetch: Callable[[T], Any],
                 evict: Optional[Callable[[T, Any], None]] = None, ahead: int = 1,
                 load: Optional[Callable[[T, Any], Any]] = None):
        if ahead not in (0, 1):
            raise ValueError("ahead must be 0 (no prefetch) or 1")
        self.items: List[T] = list(items)
        self.fetch = fetch
        self.evict = evict
        self.ahead = ahead
        self.load = load

    def _release(self, got: Fetched) -> None:
        """The caller is done with ``got``: its model goes, its fetched value is evicted."""
        got.loaded = None
        if self.evict is not None and got.value is not None:
            self.evict(got.item, got.value)

    def _run(self, item: T) -> Fetched:
        """Fetch ``item``, then load it (with a load stage); an exception fails this item only."""
        got = Fetched(item)
        tic = time.perf_counter()
        try:
            got.value = self.fetch(item)
            got.fetch_s = time.perf_counter() - tic
            if self.load is not None and got.value is not None:
                tic = time.perf_counter()
                got.loaded = self.load(item, got.value)
                got.load_s = time.perf_counter() - tic
        except Exception as exc:  # noqa: BLE001  (handed to the caller: it fails this item only)
            got.error, got.loaded = exc, None
        return got

    def _start(self, item: T) -> Future:
        """Run the item's fetch (and load) in a daemon thread, so an interrupted job exits without
        waiting for a download in flight (huggingface_hub resumes it next time)."""
        future: Future = Future()

        def work() -> None:
            try:
                future.set_result(self._run(item))
            except BaseException as exc:  # noqa: BLE001  (KeyboardInterrupt, SystemExit in the thread)
                future.set_exception(exc)

        threading.Thread(target=work, name="prefetch", daemon=True).start()
        return future

    def __iter__(self) -> Iterator[Fetched]:
        pending: Optional[Future] = None
        current: Optional[Fetched] = None
        try:
            for idx, item in enumerate(self.items):
                if pending is None:
                    pending = self._start(item)
                tic = time.perf_counter()
                current = pending.result()  # Ctrl-C while waiting propagates; a fetch's error is in it
                current.waited_s = time.perf_counter() - tic
                pending = None
                if self.ahead and idx + 1 < len(self.items):  # start i+1 before handing out i
                    pending = self._start(self.items[idx + 1])
                yield current
                done, current = current, None
                self._release(done)  # before the next one is handed out
        finally:
            if current is not None:  # the caller left the loop while holding this item
                self._release(current)
            if pending is not None:  # fetched ahead, never handed out: evicted once it lands
                def late(future: Future) -> None:
                    if future.exception() is None:
                        self._release(future.result())

                pending.add_done_callback(late)


#: Head room kept on the disk when ``cache.evict`` is null (auto), as a share of what is still to come.
DISK_MARGIN = 0.10


def disk_short(folder, remaining: int) -> bool:
    """``cache.evict: null`` (auto): whether the disk holding ``folder`` has less free space than
    ``remaining`` more revisions of its size need (plus :data:`DISK_MARGIN`)."""
    if remaining <= 0:
        return False
    size = folder_bytes(folder)
    return shutil.disk_usage(folder).free < remaining * size * (1 + DISK_MARGIN)
