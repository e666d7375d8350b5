# Everything runs inside a project-local virtual environment (.venv), created on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-slow bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,analysis,bench]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m pubsub.demo

# The whole suite except the long simulation sweeps (about 4 minutes on 2 cores).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto -m "not slow"

# The long sweeps (n = 1000 from 18 more corrupted states); see README.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n auto -m slow

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
