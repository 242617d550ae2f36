# Every target builds .venv from nothing when it is missing; nothing is installed by hand.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 3000
# pytest-xdist workers of `make test`: three on two cores, because much of the suite waits (the backfill daemon's
# fixed loop, sensor ticks, run processes starting, dbt and server children), so a third keeps the cores busy
# (measured in benchmarks/README.md). Groups go out in the suite's order (tests/conftest.py puts the longest first), not
# pytest-xdist's default of the groups with the most tests first, which left the Spark modules (one or two tests each,
# the longest) to the end. It lists its 40 slowest tests at the end, to show where CI time goes.
TEST_WORKERS ?= 3

# Offline operation: no usage tracking, Dagster state kept inside the project.
export DO_NOT_TRACK := 1
export DBT_SEND_ANONYMOUS_USAGE_STATS := False
export DAGSTER_HOME := $(CURDIR)/.dagster_home

.PHONY: setup services browser run test dev dashboard screenshots lint bench docs clean spark-env

# uv installs the pinned set (constraints.txt) in a fifth of pip's time, from the same registry; pip brings uv itself.
# Bytecode is compiled at install, as pip does: uv does not by default, and where PYTHONDONTWRITEBYTECODE is set (as on
# CI) every dbt, Dagster and test process would otherwise compile dbt's and Dagster's sources again on import.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt -e ".[dev]"
	@touch $(STAMP)

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	@mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

setup: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	@$(BIN)/logistics-platform setup

run: setup
	$(BIN)/logistics-platform generate --if-absent
	$(BIN)/logistics-platform run

# The PostgreSQL catalog tests need the local server; start it when this machine has one that is down.
services:
	@if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then \
		echo "starting PostgreSQL"; \
		pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql | head -1) main start; \
		for i in $$(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done; \
	fi

# The dashboard's browser test drives Debian's Chromium (Playwright never downloads a browser here).
browser:
	@command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# Style and types first: a lint failure costs seconds, the suite minutes. The Spark venv builds meanwhile (pip and
# mypy each keep one core busy), rather than inside a test worker of the suite.
test: services browser
	@$(MAKE) --no-print-directory -j2 lint spark-env
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=40 tests

dev: setup
	$(BIN)/dagster dev -w workspace.yaml -h $(HOST) -p $(PORT)

# The operations dashboard on http://127.0.0.1:$${DASHBOARD_PORT:-8501} (see docs/dashboard.md).
dashboard: setup
	$(BIN)/logistics-platform dashboard

# docs/img/dashboard-*.png from the demo data, built aside (see the script).
screenshots: setup browser
	PYTHONPATH=$(CURDIR) $(BIN)/python scripts/dashboard_screenshots.py

lint: setup
	$(BIN)/ruff check logistics_platform tests benchmarks scripts
	$(BIN)/ruff format --check logistics_platform tests benchmarks scripts
	$(BIN)/mypy logistics_platform

# Spark 3.5 + Iceberg's runtime in their own venv (.venv-spark), for the test in which Spark reads our tables.
spark-env:
	bash scripts/spark_env.sh

bench: setup
	$(BIN)/python benchmarks/run_all.py

docs: setup
	$(BIN)/logistics-platform dbt docs generate

clean:
	rm -rf $(VENV) .venv-spark .venv-spark.lock landing .dagster_home dbt_project/target dbt_project/logs benchmarks/.work
	find iceberg_warehouse -mindepth 1 ! -name README.md -exec rm -rf {} +
