"""Data directories of the daemons: created on demand, checked writable, held by one daemon
at a time (`held_data_dir`), one-line errors; and `StoreError`, which every daemon's durable
store raises."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The file a daemon locks in its data directory (it holds the daemon's pid).
LOCK_NAME = "daemon.lock"


class StoreError(RuntimeError):
    """A durable store (a node's publications, the supervisor's database) cannot be opened,
    read or written; the message is one line for the operator."""


def prepare_data_dir(directory: Path, error: type[Exception]) -> Path:
    """Create `directory` if needed and make sure we may write there; else raise `error`."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"cannot create data directory {directory}: {exc.strerror or exc}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise error(f"data directory {directory} is not writable")
    return directory


@contextmanager
def held_data_dir(directory: Path | None, error: type[Exception]) -> Iterator[None]:
    """Hold `directory` for this process while the block runs (an exclusive `flock` on its
    `LOCK_NAME`, which the kernel releases if the process dies); `error` if another process
    holds it.  Two daemons on one data directory would write the same store (and a newer
    version would convert it under an older one).  None: nothing to hold."""
    if directory is None:
        yield
        return
    prepare_data_dir(directory, error)
    try:
        fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise error(f"cannot open {directory / LOCK_NAME}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 20, 0).decode("ascii", "replace").strip()
            by = f" (pid {holder})" if holder.isdigit() else ""
            raise error(
                f"data directory {directory} is in use by another process{by}: one daemon per data directory"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
