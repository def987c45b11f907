# syntax=docker/dockerfile:1
#
# The reconciler as a container: `reconciler run`, configured from RECONCILER_* environment variables.
#
#   docker build -t paletteai-reconciler --build-arg RECONCILER_COMMIT="$(git rev-parse HEAD)" .
#   docker run -e RECONCILER_REPO=https://git.example.com/platform/compute.git \
#              -e PALETTE_API_KEY -e RECONCILER_WEBHOOK_SECRET -p 9090:9090 paletteai-reconciler
#
# Two stages: the build stage installs the package into a virtual environment, the runtime stage copies
# only that environment, so neither the source tree nor pip's caches end up in the image.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/reconciler
WORKDIR /src
COPY . .
# The build context has no .git: the commit `reconciler --version` prints comes from this argument,
# recorded in the package by setup.py's build step (reconciler/COMMIT); without it, "unknown".
ARG RECONCILER_COMMIT=""
# requirements.lock pins every dependency to the versions CI tested.
RUN /opt/reconciler/bin/pip install -c requirements.lock .

FROM ${PYTHON_IMAGE}
# git: GitPython shells out to it for every fetch and push. openssh-client: ssh:// config repositories.
# ca-certificates: https:// remotes and Palette's API.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# A fixed numeric UID, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
RUN groupadd --system --gid 10001 reconciler \
    && useradd --system --uid 10001 --gid reconciler --home-dir /var/lib/reconciler --create-home \
       --shell /usr/sbin/nologin reconciler

COPY --from=build /opt/reconciler /opt/reconciler

ENV PATH=/opt/reconciler/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/var/lib/reconciler \
    RECONCILER_LISTEN=0.0.0.0:9090 \
    RECONCILER_CACHE_DIR=/var/lib/reconciler/cache

USER 10001:10001
# The cache clone of the config repository lives in the home directory; mount a volume there to keep
# restarts from cloning again.
WORKDIR /var/lib/reconciler
EXPOSE 9090

# No curl in the slim image: Python's standard library does the probe (non-2xx raises, exit 1).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9090/healthz', timeout=4)"]

ENTRYPOINT ["reconciler"]
CMD ["run"]
