# The README's two commands: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install migrate catalog lint bench accuracy clean loadtest

# The development venv holds the runtime and the test tools (requirements-test.txt includes requirements.txt).
$(STAMP): requirements.txt requirements-test.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(BIN)/python manage.py migrate --noinput

catalog: migrate
	$(BIN)/python manage.py loadcatalog

## Start the web app and a Celery worker with embedded beat; Ctrl-C stops both.
## HOST and PORT choose the address: make run PORT=8010 (default 127.0.0.1:8000).
HOST ?= 127.0.0.1
PORT ?= 8000
run: catalog
	$(BIN)/python manage.py collectstatic --noinput -v 0
	VENV=$(VENV) HOST=$(HOST) PORT=$(PORT) bin/run

## Run the whole suite (PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set).
## TEST_PROCESSES: pytest-xdist processes (each its own database, Redis database and broker: tests/xdist_env.py).
## The API schema fuzz runs after them in one process: its last test counts every request the module sent, and
## pytest-xdist neither keeps schemathesis's cases together nor reports each of them under --dist loadfile.
TEST_PROCESSES ?= 2
test: install
	HWPLANNER_BROKER_DIR=var/test-broker $(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist worksteal --ignore=tests/api_fuzz
	HWPLANNER_BROKER_DIR=var/test-broker $(BIN)/python -m pytest tests/api_fuzz

bench: install
	$(BIN)/python manage.py benchplanner

## Load test: gunicorn (2 workers) on a fresh PostgreSQL database + locust (.venv-load); see docs/benchmarks.md.
## Needs PostgreSQL and Redis on 127.0.0.1; ARGS="--scenario reads --duration 30" for one scenario.
loadtest: install
	test -x .venv-load/bin/locust || { $(PYTHON) -m venv .venv-load && .venv-load/bin/python -m pip install --quiet -r benchmarks/requirements-load.txt; }
	.venv-load/bin/python benchmarks/loadtest.py $(ARGS)

clean:
	rm -rf var/test-broker .pytest_cache
