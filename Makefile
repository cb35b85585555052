# The README's commands. `make up` and `make test` must hold on a fresh Debian machine.
PYTHON ?= .venv/bin/python
# The Python that creates .venv (deploy/local/stack.py runs on it and needs nothing but the standard library).
BOOTSTRAP_PYTHON ?= python3
# The stack's state: logs, pid files, the hosted repository, job directories, a throwaway PostgreSQL/NATS store.
KB_HOME ?= $(CURDIR)/.state
# What `make test` runs; tests/e2e and tests/faults start private stacks of their own and have their own target.
TESTS ?= tests --ignore=tests/e2e --ignore=tests/faults
PYTEST_ARGS ?=

# pytest exits 5 when it collected no test: that would pass a run that tested nothing, so it fails here.
define strict_pytest
$(PYTHON) -m pytest $(1) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: pytest collected no tests in '$(1)': failing" >&2; exit 1; fi; exit $$rc
endef

.PHONY: up down status test e2e proto lint bench

up:
	@command -v $(BOOTSTRAP_PYTHON) >/dev/null || { apt-get update && apt-get install -y python3 python3-venv; }
	KB_HOME=$(KB_HOME) $(BOOTSTRAP_PYTHON) deploy/local/stack.py up

down:
	KB_HOME=$(KB_HOME) $(BOOTSTRAP_PYTHON) deploy/local/stack.py down

status:
	@KB_HOME=$(KB_HOME) $(BOOTSTRAP_PYTHON) deploy/local/stack.py status

test:
	@$(call strict_pytest,$(TESTS))

# tests/e2e and tests/faults start their own stack (own database, nats-server, KB_HOME, free ports) beside any
# `make up` stack; they need the machine's PostgreSQL, nats-server and the Slurm cluster that prepare brings up.
e2e:
	@test -d tests/e2e || { echo "make e2e: tests/e2e is not in this checkout" >&2; exit 1; }
	KB_HOME=$(KB_HOME) $(BOOTSTRAP_PYTHON) deploy/local/stack.py prepare
	@KB_HOME=$(KB_HOME) $(call strict_pytest,tests/e2e $(wildcard tests/faults))

proto:
	$(PYTHON) protos/generate.py

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

# The benchmarks that run on this machine, one command per area, from the repository root; each prints its numbers,
# and the area records them under bench/<area>/ with the command that made them.
BENCH_CPU ?= \
	bench/common/rpc_overhead.py \
	bench/ingest/push_bench.py \
	bench/board/bench_fold.py
# Measured on the H200 through the device tool; their recorded results stand on a machine without a GPU.
BENCH_GPU ?= bench/kernels/run.py bench/harness/gpu_run.sh

bench:
	@set -e; ran=0; for script in $(BENCH_CPU); do \
	  if [ ! -f "$$script" ]; then echo "==> $$script: not in this checkout"; continue; fi; \
	  echo "==> $$script"; PYTHONPATH=$(CURDIR):$(CURDIR)/protos $(PYTHON) "$$script"; ran=$$((ran + 1)); \
	done; \
	for script in $(BENCH_GPU); do \
	  [ -f "$$script" ] || continue; \
	  if nvidia-smi >/dev/null 2>&1; then echo "==> $$script: a GPU is here; run it as its header says"; \
	  else echo "==> $$script: needs a GPU; recorded results in $$(dirname $$script)/"; fi; \
	done; echo "make bench: $$ran benchmark(s) run"
