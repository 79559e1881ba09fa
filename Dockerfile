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
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    MPLCONFIGDIR=/tmp/matplotlib
# Install from the builder's wheels only (--no-index): the runtime stage never reaches
# PyPI, and the wheels are bind-mounted rather than copied, so they add no layer.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels "tdmcore[k8s]" \
 && groupadd --gid 65532 tdmcore \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin tdmcore
# Kubernetes checks runAsNonRoot against this numeric user.  The site-packages are not
# writable by it: Numba caches compiled kernels under $NUMBA_CACHE_DIR (the manifests
# mount an emptyDir at /tmp, which also works with a read-only root filesystem).
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["tdmcore-bridge"]
CMD ["--help"]
