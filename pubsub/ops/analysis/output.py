"""Writing the job's results: Parquet tables and summary.json, each file atomically.

Every file is written to a temporary name in the same directory and renamed into place
(`os.replace`), so a reader polling the output directory while a live analysis runs sees
either the previous complete file or the new complete file, never a partial one.  The
tables are small aggregates collected on the driver, each written as one Parquet file
(pyarrow) with a fixed schema, so that an empty table still has its columns.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: Column types of every table (pyarrow type names; built lazily in `_schema`).
TABLES: dict[str, list[tuple[str, str]]] = {
    "convergence_timeline": [
        ("topic", "string"),
        ("bucket", "int32"),
        ("t_start", "float64"),
        ("t_end", "float64"),
        ("ts_end", "float64"),
        ("members", "int32"),
        ("legitimate", "bool"),
        ("legitimate_fraction", "float64"),
        ("correct_fraction", "float64"),
        ("correct_edges", "int64"),
        ("compared_edges", "int64"),
        ("exact_nodes", "int32"),
        ("labels_ok", "bool"),
        ("roots_equal", "bool"),
        ("mean_degree", "float64"),
        ("max_degree", "int32"),
    ],
    "legitimacy_changes": [
        ("topic", "string"),
        ("ts", "float64"),
        ("t", "float64"),
        ("members", "int32"),
        ("legitimate", "bool"),
        ("labels_ok", "bool"),
        ("roots_equal", "bool"),
        ("exact_nodes", "int32"),
        ("correct_edges", "int64"),
        ("compared_edges", "int64"),
        ("mean_degree", "float64"),
        ("max_degree", "int32"),
    ],
    "convergence_times": [
        ("marker_id", "string"),
        ("action", "string"),
        ("topic", "string"),
        ("marker_ts", "float64"),
        ("marker_t", "float64"),
        ("reached", "bool"),
        ("legitimate_ts", "float64"),
        ("time_to_legitimacy", "float64"),
    ],
    "latency_quantiles": [
        ("topic", "string"),
        ("delivery", "string"),
        ("via", "string"),
        ("count", "int64"),
        ("mean", "float64"),
        ("min", "float64"),
        ("p50", "float64"),
        ("p90", "float64"),
        ("p99", "float64"),
        ("max", "float64"),
    ],
    "latency_cdf": [
        ("topic", "string"),
        ("delivery", "string"),
        ("via", "string"),
        ("fraction", "float64"),
        ("latency", "float64"),
    ],
    "degree_distribution": [
        ("topic", "string"),
        ("degree", "int32"),
        ("nodes", "int32"),
        ("ideal_nodes", "int32"),
    ],
    "message_rates": [
        ("bucket", "int32"),
        ("t_start", "float64"),
        ("t_end", "float64"),
        ("role", "string"),
        ("direction", "string"),
        ("kind", "string"),
        ("frames", "int64"),
        ("frames_per_second", "float64"),
    ],
    "supervisor_intervals": [
        ("ts", "float64"),
        ("t", "float64"),
        ("source", "string"),
        ("interval", "int64"),
        ("sent", "int64"),
        ("received", "int64"),
        ("bytes_sent", "int64"),
        ("bytes_received", "int64"),
        ("errors", "int64"),
    ],
    "repairs": [
        ("ts", "float64"),
        ("t", "float64"),
        ("repair", "string"),
        ("node", "string"),
        ("shadow", "int64"),
        ("added", "int64"),
        ("removed", "int64"),
        ("widened", "bool"),
    ],
    "status_checks": [
        ("topic", "string"),
        ("ts", "float64"),
        ("t", "float64"),
        ("runner_legitimate", "bool"),
        ("runner_members", "int64"),
        ("analysis_legitimate", "bool"),
        ("analysis_members", "int32"),
        ("agree", "bool"),
    ],
    "markers": [
        ("id", "string"),
        ("action", "string"),
        ("topic", "string"),
        ("ts", "float64"),
        ("t", "float64"),
        ("targets", "list<string>"),
    ],
}


def _schema(name: str) -> Any:
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "list<string>": pa.list_(pa.string()),
    }
    return pa.schema([(col, types[kind]) for col, kind in TABLES[name]])


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write a file through ``write(fileobj)`` into a temporary sibling, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically."""

    def write(f: IO[bytes]) -> None:
        f.write(data)

    atomic_write(path, write)


def clean_json(value: Any) -> Any:
    """Replace non-finite floats by None, recursively (JSON has no NaN/inf)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    return value


def write_json(path: Path, value: Any) -> None:
    text = json.dumps(clean_json(value), indent=2, sort_keys=False, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode())


def write_table(path: Path, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """One table as a single Parquet file with its fixed schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema(name)
    columns = [field.name for field in schema]
    table = pa.Table.from_pylist(
        [{c: _cell(row.get(c)) for c in columns} for row in rows], schema=schema
    )
    atomic_write(path, lambda f: pq.write_table(table, f))


def _cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_table(path: Path) -> list[dict[str, Any]]:
    """A table written by `write_table`, as a list of rows (for tests and the runner)."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()
