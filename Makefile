# tracescorer: `make demo` runs the daemon's main job, `make test` runs the test suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
export PYTHON

.PHONY: venv demo test bench lock typecheck clean

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

test: $(VENV)/.dev
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: $(VENV)/.dev
	$(PY) bench/ingest.py
	$(PY) bench/assembly.py
	$(PY) bench/scoring.py
	$(PY) bench/e2e.py
	$(PY) bench/cli.py
	$(PY) bench/sustained.py

typecheck: $(VENV)/.dev
	$(PY) -m mypy

lock: $(VENV)/.dev
	{ echo "# Exact versions tested together (pip install -c constraints.txt ...). Regenerate with 'make lock'."; \
	  echo "# litellm: 1.82.7 and 1.82.8 were compromised upstream; keep this pin on a reviewed release."; \
	  echo "# uv: the installer scripts/venv.sh bootstraps when none is on PATH."; \
	  scripts/venv.sh $(VENV) lock; } > constraints.txt.new && mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis *.egg-info
