# PostgreSQL 15 with the PgQ extension, for docker-compose.yml.
# The official image already carries the PostgreSQL (PGDG) apt repository,
# which ships postgresql-15-pgq3.
FROM postgres:15-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15-pgq3 \
    && rm -rf /var/lib/apt/lists/*
