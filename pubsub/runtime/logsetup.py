"""Where the daemons' and commands' log lines go, and in which format: stderr, as text or
as JSON lines (`pubsub --log-format json`, ``PUBSUB_LOG_FORMAT=json``, or ``log_format``
in a daemon's configuration file).

A JSON line is one object: ``ts`` (Unix seconds), ``time`` (ISO 8601, UTC), ``level``,
``logger``, ``message``, ``pid``, and ``exc`` (the formatted traceback) when there is one
-- what log shippers (journald's JSON output, Loki, Elasticsearch) take without parsing.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 6),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str, fmt: str = "text") -> None:
    """Send log records of `level` and above to stderr in `fmt` (``text`` or ``json``),
    replacing whatever handlers the root logger had; ValueError for an unknown level or format."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    if fmt.lower() not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt.lower() == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
