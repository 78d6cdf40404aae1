"""A child process that ends when its parent does, however the parent ended.

Invariant: after `die_with_parent(parent, fd)` returns, this process runs only while
`parent` does. On Linux the kernel sends it SIGKILL when the parent ends
(`prctl(PR_SET_PDEATHSIG)`; strictly, when the parent's thread that started it ends); the
parent may have ended before that was asked, so the process then checks it is still
`parent`'s child and exits at once if not. Everywhere (the portable way, and on Linux a
second line) a watcher thread waits for the pipe `fd` to the parent to close: its read
end closes with the parent, and the process exits then, even in the middle of a parse (as
soon as the watcher gets the interpreter's lock).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
ORPHANED = 3  # the exit status of a process whose parent is gone
_WATCHER_STACK = 256 * 1024  # the watcher needs little; the process's memory is limited
_CLOSED = select.POLLERR | select.POLLHUP | select.POLLNVAL


def die_with_parent(parent: int, fd: int) -> None:
    """Tie this process's life to `parent`'s; `fd` is the write end of a pipe `parent`
    reads. Exits at once when `parent` is already gone."""
    if sys.platform.startswith("linux"):
        _ask_kernel()
    if os.getppid() != parent:
        os._exit(ORPHANED)
    previous = threading.stack_size(_WATCHER_STACK)
    try:
        watcher = threading.Thread(
            target=_exit_when_closed, args=(fd,), name="parent-watch", daemon=True
        )
        watcher.start()
    finally:
        threading.stack_size(previous)


def _ask_kernel() -> None:
    """SIGKILL when the parent ends; without prctl (another libc), the watcher alone."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)


def _exit_when_closed(fd: int) -> None:
    """Block until the pipe `fd` writes to has no reader (or `fd` is gone), then exit."""
    poller = select.poll()
    poller.register(fd, 0)  # no events asked: only an error or a hang-up wakes it
    while True:
        for _, events in poller.poll():
            if events & _CLOSED:
                os._exit(ORPHANED)
