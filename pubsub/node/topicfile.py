"""The node's durable set of wanted topics (``<data>/topics.json``), rewritten atomically
(temporary file, fsync, rename) whenever the set changes, and joined again at start."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from pubsub.kernel.message import Topic
from pubsub.kernel.wire import WireError, validate_topic
from pubsub.runtime.datadir import StoreError, prepare_data_dir

log = logging.getLogger(__name__)

TOPICS_FILE = "topics.json"
#: Layout version of the file (its "format" field).
TOPICS_FORMAT = 1


class TopicFileError(StoreError):
    """The topics file cannot be read or written; the message is one line for the operator."""


class TopicFile:
    """The durable set of wanted topics, one JSON document written atomically."""

    def __init__(self, data_dir: Path | str) -> None:
        self.dir = prepare_data_dir(Path(data_dir), TopicFileError)
        self.path = self.dir / TOPICS_FILE

    def load(self) -> set[Topic]:
        """The stored topics (empty when there is no file yet); invalid entries are skipped."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return set()
        except OSError as exc:
            raise TopicFileError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        try:
            doc = json.loads(text)
            entries = doc["topics"]
            if not isinstance(entries, list):
                raise TypeError("'topics' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            raise TopicFileError(f"{self.path} is not a topics file: {exc}") from None
        topics: set[Topic] = set()
        for entry in entries:
            try:
                topics.add(validate_topic(entry))
            except WireError as exc:
                log.warning("%s: skipping invalid topic %r: %s", self.path, entry, exc.detail)
        return topics

    def save(self, topics: set[Topic]) -> None:
        """Replace the file with `topics` (temporary file, fsync, rename, fsync directory)."""
        doc = {"format": TOPICS_FORMAT, "topics": sorted(topics)}
        tmp = self.path.with_name(f".{TOPICS_FILE}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f, ensure_ascii=False, indent=1)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise TopicFileError(f"cannot write {self.path}: {exc.strerror or exc}") from None
