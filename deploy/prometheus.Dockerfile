# Prometheus from Debian's package, for machines that cannot pull prom/prometheus (podman
# here).  Built on the base image that deploy/build-base-image.sh makes:
#
#   podman build -f deploy/prometheus.Dockerfile -t localhost/pubsub-prometheus:bookworm .
#   PROMETHEUS_IMAGE=localhost/pubsub-prometheus:bookworm podman-compose up -d
#
# Its entry point is the prometheus binary, as in the official image, so docker-compose.yml
# passes the same arguments to either.
ARG BASE_IMAGE=localhost/pubsub-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
