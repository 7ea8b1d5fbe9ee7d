# tracescorer: `make demo` runs the daemon's main job, `make test` runs the test suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
PYTEST_ARGS ?=

.PHONY: demo test bench lock typecheck clean backends-check

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: pyproject.toml constraints.txt | $(PY)
	$(PIP) install -q -c constraints.txt -e .
	@touch $@

$(VENV)/.dev: pyproject.toml constraints.txt | $(PY)
	$(PIP) install -q -c constraints.txt -e '.[dev]'
	@touch $@ $(VENV)/.runtime

demo: $(VENV)/.runtime
	$(VENV)/bin/tracescorer demo

test: $(VENV)/.dev
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: $(VENV)/.dev
	$(PY) bench/ingest.py
	$(PY) bench/assembly.py
	$(PY) bench/scoring.py
	$(PY) bench/e2e.py

# Not part of `make test`: installs Phoenix and MLflow under .cache/backends/ and checks the
# exported scores through their own APIs (see scripts/backends_check.py).
backends-check: $(VENV)/.dev
	$(PY) scripts/backends_check.py

typecheck: $(VENV)/.dev
	$(PY) -m mypy

lock: $(VENV)/.dev
	{ echo "# Exact versions tested together (pip install -c constraints.txt ...). Regenerate with 'make lock'."; \
	  echo "# litellm: 1.82.7 and 1.82.8 were compromised upstream; keep this pin on a reviewed release."; \
	  $(PIP) freeze --exclude-editable | grep -v -i -E '^(pip|setuptools|wheel)=='; } > constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis *.egg-info
