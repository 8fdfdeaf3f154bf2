# The README's two commands: `make up` runs the service, `make test` runs the tests.
# Each creates .venv and installs into it when pyproject.toml changed (a stamp keeps reruns quick).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
ARGS ?=
PYTEST_ARGS ?=

.PHONY: up test install bytecode browser lint fmt bench record-histories workflow-fingerprints config-doc clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

install: $(STAMP) bytecode

# The project's own modules byte-compiled, as installing a wheel does. The workflow sandbox re-imports a
# workflow's modules for every run; where bytecode is not written (PYTHONDONTWRITEBYTECODE) each run
# would compile them from source again (docs/decisions/bytecode-at-install.md). Quick when up to date.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q memwarden workflows activities api worker stack >/dev/null

up: $(STAMP) bytecode
	$(BIN)/memwarden up $(ARGS)

# The /me page's browser tests drive Debian's Chromium through Playwright (never a browser download):
# installed from Debian's packages when it is missing.
browser:
	@test -x /usr/bin/chromium || { echo "installing Debian's chromium (browser tests)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; }

test: $(STAMP) bytecode browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# CASES="ImportWorkflow RememberWorkflow-staged" records only the cases whose id starts so.
CASES ?=
record-histories: $(STAMP)
	$(BIN)/python -m tests.workflows.record_histories $(CASES)

# Accept the long-lived workflows' determinism fingerprints (tests/workflows/fingerprints.json) after a
# change guarded by workflow.patched, or one that cannot alter any run (docs/decisions/workflow-versioning.md).
workflow-fingerprints: $(STAMP)
	$(BIN)/python -m tests.workflows.fingerprints --write

# Regenerate the configuration reference in deploy/README.md from memwarden/config.py (a test checks it).
config-doc: $(STAMP)
	$(BIN)/python -m memwarden.config_doc --write deploy/README.md

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .import_linter_cache
