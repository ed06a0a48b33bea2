"""Release of raw Level Zero handles, exactly once and children before parents.

Every object of the layer registers the raw call that frees it with the
:class:`Tracker` of its context, through its owner's ``register_release``
(the context for top-level objects, the parent object for events, fences,
kernels and dma-buf descriptors). An object's ``__del__`` uses only the
tracker and its key, never the object's parents, and a context's
``weakref.finalize`` holds only its tracker, so garbage collection order
(cycles, interpreter exit) cannot free a context before the memory and lists
created in it, and ``close()`` followed by collection frees once. (A
``__del__`` costs nothing until it runs; a finalizer per object cost more than
the driver's allocation.)

Host memory the process can address directly (``HostAllocation.memoryview``)
is *pinned* by the objects exporting it: while one is alive, releasing that
memory explicitly raises :class:`BufferError`, and a release from garbage
collection or interpreter exit leaves it (and its context) allocated, so no
Python view can ever reach freed memory.
"""

from __future__ import annotations

import gc
import threading
import warnings
import weakref
from typing import Any, NamedTuple, Protocol

from typing_extensions import Self

from l0mem._ze import CFunction, check
from l0mem.core import _raw


class ReleaseWarning(RuntimeWarning):
    """A handle could not be freed during garbage collection (it may have leaked)."""


class ReleaseCall(NamedTuple):
    """One raw release call: ``release(*args)``, named ``what`` in errors and warnings."""

    release: CFunction
    args: tuple[Any, ...]
    what: str

    @classmethod
    def of(cls, release: CFunction, *args: Any) -> ReleaseCall:
        """Return the call ``release(*args)`` named after the C routine."""
        return cls(release, args, release.__name__)

    def run(self, raising: bool) -> None:
        """Make the call; raise on failure, or (``raising`` False) warn with ReleaseWarning."""
        try:
            check(self.release(*self.args), self.what)
        except Exception as err:
            if raising:
                raise
            warnings.warn(
                f"l0mem: releasing {self.what} failed: {err}", ReleaseWarning, stacklevel=2
            )


def discard(destroy: CFunction, *args: Any) -> None:
    """Free a handle nothing will own, during cleanup after another error.

    A failure here is reported as a :class:`ReleaseWarning` so that the error
    which caused the cleanup is the one that propagates.
    """
    try:
        _raw.call(destroy, *args)
    except Exception as err:
        warnings.warn(
            f"l0mem: {destroy.__name__} failed while cleaning up after an error: {err}",
            ReleaseWarning,
            stacklevel=3,
        )


class Tracker:
    """Raw release calls a context still owes, freed newest first and children first.

    It also counts the driver calls under way in the context (:meth:`enter`,
    :meth:`leave`): :meth:`release_all` waits for them, so closing a context
    from one thread never destroys a handle another thread's call is using.
    """

    def __init__(self) -> None:
        """Start with nothing registered."""
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        # key -> (release routine, its arguments, its name or None, parent key or None)
        self._items: dict[int, tuple[CFunction, tuple[Any, ...], str | None, int | None]] = {}
        # Kept per parent so that a release never scans the other registered handles.
        self._children: dict[int, set[int]] = {}
        self._pins: dict[int, list[weakref.ref[Any]]] = {}
        self._next = 0
        self._busy = 0
        self._closing = False
        self._closed = False

    def __len__(self) -> int:
        """Return how many handles are registered and not yet released."""
        return len(self._items)

    @property
    def closed(self) -> bool:
        """Return True once the owning context has been released."""
        return self._closed

    def enter(self) -> None:
        """Count a driver call on the context's handles; raise ValueError once it is closed."""
        with self._lock:
            if self._closing:
                raise ValueError("the context is closed")
            self._busy += 1

    def leave(self) -> None:
        """End a call counted by :meth:`enter`."""
        with self._lock:
            self._busy -= 1
            if self._closing and not self._busy:
                self._idle.notify_all()

    def add(
        self,
        release: CFunction,
        args: tuple[Any, ...],
        what: str | None = None,
        parent: int | None = None,
    ) -> int:
        """Register ``release(*args)`` under ``parent``; return its key.

        ``what`` names the call in errors (default: the routine's ``__name__``).
        """
        with self._lock:
            if self._closed:
                raise ValueError("the context is closed")
            if parent is not None:
                if parent not in self._items:
                    raise ValueError("the parent object is closed")
                self._children.setdefault(parent, set()).add(self._next)
            key = self._next
            self._next += 1
            self._items[key] = (release, args, what, parent)
            return key

    def owns(self, key: int) -> bool:
        """Return True while the handle registered under ``key`` is unreleased."""
        return key in self._items

    def pin(self, key: int, exporter: object) -> None:
        """Keep the memory under ``key`` allocated while ``exporter`` (a buffer exporter) lives."""
        with self._lock:
            if key not in self._items:
                raise ValueError("the object is closed")
            refs = [r for r in self._pins.get(key, []) if r() is not None]
            refs.append(weakref.ref(exporter))
            self._pins[key] = refs

    def _subtree(self, key: int) -> list[int]:
        """Return ``key`` and the keys of its registered descendants."""
        keys = [key]
        for child in tuple(self._children.get(key, ())):
            keys.extend(self._subtree(child))
        return keys

    def _pinned(self, keys: list[int] | None) -> int:
        """Return how many live exporters pin ``keys`` (None: every key)."""
        with self._lock:
            chosen = self._pins if keys is None else {k: self._pins.get(k, []) for k in keys}
            return sum(1 for refs in chosen.values() for r in refs if r() is not None)

    def check_unpinned(self, key: int | None = None) -> None:
        """Raise BufferError while a memoryview still exports memory under ``key`` (None: any)."""
        if not self._pins:
            return
        with self._lock:
            keys = None if key is None else self._subtree(key)
        if self._pinned(keys):
            gc.collect()  # views kept only by unreachable cycles are not a reason to refuse
            count = self._pinned(keys)
            if count:
                raise BufferError(
                    f"{count} memoryview(s) of host memory are still alive; "
                    "release them (del, or memoryview.release()) before closing"
                )

    def _take(self, key: int) -> list[ReleaseCall]:
        """Remove ``key`` and its descendants; return their release calls, children first."""
        item = self._items.pop(key, None)
        if item is None:
            return []
        release, args, what, parent = item
        if self._pins:
            self._pins.pop(key, None)
        if parent is not None:
            siblings = self._children.get(parent)
            if siblings is not None:
                siblings.discard(key)
        taken: list[ReleaseCall] = []
        for child in sorted(self._children.pop(key, ()), reverse=True):
            taken.extend(self._take(child))
        taken.append(ReleaseCall(release, args, what or release.__name__))
        return taken

    def release(self, key: int, raising: bool = True) -> bool:
        """Free the handle under ``key`` (children first) if still held; return whether it did.

        While a memoryview exports the memory, ``raising`` release raises
        BufferError and a non-raising one (garbage collection) frees nothing.
        """
        if key not in self._items:
            return False
        if raising:
            self.check_unpinned(key)
        with self._lock:
            if not raising and self._pins and self._pinned(self._subtree(key)):
                return False
            calls = self._take(key)
        _run_all(calls, raising)
        return bool(calls)

    def release_all(self, final: ReleaseCall | None, raising: bool) -> None:
        """Free every registered handle newest first, then ``final``; raise the first failure.

        Waits for the calls counted by :meth:`enter` (other threads') to end,
        refusing new ones meanwhile. Pinned memory (see :meth:`check_unpinned`)
        makes a raising call fail with BufferError before anything is freed; a
        non-raising call (garbage collection, interpreter exit) then keeps that
        memory and ``final``.
        """
        if raising:
            self.check_unpinned()
        with self._lock:
            if self._closed:
                return
            self._closing = True
            while self._busy:
                self._idle.wait()
            self._closed = True
            keep = {k for k, refs in self._pins.items() if any(r() is not None for r in refs)}
            calls = []
            for k in sorted(self._items, reverse=True):
                # pop with a default: a collection on this thread may have freed one meanwhile
                item = None if k in keep else self._items.pop(k, None)
                if item is not None:
                    release, args, what, _parent = item
                    calls.append(ReleaseCall(release, args, what or release.__name__))
            self._children.clear()
            self._pins = {k: v for k, v in self._pins.items() if k in keep}
        if final is not None and not keep:
            calls.append(final)
        _run_all(calls, raising)


def _run_all(calls: list[ReleaseCall], raising: bool) -> None:
    """Run every release call even if one fails; raise the first failure afterwards."""
    first: BaseException | None = None
    for call in calls:
        try:
            call.run(raising)
        except Exception as err:
            first = first or err
    if first is not None:
        raise first


class Registration(NamedTuple):
    """Where a release call was registered: the context's tracker and the call's key."""

    tracker: Tracker
    key: int


class Owner(Protocol):
    """Something objects can be created from: a context, or an object owning children."""

    def register_release(
        self, release: CFunction, args: tuple[Any, ...], what: str | None = None
    ) -> Registration:
        """Register ``release(*args)`` as owned by this object; return where it went."""
        ...


class Owned:
    """Base of the objects whose release call a context's Tracker holds.

    Subclasses call :meth:`_own` once their raw handle exists; the base then
    answers ``closed``, ``close()`` and the ``with`` protocol for all of them,
    and :meth:`register_release` lets them own children.
    """

    _tracker: Tracker
    # -1 until registered: a half-built object has nothing for __del__ to free.
    _key: int = -1

    def _own(self, owner: Owner, destroy: CFunction, args: tuple[Any, ...]) -> None:
        """Register ``destroy(*args)`` with ``owner``; if that fails, call it now and re-raise."""
        try:
            self._tracker, self._key = owner.register_release(destroy, args)
        except BaseException:
            # Nothing else would ever free the handle.
            discard(destroy, *args)
            raise

    def _close(self) -> None:
        """Free the handle and its children now, raising on failure."""
        self._tracker.release(self._key, True)

    def __del__(self) -> None:
        """Free the handle if the user forgot to (failures become ReleaseWarning).

        Only the tracker and the key are used, never the owner: the tracker
        frees children before parents whatever order collection runs in, and
        a context's own finalizer frees whatever is left before the context.
        """
        key = self._key
        if key >= 0:
            self._tracker.release(key, False)

    def register_release(
        self, release: CFunction, args: tuple[Any, ...], what: str | None = None
    ) -> Registration:
        """Register ``release(*args)`` as a child of this object, released before it.

        For the objects of :mod:`l0mem.core` (an event of its pool, a fence of
        its queue, a kernel of its module); raises ValueError once this object
        is closed.
        """
        return Registration(self._tracker, self._tracker.add(release, args, what, self._key))

    def _pin(self, exporter: object) -> None:
        """Keep this object's memory allocated while ``exporter`` (a buffer exporter) lives."""
        self._tracker.pin(self._key, exporter)

    @property
    def closed(self) -> bool:
        """Return True once the handle has been released."""
        return not self._tracker.owns(self._key)

    def _check_open(self) -> None:
        """Raise ValueError once the handle has been released (before any use of it)."""
        if not self._tracker.owns(self._key):
            raise ValueError(f"{type(self).__name__} is closed")

    def close(self) -> None:
        """Release the handle and what was created from it (a no-op when already released)."""
        self._close()

    def __enter__(self) -> Self:
        """Return self for use in a with block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close on leaving the with block."""
        self.close()


class OwnedHandle(Owned):
    """An :class:`Owned` object wrapping one Level Zero handle, freed by ``destroy(handle)``."""

    _handle: int

    def _own_handle(self, owner: Owner, handle: int, destroy: CFunction) -> None:
        """Keep ``handle`` and register ``destroy(handle)`` as in :meth:`Owned._own`."""
        self._handle = handle
        self._own(owner, destroy, (handle,))

    @property
    def handle(self) -> int:
        """Return the raw Level Zero handle (also after release; see :meth:`live_handle`)."""
        return self._handle

    def live_handle(self) -> int:
        """Return the raw handle for a driver call; raise ValueError once it is released."""
        self._check_open()
        return self._handle

    def _enter(self) -> int:
        """Count a driver call in the context (see :meth:`Tracker.enter`); return the open handle.

        Pair with :meth:`_leave`; closing the context waits until then.
        """
        tracker = self._tracker
        tracker.enter()
        if not tracker.owns(self._key):
            tracker.leave()
            raise ValueError(f"{type(self).__name__} is closed")
        return self._handle

    def _leave(self) -> None:
        """End the call :meth:`_enter` counted."""
        self._tracker.leave()
