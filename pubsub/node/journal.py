"""The store's journal: commits written with one `write` each, settled into SQLite later.

Why (issue 11).  A member at moderate rates commits one publication at a time, and on this
project's 2-core machine a single-row SQLite transaction costs about 30 µs when the process
runs hot but 150-250 µs when it wakes up cold, as every member does for every paced
publication: SQLite's code and pages are no longer in the caches by then.  Skipping that
insert took 10-18% off the CPU a 16-node deployment spends per paced publication
(`docs/measurements/issue11.md`, twentieth round).  So under sync "normal" a commit
appends its rows to this journal -- one `os.write`, which survives the process being killed
just as a write to SQLite's WAL does -- and the store moves them into SQLite in one
transaction every interval or so (`PublicationStore.settle`).

Format.  A header, then frames::

    header:  b"PSJOURN1" + generation (8 bytes, little-endian)
    frame:   length (4 bytes, LE) + CRC-32 (4 bytes, LE) + payload (`length` bytes)

The payload is the msgpack array of one commit's rows (the store's column values).  The
CRC covers the generation and the payload, so a frame left over from an earlier generation
(the file is emptied after each settle) never passes as a current one.  Reading stops at
the first frame that is short, too long or fails its check: the last frame of a process
killed while writing it, whose commit never completed, and whatever follows a damaged one
(`Journal.frames` says how many bytes it ignored).

`Journal` itself only writes and reads frames; what the rows mean is the store's
(`pubsub.node.store`).
"""

from __future__ import annotations

import fcntl
import os
import struct
import zlib
from pathlib import Path

import msgpack

MAGIC = b"PSJOURN1"
_HEADER = struct.Struct("<8sQ")
_FRAME = struct.Struct("<II")
#: The largest frame this module reads back (a commit's rows are far smaller; anything
#: bigger is damage).
MAX_FRAME = 1 << 30

_pack = msgpack.Packer(use_bin_type=True).pack


class JournalError(OSError):
    """The journal could not be written, read or emptied."""


class Journal:
    """One journal file (module docstring), opened for appending."""

    def __init__(self, path: Path) -> None:
        """Open (or create) the journal at `path`, locked against a second store on it."""
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            raise JournalError(f"the journal {path} is in use by another store") from None
        self.generation = 0
        #: Bytes of the file that hold the header and whole frames (where a failed write is cut back to).
        self.size = 0
        #: Bytes at the end of the file that `frames` could not read (a torn or damaged frame).
        self.ignored = 0
        #: A failed write could not be cut back: nothing more is appended until `reset`.
        self.broken = False
        self._start = zlib.crc32(self.generation.to_bytes(8, "little"))

    def frames(self) -> list[list[object]]:
        """The payloads of the current generation's frames, decoded, in order; sets
        `generation` from the header and `ignored` (`read_frames`)."""
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        generation, frames, self.ignored = read_frames(data)
        if generation is not None:
            self.generation = generation
        return frames

    def append(self, rows: list[tuple[object, ...]]) -> None:
        """Write one commit's rows as one frame (JournalError, and the file as it was, on failure)."""
        if self.broken:
            raise JournalError(
                f"cannot write the journal {self.path}: an earlier write or emptying of it failed"
                " (the next settle empties it)"
            )
        payload = _pack(rows)
        frame = _FRAME.pack(len(payload), zlib.crc32(payload, self._start)) + payload
        try:
            written = os.write(self._fd, frame)
        except OSError as exc:
            self._cut_back()
            raise JournalError(exc.errno, f"cannot write the journal {self.path}: {exc.strerror}") from None
        if written != len(frame):
            self._cut_back()
            raise JournalError(f"cannot write the journal {self.path}: {written} of {len(frame)} bytes written")
        self.size += written

    def reset(self) -> None:
        """Empty the journal and start the next generation (after its rows were settled)."""
        self.generation += 1
        self._start = zlib.crc32(self.generation.to_bytes(8, "little"))
        try:
            os.ftruncate(self._fd, 0)
            header = _HEADER.pack(MAGIC, self.generation)
            if os.write(self._fd, header) != len(header):
                raise OSError(0, "the header was written in part")
        except OSError as exc:
            self.broken = True  # frames after a missing header could never be read back
            raise JournalError(exc.errno, f"cannot empty the journal {self.path}: {exc.strerror}") from None
        self.size = len(header)
        self.ignored = 0
        self.broken = False

    def _cut_back(self) -> None:
        """Drop a frame written in part, so that the next one follows the last whole frame."""
        try:
            os.ftruncate(self._fd, self.size)
        except OSError:
            self.broken = True  # a frame after the torn one could never be read back

    def close(self) -> None:
        os.close(self._fd)


def read_frames(data: bytes) -> tuple[int | None, list[list[object]], int]:
    """What a journal's bytes hold: (its generation, or None without a valid header; the
    payloads of that generation's frames, decoded, in order; how many bytes at the end
    could not be read).  Changes nothing (a reader of another process's journal may use it)."""
    if len(data) < _HEADER.size:
        return None, [], len(data)
    magic, generation = _HEADER.unpack_from(data)
    if magic != MAGIC:
        return None, [], len(data)
    start = zlib.crc32(generation.to_bytes(8, "little"))
    out: list[list[object]] = []
    at = _HEADER.size
    while at + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, at)
        body = data[at + _FRAME.size : at + _FRAME.size + length]
        if length > MAX_FRAME or len(body) != length or zlib.crc32(body, start) != crc:
            break
        try:
            rows = msgpack.unpackb(body, raw=False, strict_map_key=True)
        except Exception:  # noqa: BLE001 - a frame that passed its check but does not decode is damage
            break
        if type(rows) is not list:
            break
        out.append(rows)
        at += _FRAME.size + length
    return generation, out, len(data) - at
