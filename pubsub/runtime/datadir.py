"""Data directories of the daemons: created on demand, checked writable, one-line errors;
and `StoreError`, which every daemon's durable store raises."""

from __future__ import annotations

import os
from pathlib import Path


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
