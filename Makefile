# The two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# Where `make run` serves the console (`make run PORT=8001`) and the MCP endpoint for remote
# agents (http://$(HOST):$(MCP_PORT)/mcp).
HOST ?= 127.0.0.1
PORT ?= 8000
MCP_PORT ?= 8100

.PHONY: install run reset test demo lint bench clean screenshots

$(BIN)/.installed: requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	touch $@

install: $(BIN)/.installed

## Set everything up and serve the console on SQLite with demo data at http://$(HOST):$(PORT),
## with a background worker (after-action reviews, the periodic curation scan) and the MCP server
## for remote agents (Streamable HTTP at http://$(HOST):$(MCP_PORT)/mcp) beside it
# OAuth for agents (docs/agents.md): the console is the issuer, the MCP endpoint its resource.
run: export CONSOLE_OAUTH_ISSUER ?= http://$(HOST):$(PORT)
run: export CONSOLE_OAUTH_MCP_RESOURCE ?= http://$(HOST):$(MCP_PORT)/mcp
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_demo --url http://$(HOST):$(PORT)/
	$(BIN)/python manage.py worker --interval 1 & worker=$$!; \
	$(BIN)/python manage.py mcp_server --http --host $(HOST) --port $(MCP_PORT) & mcp=$$!; \
	trap 'kill $$worker $$mcp 2>/dev/null' EXIT INT TERM; \
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

## Put the demo back as the first `make run` made it: the project's db.sqlite3 is deleted, migrated
## and loaded again; the virtualenv stays (stop `make run` first; `make clean` deletes everything)
reset: install
	@if [ -n "$${DATABASE_URL:-}" ]; then \
	  echo "make reset resets the project's db.sqlite3 only; unset DATABASE_URL first" >&2; exit 1; fi
	rm -f db.sqlite3 db.sqlite3-wal db.sqlite3-shm
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_demo --url http://$(HOST):$(PORT)/

## Every check: ruff, mypy, import contracts, pytest on SQLite and on PostgreSQL (both always
## run; a summary of every step at the end)
test: install
	bash scripts/test.sh

## Screenshots of the main pages with the demo data (1366x900 and 390x844, English and Chinese,
## each checked by axe-core) into docs/screenshots/
screenshots: install
	rm -rf test-artifacts/screens/main
	$(BIN)/pytest -p no:xdist -q tests/browser/test_screenshots.py
	mkdir -p docs/screenshots
	cp test-artifacts/screens/main/*.png docs/screenshots/

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

bench: install
	$(BIN)/python bench/bench_knowledge.py
	$(BIN)/python bench/bench_experience.py

clean:
	rm -rf $(VENV) db.sqlite3 db.sqlite3-wal db.sqlite3-shm test-artifacts
