#!/usr/bin/env bash
# Build the wheels that deploy/Dockerfile installs (no index inside the build):
#
#   deploy/wheelhouse/deps/      every dependency of pubsub-skipring[analysis]
#   deploy/wheelhouse/project/   pubsub-skipring itself
#
# Uses $PYTHON (default: .venv/bin/python if present, else python3) and its pip
# configuration (index, proxy, certificates).  It must be CPython 3.11 on x86_64/aarch64
# Linux like the image: compiled wheels are built for the interpreter that runs this.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [[ "$version" != "3.11" ]]; then
    echo "build-wheelhouse: $PYTHON is Python $version; the image runs 3.11 (set PYTHON)" >&2
    exit 1
fi
OUT=deploy/wheelhouse
TMP="$(mktemp -d "$ROOT/deploy/.wheelhouse.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
"$PYTHON" -m pip wheel --quiet --wheel-dir "$TMP/all" ".[analysis]" 2> >(grep -v "is ignored: it is neither" >&2)
mkdir -p "$TMP/deps" "$TMP/project"
mv "$TMP"/all/pubsub_skipring-*.whl "$TMP/project/"
mv "$TMP"/all/*.whl "$TMP/deps/"
rm -rf "$OUT"
mkdir -p "$OUT"
mv "$TMP/deps" "$TMP/project" "$OUT/"
echo "wheelhouse: $(ls "$OUT/deps" | wc -l) dependency wheels, $(ls "$OUT/project")"
