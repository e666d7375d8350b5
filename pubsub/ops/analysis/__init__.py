"""The convergence analysis of a run's event stream (issue 5): `pubsub analyze`.

    timeline.py   one topic's state over time: steps, buckets, time to legitimacy, measured
                  by the run's overlay's `TopicTracker` (`Overlay.topic_tracker`) — pure
    schema.py     the explicit Spark schema of docs/events.md, and row checks
    session.py    the Spark session (local[2], quiet, no UI)
    javacheck.py  Java 17+ for Spark, or a clear error
    job.py        the Structured Streaming job (batch = availableNow, live = processing time)
    output.py     Parquet tables and summary.json, written atomically
    report.py     PNG plots (matplotlib Agg) and report.html
    cli.py        the `pubsub analyze` command (also what spark-submit runs via job.py)

Only job.py, session.py and schema.py import pyspark, and only when called.
"""
