"""Running part of a test as another user (test support only).

Root reads every process and ignores file modes, so a test of what another
user's process or an unreadable file does to l0mem runs that part in a fork
that became ``nobody``; as any other user it runs as that user.
"""

from __future__ import annotations

import os
from collections.abc import Callable

NOBODY = 65534


def as_other_user(fn: Callable[[], str]) -> str:
    """Return ``fn()`` run as this user, or (when root) in a fork that became nobody."""
    if os.geteuid() != 0:
        return fn()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = fn()
        except BaseException as e:  # any failure is the parent's to report
            out, code = f"child failed: {type(e).__name__}: {e}", 1
        os.write(write, out.encode())
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        text = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, text
    return text
