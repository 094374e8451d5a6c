# py-scheduler's container image: `make image` (docker build -t py-scheduler:dev .).
#
# Two stages. The builder makes a venv at /opt/py-scheduler and installs the pinned
# dependencies from requirements.lock (wheels only: the slim image has no compiler and needs
# none), then py-scheduler itself without resolving anything (--no-deps), and `pip check`
# proves the lock satisfies pyproject.toml. The final stage is the same Python base with only
# that venv copied in (same path: a venv is not relocatable), running as UID 10001.
#
# BASE_IMAGE: any Debian-like image with Python >= 3.11 as `python` (python3-venv included).
# `make image` (hack/image.sh) passes the public python:3.11-slim when it can be pulled and
# otherwise a Debian bookworm + python3 base it builds itself with debootstrap. The classic
# builder is enough (no BuildKit-only syntax), so no frontend image has to be pulled.
#
# tests/deploy/test_image_install.py runs the builder's RUN steps verbatim in a clean temp
# venv (no Docker needed), so keep every path in them behind $VIRTUAL_ENV or relative.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS builder
# Unset unless given: `make image` sets PIP_NO_INDEX=1 and PIP_FIND_LINKS to the wheels it
# downloaded on the host (with the host's pip settings: proxy, CAs) and serves on loopback.
ARG PIP_FIND_LINKS
ARG PIP_NO_INDEX
ENV VIRTUAL_ENV=/opt/py-scheduler \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_NO_INPUT=1
WORKDIR /src
RUN python -m venv "$VIRTUAL_ENV"
# Dependencies first, from the lock alone: this layer is rebuilt only when the lock changes.
COPY requirements.lock ./
RUN "$VIRTUAL_ENV/bin/pip" install --only-binary=:all: --requirement requirements.lock
# Then py-scheduler (the context is filtered by .dockerignore: package source and metadata).
COPY . ./
RUN "$VIRTUAL_ENV/bin/pip" install --no-deps . \
 && "$VIRTUAL_ENV/bin/pip" check \
 && "$VIRTUAL_ENV/bin/python" -m pip uninstall --yes pip setuptools \
 && "$VIRTUAL_ENV/bin/python" -c "import scheduler.operator, scheduler.kube.live" \
 && "$VIRTUAL_ENV/bin/py-scheduler" version

FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="py-scheduler" \
      org.opencontainers.image.description="A secondary Kubernetes scheduler in Python with kube-scheduler's priority and preemption semantics" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
COPY --from=builder /opt/py-scheduler /opt/py-scheduler
# UID 10001 has no passwd entry: getpass.getuser() (kopf's peering identity) reads $USER.
ENV PATH=/opt/py-scheduler/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    USER=py-scheduler
# Numeric, so that Kubernetes' runAsNonRoot can verify it (no passwd entry is needed).
USER 10001:10001
# /healthz, /readyz and /metrics (httpPort in the configuration).
EXPOSE 10260
ENTRYPOINT ["py-scheduler", "run"]
