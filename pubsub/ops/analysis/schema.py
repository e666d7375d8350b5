"""The explicit Spark schema of the event stream (docs/events.md), and the checks on rows.

One flat schema covers every kind: each field of each kind is a nullable column, and a
row uses the columns of its kind.  Reading JSON with a fixed schema (never inferred) keeps
a streaming query stable while files arrive and makes bad input visible: a line that is
not JSON, or whose fields have the wrong JSON type, lands in ``_corrupt_record`` and is
counted and dropped.

Two fields are declared as strings holding raw JSON, because their type depends on the
kind or is open-ended (Spark stores any non-string JSON value of a string column as its
JSON text): ``members`` (a list of ``[label, ref]`` in `supervisor` events, an int in
`status_check` events) and ``params`` (an object in `marker` events).
"""

from __future__ import annotations

from typing import Any

#: Column holding the text of a line that did not parse under the schema.
CORRUPT = "_corrupt_record"

#: Event kinds the analysis knows (others are counted as unknown and ignored).
KINDS = frozenset({"snapshot", "supervisor", "messages", "delivery", "marker", "status_check", "repair"})

#: Upper bound for a plausible ``ts`` (Unix seconds; the year 5138).  Larger, negative,
#: NaN or missing timestamps make the event unusable.
MAX_TS = 1e11


def event_schema() -> Any:
    """The `pyspark.sql.types.StructType` of one event line."""
    from pyspark.sql import types as T

    contact = T.ArrayType(T.StringType(), containsNull=True)
    fields = [
        # common
        ("ts", T.DoubleType()),
        ("kind", T.StringType()),
        ("source", T.StringType()),
        ("role", T.StringType()),
        # snapshot (and topic for supervisor, delivery, marker, status_check)
        ("topic", T.StringType()),
        ("member", T.BooleanType()),
        ("leaving", T.BooleanType()),
        ("label", T.StringType()),
        ("left", contact),
        ("right", contact),
        ("ring", contact),
        ("shortcuts", T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)),
        ("neighbours", T.ArrayType(T.StringType(), containsNull=True)),
        ("trie_root", T.StringType()),
        ("trie_size", T.LongType()),
        ("interval", T.LongType()),
        ("reason", T.StringType()),
        # supervisor
        ("n", T.LongType()),
        ("legitimate_database", T.BooleanType()),
        ("members", T.StringType()),  # raw JSON, see the module docstring
        # repair (tco supervisor)
        ("repair", T.StringType()),
        ("node", T.StringType()),
        ("shadow", T.LongType()),
        ("added", T.LongType()),
        ("removed", T.LongType()),
        ("widened", T.BooleanType()),
        ("edges_added", T.LongType()),
        ("edges_removed", T.LongType()),
        ("backups_rebuilt", T.LongType()),
        # messages
        ("sent", T.MapType(T.StringType(), T.LongType(), valueContainsNull=True)),
        ("received", T.MapType(T.StringType(), T.LongType(), valueContainsNull=True)),
        ("bytes_sent", T.LongType()),
        ("bytes_received", T.LongType()),
        ("errors", T.LongType()),
        # delivery
        ("key", T.StringType()),
        ("publisher", T.StringType()),
        ("seq", T.LongType()),
        ("published_ts", T.DoubleType()),
        ("delivered_ts", T.DoubleType()),
        ("via", T.StringType()),
        ("hops", T.LongType()),
        # marker
        ("id", T.StringType()),
        ("action", T.StringType()),
        ("targets", T.ArrayType(T.StringType(), containsNull=True)),
        ("params", T.StringType()),  # raw JSON
        # status_check
        ("legitimate", T.BooleanType()),
        (CORRUPT, T.StringType()),
    ]
    return T.StructType([T.StructField(name, kind, nullable=True) for name, kind in fields])


def problem_column() -> Any:
    """A column naming why a row is unusable ('ok' when it is usable).

    'malformed' (not JSON / wrong types), 'bad_ts', 'unknown_kind', or 'incomplete' (a
    field the analysis needs for this kind is missing).
    """
    from pyspark.sql import functions as F

    c = F.col
    ts_ok = c("ts").isNotNull() & (c("ts") >= 0) & (c("ts") < MAX_TS)
    incomplete = (
        (
            (c("kind") == "snapshot")
            & (c("topic").isNull() | c("source").isNull() | c("member").isNull())
        )
        | (
            (c("kind") == "delivery")
            & (
                c("topic").isNull()
                | c("published_ts").isNull()
                | c("delivered_ts").isNull()
                | (c("published_ts") != c("published_ts"))
                | (c("delivered_ts") != c("delivered_ts"))
            )
        )
        | ((c("kind") == "status_check") & c("topic").isNull())
    )
    return (
        F.when(c(CORRUPT).isNotNull(), F.lit("malformed"))
        .when(~ts_ok, F.lit("bad_ts"))
        .when(c("kind").isNull() | ~c("kind").isin(*sorted(KINDS)), F.lit("unknown_kind"))
        .when(incomplete, F.lit("incomplete"))
        .otherwise(F.lit("ok"))
    )
