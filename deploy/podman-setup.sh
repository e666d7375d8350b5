#!/usr/bin/env bash
# Prepare this machine to run docker-compose.yml with podman (README, "Podman"); what
# tests/ops/test_compose.py runs before it brings the cluster up.  Idempotent and cached:
#
#   1. podman, runc, debootstrap (apt-get, as root) and podman-compose (pip, into $PYTHON)
#      -- only when missing;
#   2. the base image localhost/pubsub-base:bookworm (deploy/build-base-image.sh: a
#      debootstrap, 1-2 minutes) -- only when missing;
#   3. localhost/pubsub-prometheus:bookworm (deploy/prometheus.Dockerfile) -- only when missing;
#   4. the wheelhouse and the image $PUBSUB_IMAGE (deploy/Dockerfile) -- only when the
#      sources it is built from changed: the image carries their hash as a label.
#
# Exit status: 0 ready; 77 podman cannot be installed or run on this machine (the reason
# is the last line on stderr; the compose test skips with it); anything else: a failure.
# Uses deploy/containers.conf unless CONTAINERS_CONF is set.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/deploy/containers.conf}"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHON
IMAGE="${PUBSUB_IMAGE:-localhost/pubsub-skipring:latest}"
BASE_IMAGE="${PUBSUB_BASE_IMAGE:-localhost/pubsub-base:bookworm}"
PROMETHEUS_LOCAL="${PUBSUB_PROMETHEUS_LOCAL_IMAGE:-localhost/pubsub-prometheus:bookworm}"
export PUBSUB_BASE_IMAGE="$BASE_IMAGE"

unavailable() {
    echo "podman cannot be used on this machine: $*" >&2
    exit 77
}
step() { echo "podman-setup: $*"; }
started=$(date +%s)

# One setup at a time (two test runs, or a test run and an operator).
exec 9>"${PUBSUB_SETUP_LOCK:-/var/tmp/pubsub-podman-setup.lock}"
if command -v flock >/dev/null; then
    flock -w 1800 9 || { echo "podman-setup: another setup held the lock for 30 min" >&2; exit 1; }
fi

# --- 1. tools --------------------------------------------------------------------------------
missing=()
for tool in podman runc debootstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    [[ "$(uname -s)" == Linux ]] || unavailable "not Linux"
    [[ "$(id -u)" == 0 ]] || unavailable "${missing[*]} missing and not root (apt-get install podman runc debootstrap)"
    command -v apt-get >/dev/null || unavailable "${missing[*]} missing and no apt-get"
    step "installing ${missing[*]} (apt-get) ..."
    log="$(mktemp)"
    if ! { apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
            podman runc debootstrap; } >"$log" 2>&1; then
        tail -5 "$log" >&2
        rm -f "$log"
        unavailable "apt-get install podman runc debootstrap failed"
    fi
    rm -f "$log"
fi
if ! "$PYTHON" -c 'import podman_compose' 2>/dev/null; then
    step "installing podman-compose into $PYTHON ..."
    "$PYTHON" -m pip install --quiet podman-compose 2> >(grep -v "is ignored: it is neither" >&2) \
        || unavailable "pip install podman-compose failed"
fi
podman info >/dev/null 2>&1 || unavailable "\`podman info\` fails (CONTAINERS_CONF=$CONTAINERS_CONF)"

# --- 2. base image ---------------------------------------------------------------------------
if ! podman image exists "$BASE_IMAGE"; then
    step "building $BASE_IMAGE (debootstrap; first time only, 1-2 minutes) ..."
    deploy/build-base-image.sh
fi
podman run --rm "$BASE_IMAGE" true 2>/dev/null \
    || unavailable "podman cannot run a container (podman run $BASE_IMAGE true)"

# --- 3. Prometheus from Debian's package -----------------------------------------------------
if ! podman image exists "$PROMETHEUS_LOCAL"; then
    step "building $PROMETHEUS_LOCAL (first time only) ..."
    podman build --quiet -f deploy/prometheus.Dockerfile --build-arg "BASE_IMAGE=$BASE_IMAGE" \
        -t "$PROMETHEUS_LOCAL" . >/dev/null
fi

# --- 4. the project's image, rebuilt when its sources change ---------------------------------
source_hash="$("$PYTHON" - <<'EOF'
import hashlib
from pathlib import Path

digest = hashlib.sha256()
files = [Path("pyproject.toml"), Path("deploy/Dockerfile"), Path("deploy/entrypoint.py")]
for package in ("pubsub", "broker"):
    if Path(package).is_dir():
        files += [p for p in Path(package).rglob("*") if p.is_file()
                  and "__pycache__" not in p.parts and p.suffix != ".pyc"]
for path in sorted(files):
    digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
print(digest.hexdigest()[:32])
EOF
)"
current="$(podman image inspect --format '{{ index .Labels "pubsub.source-hash" }}' "$IMAGE" 2>/dev/null || true)"
if [[ "$current" != "$source_hash" ]]; then
    step "building $IMAGE (sources $source_hash) ..."
    deploy/build-wheelhouse.sh
    t0=$(date +%s)
    podman build --quiet -f deploy/Dockerfile --build-arg "BASE_IMAGE=$BASE_IMAGE" \
        --label "pubsub.source-hash=$source_hash" -t "$IMAGE" . >/dev/null
    step "image built in $(( $(date +%s) - t0 )) s"
    # (no `podman image prune`: it would drop the cached dependency layers, which make
    # the next rebuild take seconds instead of minutes)
else
    step "$IMAGE is up to date (sources $source_hash)"
fi
step "ready in $(( $(date +%s) - started )) s: $(podman --version), $("$PYTHON" -m podman_compose --version 2>/dev/null | head -1)"
