# syntax=docker/dockerfile:1
# The tdmcore image: the library, its Cython/Numba kernels and the Kubernetes bridge
# (console script tdmcore-bridge: extender | scheduler | controller | agent).
#
#   docker build -t ghcr.io/tdmcore/tdmcore:0.1.0 .
#
# Stage 1 builds wheels for tdmcore (compiling its Cython extension) and every runtime
# dependency; stage 2 installs them from that directory alone, without compilers.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# pip builds the project in an isolated environment with its declared build requirements
# (setuptools, wheel, Cython, NumPy from pyproject.toml) and puts the tdmcore wheel next
# to the wheels of all its dependencies, the bridge's extra (k8s) included.
RUN pip wheel --no-cache-dir ".[k8s]" -w /wheels

FROM ${PYTHON_IMAGE}
# NUMBA_CPU_NAME=generic: the kernels are compiled for any x86-64 CPU, at build time
# and at run time alike, so that the warm cache below matches every node (an entry that
# does not match is compiled again on first use, as without a warm cache).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    NUMBA_CPU_NAME=generic \
    TDMCORE_WARM_CACHE=/opt/tdmcore/numba-cache \
    MPLCONFIGDIR=/tmp/matplotlib
# Install from the builder's wheels only (--no-index): the runtime stage never reaches
# PyPI, and the wheels are bind-mounted rather than copied, so they add no layer.
# Then compile every kernel the servers use into the warm cache (about a minute here,
# instead of in every new pod: k8s_bridge/warm.py).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels "tdmcore[k8s]" \
 && tdmcore-bridge warm-cache --dir /opt/tdmcore/numba-cache \
 && chmod -R a+rX /opt/tdmcore \
 && groupadd --gid 65532 tdmcore \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin tdmcore
# Kubernetes checks runAsNonRoot against this numeric user.  The site-packages and the
# warm cache are not writable by it: Numba needs a writable cache, $NUMBA_CACHE_DIR (the
# manifests mount an emptyDir at /tmp, which also works with a read-only root
# filesystem); tdmcore-bridge copies $TDMCORE_WARM_CACHE there when it is empty.
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["tdmcore-bridge"]
CMD ["--help"]
