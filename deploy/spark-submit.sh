#!/usr/bin/env bash
# Run the convergence analysis through spark-submit (local by default, or a cluster).
#
#   deploy/spark-submit.sh RUN_DIR [pubsub analyze options: --stream, --out DIR, ...]
#
# Environment:
#   SPARK_MASTER       master URL (default local[2]; e.g. spark://host:7077, yarn)
#   SPARK_SUBMIT       the spark-submit to use (default: the one next to the project's
#                      venv python, installed with pyspark, else spark-submit on PATH)
#   PYSPARK_PYTHON     Python for the driver and the executors (default: the venv's python);
#                      on a cluster, a Python with pyspark on every executor host
#   SPARK_SUBMIT_ARGS  extra arguments for spark-submit (e.g. "--conf spark.executor.memory=2g")
#
# The package is shipped to the executors with --py-files (a zip of pubsub/); the driver
# needs the `analysis` extra (pyspark, matplotlib, pyarrow).  On a cluster, --out and
# --work-dir must be directories the driver can write and the executors can read.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
python=${PYSPARK_PYTHON:-}
if [[ -z $python ]]; then
    if [[ -x $here/.venv/bin/python ]]; then python=$here/.venv/bin/python; else python=$(command -v python3); fi
fi
export PYSPARK_PYTHON=$python PYSPARK_DRIVER_PYTHON=${PYSPARK_DRIVER_PYTHON:-$python}
submit=${SPARK_SUBMIT:-}
if [[ -z $submit ]]; then
    if [[ -x $(dirname "$python")/spark-submit ]]; then submit=$(dirname "$python")/spark-submit
    else submit=$(command -v spark-submit || true); fi
fi
[[ -n $submit ]] || { echo "error: spark-submit not found (pip install -e '.[analysis]' or set SPARK_SUBMIT)" >&2; exit 1; }

# Fail early, with one line, when Java is missing or older than 17; quiet Spark's logs.
PYTHONPATH=$here "$python" -m pubsub.ops.analysis.javacheck >/dev/null
log4j=$(PYTHONPATH=$here "$python" -c 'from pubsub.ops.analysis.session import log_config_path; print(log_config_path())')

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$here" && "$python" - "$scratch/pubsub.zip" <<'PY'
import sys, zipfile, pathlib
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for path in sorted(pathlib.Path("pubsub").rglob("*.py")):
        z.write(path)
PY
)

master=${SPARK_MASTER:-local[2]}
extra=()
if [[ $master == local* ]]; then
    export SPARK_LOCAL_IP=${SPARK_LOCAL_IP:-127.0.0.1}
    extra+=(--conf spark.driver.bindAddress=127.0.0.1 --conf spark.driver.host=127.0.0.1)
fi
# shellcheck disable=SC2086  # SPARK_SUBMIT_ARGS is split on purpose
"$submit" --master "$master" --name pubsub-analyze \
    --driver-java-options "-Dlog4j2.configurationFile=file:$log4j" \
    --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false \
    --conf spark.sql.shuffle.partitions=2 "${extra[@]}" ${SPARK_SUBMIT_ARGS:-} \
    --py-files "$scratch/pubsub.zip" "$here/pubsub/ops/analysis/submit.py" "$@"
