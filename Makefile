# Everything runs inside a project-local virtual environment (.venv), created on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv bytecode demo lint test test-slow bench fuzz clean check-java chromium servers analyze experiments wheelhouse podman-setup

venv: $(STAMP)

# The install compiles the trie and the hot path's decoders (setup.py: pubsub/publications/_ctrie.pyx
# and _chotpath.pyx) with the C compiler, installed with apt when missing and this machine can;
# without one they stay in Python (pubsub.publications.pytrie, hotpath) and `make test` says so.
$(STAMP): pyproject.toml setup.py pubsub/publications/_ctrie.pyx pubsub/publications/_chotpath.pyx
	@command -v cc >/dev/null 2>&1 || { echo "no C compiler (cc): installing gcc with apt for the compiled trie and decoders" >&2; \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    apt-get -o DPkg::Lock::Timeout=600 update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq gcc >/dev/null; } || \
	  echo "could not install gcc: the trie and decoders stay in Python and tests/publications/test_ctrie.py and test_hotpath.py will fail" >&2; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,analysis,bench]'
	@touch $(STAMP)

# The project's modules compiled ahead (only what changed since the last run): every daemon
# a cluster starts imports them, and where PYTHONDONTWRITEBYTECODE is set nothing
# else writes the compiled files, so each daemon would compile every module again (about
# 0.4 CPU-seconds per start, measured on a 19-daemon cluster).
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q pubsub broker bench fuzz >/dev/null

demo: bytecode
	$(BIN)/python -m pubsub.ops.demo

# The analysis (PySpark) needs Java 17+: say so in one line instead of a JVM trace.
check-java: $(STAMP)
	@$(BIN)/python -m pubsub.ops.analysis.javacheck

# make analyze RUN=runs/x [ANALYZE_ARGS="--stream --until-idle 60"]
analyze: check-java
	@test -n "$(RUN)" || { echo "usage: make analyze RUN=RUN_DIR [ANALYZE_ARGS=...]" >&2; exit 2; }
	$(BIN)/pubsub analyze $(RUN) $(ANALYZE_ARGS)

# Lint (ruff), types (mypy: strict for the kernel and the cores) and the import rules
# (import-linter contracts in pyproject.toml; docs/architecture.md, "Layers").
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# The web view's browser test drives Debian's chromium through Playwright (no browser
# download): installed with apt when missing and this machine can; otherwise that test skips
# with its reason.
chromium:
	@tests/install-chromium.sh

# The reference servers tests/bench/test_bench_endtoend.py runs pubsub beside (Debian's
# redis-server and nats-server): installed with apt when missing and this machine can;
# otherwise the script says what is missing and that test runs fewer systems or skips.
servers:
	@bench/install-servers.sh

# Lint first, then the whole suite except the long simulation sweeps (about 15 minutes on
# 2 cores once the podman images exist); it names the skipped tests and the slowest ones.
test: lint check-java chromium servers bytecode
	$(BIN)/python -m pytest -q -rs -n auto -m "not slow" --durations=15

# The long sweeps (n = 1000 from 18 more corrupted states); see README.
test-slow: check-java bytecode
	$(BIN)/python -m pytest -q -rs -n auto -m slow

# The three shipped scenarios, each on a local cluster, analysed (runs/<scenario>/).
experiments: check-java bytecode
	for s in steady-churn mass-crash corruption; do \
		rm -rf runs/$$s && $(BIN)/pubsub experiment run $$s --out runs/$$s || exit 1; done

# The end-to-end benchmark runs pubsub beside Debian's nats-server (NATS core, JetStream) and
# redis-server: installed with apt when missing and this machine can (root or sudo); otherwise
# the script says what is missing and the benchmark reports those systems as "not run: <reason>".
bench: bytecode servers
	$(BIN)/python -m bench

# Coverage-guided fuzzing (README, "Fuzzing"): 10^6 inputs over the frame decoder, the codec
# and every core's handle, under atheris; one line per target, exit 1 on any crash.
fuzz: bytecode
	$(BIN)/python -m fuzz all $(FUZZ_ARGS)

# Containers (README, "Containers"): the wheels deploy/Dockerfile installs, built on the host;
# and, for podman on a machine without a registry, everything docker-compose.yml needs.
wheelhouse: $(STAMP)
	PYTHON=$(BIN)/python deploy/build-wheelhouse.sh

podman-setup: $(STAMP)
	PYTHON=$(abspath $(BIN)/python) deploy/podman-setup.sh

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
	rm -f pubsub/publications/_ctrie.c pubsub/publications/_ctrie.*.so pubsub/publications/_chotpath.c pubsub/publications/_chotpath.*.so
	find pubsub broker bench fuzz tests -name __pycache__ -type d -prune -exec rm -rf {} +
