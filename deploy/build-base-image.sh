#!/usr/bin/env bash
# Build a Debian bookworm base image from Debian packages and import it into podman, for
# machines that cannot pull from a container registry (see README, "Podman").
#
#   deploy/build-base-image.sh [--force]
#
# Result: localhost/pubsub-base:bookworm (override with PUBSUB_BASE_IMAGE) holding python3
# (3.11), python3-venv, ca-certificates and openjdk-17-jre-headless (Spark needs Java 17+).
# deploy/Dockerfile builds on it with --build-arg BASE_IMAGE=localhost/pubsub-base:bookworm.
#
# Idempotent: does nothing when the image exists (unless --force).  The debootstrap takes
# one to a few minutes and needs root, debootstrap and the Debian mirror (DEBIAN_MIRROR).
set -euo pipefail

IMAGE="${PUBSUB_BASE_IMAGE:-localhost/pubsub-base:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
PACKAGES=python3,python3-venv,python3-pip,ca-certificates,openjdk-17-jre-headless,procps
HERE="$(cd "$(dirname "$0")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"

if [[ "${1:-}" != "--force" ]] && podman image exists "$IMAGE"; then
    echo "base image $IMAGE exists; nothing to do (--force rebuilds it)"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is not installed" >&2; exit 1; }

ROOTFS="$(mktemp -d /var/tmp/pubsub-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
start=$(date +%s)
echo "debootstrap $SUITE ($PACKAGES) into $ROOTFS ..."
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" \
    >"$ROOTFS.log" 2>&1 || { tail -30 "$ROOTFS.log" >&2; rm -f "$ROOTFS.log"; exit 1; }
rm -f "$ROOTFS.log"
# Smaller image: no downloaded packages, no documentation.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/*
echo "importing as $IMAGE ..."
tar -C "$ROOTFS" -c . | podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    - "$IMAGE" >/dev/null
echo "base image $IMAGE built in $(( $(date +%s) - start )) s"
