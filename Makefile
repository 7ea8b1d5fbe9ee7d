# tracescorer: `make demo` runs the daemon's main job, `make test` runs the test suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# the suite mostly waits on daemons and their store processes: three workers (one test file each at
# a time) keep 2 cores busy; measured 256 s against 302-316 s with two, on a slower 2-core machine
PYTEST_WORKERS ?= 3
export PYTHON

.PHONY: venv demo test test-unit test-budget check lint format typecheck bench lock clean captures captures-envs backends-check

# scripts/venv.sh: uv (bootstrapped from PyPI when not on PATH) or pip, pins from constraints.txt
$(VENV)/.runtime: pyproject.toml constraints.txt excludes.txt
	scripts/venv.sh $(VENV)
	@touch $@

$(VENV)/.dev: pyproject.toml constraints.txt excludes.txt
	scripts/venv.sh $(VENV) dev
	@touch $@ $(VENV)/.runtime

venv: $(VENV)/.runtime

demo: $(VENV)/.runtime
	$(VENV)/bin/tracescorer demo

# the tiers (tests/support/tiers.py): tests/unit (in-process, no process or socket: seconds),
# tests/contract (each part against a real peer), tests/e2e (the daemon). `make test` runs all three
# and names the 25 slowest tests; a file's tests share one xdist worker (module-scoped daemons).
test: $(VENV)/.dev
	scripts/postgres.sh
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=25 $(PYTEST_ARGS)

test-unit: $(VENV)/.dev
	$(PY) -m pytest -q -n 2 tests/unit $(PYTEST_ARGS)

# before a stop (not in CI, where a loaded machine must not fail a correct change): the unit tier
# within 60 s, and no test of any tier over 60 s (each one over is named)
test-budget: $(VENV)/.dev
	scripts/postgres.sh
	$(PY) -m pytest -q -n 2 tests/unit --budget-run-s 60 --budget-test-s 60 $(PYTEST_ARGS)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=25 --budget-test-s 60 tests/contract tests/e2e $(PYTEST_ARGS)

bench: $(VENV)/.dev
	$(PY) bench/ingest.py
	$(PY) bench/assembly.py
	$(PY) bench/scoring.py
	$(PY) bench/budgets.py
	$(PY) bench/e2e.py
	$(PY) bench/cli.py
	$(PY) bench/sustained.py
	$(PY) bench/stepped.py
	$(PY) bench/recovery.py
	$(PY) bench/scaleout.py

# Not part of `make test`: installs Phoenix and MLflow under .cache/backends/ and checks the
# exported scores through their own APIs (see scripts/backends_check.py).
backends-check: $(VENV)/.dev
	$(PY) scripts/backends_check.py

typecheck: $(VENV)/.dev
	$(PY) -m mypy

# what CI runs (.ci/run): lint, format check, mypy strict, then the tests
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

check: lint typecheck test

lock: $(VENV)/.dev
	{ echo "# Exact versions tested together (pip install -c constraints.txt ...). Regenerate with 'make lock'."; \
	  echo "# litellm: 1.82.7 and 1.82.8 were compromised upstream; keep this pin on a reviewed release."; \
	  echo "# uv: the installer scripts/venv.sh bootstraps when none is on PATH."; \
	  scripts/venv.sh $(VENV) lock; } > constraints.txt.new && mv constraints.txt.new constraints.txt

# Captures from real frameworks (tests/data/captures/*/client.py, client/run.mjs): each library
# lives in its own environment under .cache/captures/, never in the test extras. `make test` only
# replays what these wrote. CASE=<folder> records one case.
CAPTURE_ENVS := $(patsubst captures/envs/%/requirements.txt,%,$(wildcard captures/envs/*/requirements.txt))
CAPTURE_CASES = $(if $(CASE),tests/data/captures/$(CASE),$(shell grep -l -s -E '^(# venv|// env): [a-z]' tests/data/captures/*/client.py tests/data/captures/*/client/run.mjs | grep -v '^# venv: .venv' | xargs -r -n1 dirname | sed 's|/client$$||' | sort -u))

.cache/captures/%/.built: captures/envs/%/requirements.txt
	python3 -m venv .cache/captures/$*
	.cache/captures/$*/bin/pip install -q --disable-pip-version-check -r $<
	@touch $@

.cache/captures/langgraphjs/.built: captures/envs/langgraphjs/package.json captures/envs/langgraphjs/package-lock.json
	mkdir -p .cache/captures/langgraphjs
	cp captures/envs/langgraphjs/package.json captures/envs/langgraphjs/package-lock.json .cache/captures/langgraphjs/
	cd .cache/captures/langgraphjs && npm ci --no-audit --no-fund
	@touch $@

captures-envs: $(foreach e,$(CAPTURE_ENVS) langgraphjs,.cache/captures/$(e)/.built)

# CASE=<folder> builds only the environment its client names (first line `# venv: <env>`)
CASE_ENV = $(shell head -qn1 tests/data/captures/$(CASE)/client.py tests/data/captures/$(CASE)/client/run.mjs 2>/dev/null | sed -nE 's,^(#|//) *(venv|env): *([A-Za-z0-9_.-]+).*,\3,p' | head -n1)

captures: $(if $(CASE),.cache/captures/$(CASE_ENV)/.built,captures-envs) $(VENV)/.dev
	@for c in $(CAPTURE_CASES); do $(PY) captures/record.py $$c || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis *.egg-info
