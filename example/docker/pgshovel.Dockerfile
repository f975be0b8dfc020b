# syntax=docker/dockerfile:1
# pgshovel's images for docker-compose.yml. Build context: the repository root.
# Two targets, each built once by docker-compose.yml:
#   relay   pgshovel-admin, pgshovel-relay and the example workload: Python
#           and libpq only (pip install pgshovel), no Java, no Spark.
#   worker  the relay image plus Java 17 and the spark extra (PySpark, pyarrow,
#           pandas) for pgshovel-replicate (pip install 'pgshovel[spark]').
# The protocol modules are committed, so no protoc is needed.

# Wheels of pgshovel and every dependency; the compiler psycopg2 needs stays here.
FROM python:3.11-slim-bookworm AS wheels
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libpq-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY setup.py pyproject.toml README.md ./
COPY pgshovel pgshovel
COPY sql sql
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[spark]'

FROM python:3.11-slim-bookworm AS relay
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 \
    && rm -rf /var/lib/apt/lists/*
# The wheels are mounted, not copied: they never become a layer of this image.
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels pgshovel
# The example package (python -m example.workload) is imported from here.
WORKDIR /opt/pgshovel
COPY example example
ENV PYTHONPATH=/opt/pgshovel

FROM relay AS worker
# The man directory is missing in slim images; the JRE's postinst needs it.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels 'pgshovel[spark]'
