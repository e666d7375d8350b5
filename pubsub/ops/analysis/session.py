"""Creating the Spark session for the analysis: local mode by default, quiet, small.

Defaults suit a 2-core machine: ``local[2]``, 2 shuffle partitions, no web UI, no console
progress bars, logs at ERROR (with the root logger at ERROR too, Spark does not announce the
log level it chose on stderr).  In local mode the driver binds to
127.0.0.1.  Under ``spark-submit`` the JVM already exists: the master and every setting
given to spark-submit win, and only what was not set there is filled in here.

The JVM we start compiles with C1 only (`QUICK_JIT`): the job is many small Spark jobs over
a few MB of events, where the optimising compiler's work never pays back.  Measured on
this 2-core machine (`pubsub analyze`, two runs each way, interleaved): 2.3 MB of events
52 s → 40 s, 14 MB 59–62 s → 48 s.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from pubsub.ops.analysis.javacheck import ensure_java

DEFAULT_MASTER = "local[2]"
#: The driver JVM's compiler setting when we start it (module docstring).
QUICK_JIT = "-XX:TieredStopAtLevel=1"

_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.sparkproject.name = org.sparkproject
logger.sparkproject.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""


def under_spark_submit() -> bool:
    """True when this Python driver was started by spark-submit (the JVM is already up)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def log_config_path() -> Path:
    """A log4j2 configuration (every logger at ERROR), written once per user."""
    path = Path(tempfile.gettempdir()) / f"pubsub-analysis-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        os.replace(tmp, path)
    return path


def create_session(
    master: str | None = None, shuffle_partitions: int = 2, app_name: str = "pubsub-analyze"
) -> Any:
    """A SparkSession for the job (raises `JavaError` first when Java is unusable)."""
    submitted = under_spark_submit()
    if not submitted:
        ensure_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    chosen = master or (None if submitted else DEFAULT_MASTER)
    local = chosen is not None and chosen.startswith("local")
    builder = SparkSession.builder.appName(app_name)
    if chosen is not None:
        builder = builder.master(chosen)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        # the job's queries are many and tiny: adaptive re-planning only adds jobs
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    }
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
    if not submitted:
        settings["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile=file:{log_config_path()} {QUICK_JIT}"
        )
    if submitted:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # connects to spark-submit's JVM
        given = SparkConf()
        settings = {k: v for k, v in settings.items() if not given.contains(k)}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
