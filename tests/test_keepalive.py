"""The keep-alive list both backends hold pending work's objects in (l0mem.keepalive)."""

from __future__ import annotations

import gc
import weakref

from l0mem.keepalive import KeepAlive


class _Op:
    """A stand-in for an enqueued operation the test completes by hand."""

    def __init__(self) -> None:
        self.finished = False
        self.checks = 0

    def done(self) -> bool:
        self.checks += 1
        return self.finished


class _Obj:
    """Something weak-referenceable to watch being released."""


def test_objects_live_until_their_operation_completes() -> None:
    keep = KeepAlive()
    op = _Op()
    obj = _Obj()
    alive = weakref.ref(obj)
    keep.add(op.done, [obj])
    del obj
    gc.collect()
    assert alive() is not None and keep.holds(alive()) and len(keep) == 1
    keep.prune()
    assert alive() is not None, "an incomplete operation keeps its objects"
    op.finished = True
    keep.prune()
    gc.collect()
    assert alive() is None and len(keep) == 0


def test_adding_drops_what_has_completed() -> None:
    keep = KeepAlive()
    first, second = _Op(), _Op()
    a, b = _Obj(), _Obj()
    keep.add(first.done, [a])
    first.finished = True
    keep.add(second.done, [b])
    assert not keep.holds(a) and keep.holds(b) and len(keep) == 1
    assert first.checks == 1, "a dropped pair is not checked again"


def test_forget_drops_one_operation_and_clear_drops_all() -> None:
    keep = KeepAlive()
    ops = [_Op() for _ in range(3)]
    objs = [_Obj() for _ in range(3)]
    for i, (op, obj) in enumerate(zip(ops, objs, strict=True)):
        keep.add(op.done, [obj], key=i)
    keep.forget(1)
    assert [keep.holds(o) for o in objs] == [True, False, True]
    keep.forget(7)  # an unknown key is fine
    assert len(keep) == 2
    keep.clear()
    assert len(keep) == 0 and not any(keep.holds(o) for o in objs)


def test_holds_is_by_identity() -> None:
    keep = KeepAlive()
    data = bytearray(b"abc")
    keep.add(_Op().done, [data])
    assert keep.holds(data)
    assert not keep.holds(bytearray(b"abc"))
