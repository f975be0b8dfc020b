# pgshovel's commands (pgshovel-admin, pgshovel-relay, pgshovel-replicate) and
# the example workload, for docker-compose.yml. Build context: the repository root.
FROM python:3.11-slim-bookworm
# Java 17 runs Spark for pgshovel-replicate; libpq-dev and gcc build psycopg2;
# protoc generates the protocol modules (they are build output, not in git).
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless libpq-dev gcc protobuf-compiler \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/pgshovel
COPY . .
RUN protoc -Iproto --python_out=. --pyi_out=. proto/pgshovel/protocol/*.proto \
    && pip install --no-cache-dir .
# The example package (python -m example.workload) is imported from here.
ENV PYTHONPATH=/opt/pgshovel
