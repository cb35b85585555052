# The README's commands. `make up` and `make test` must hold on a fresh Debian machine.
PYTHON ?= .venv/bin/python
# The Python that creates .venv (deploy/local/stack.py runs on it and needs nothing but the standard library).
BOOTSTRAP_PYTHON ?= python3
# The stack's state: logs, pid files, the hosted repository, job directories, a throwaway PostgreSQL/NATS store.
KB_HOME ?= $(CURDIR)/.state
# What `make test` runs; tests/e2e and tests/faults start private stacks of their own and have their own target, and
# tests/image builds the container image (minutes the first time): `make image-test`.
TESTS ?= tests --ignore=tests/e2e --ignore=tests/faults --ignore=tests/image
PYTEST_ARGS ?=

# pytest exits 5 when it collected no test: that would pass a run that tested nothing, so it fails here.
define strict_pytest
$(PYTHON) -m pytest $(1) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: pytest collected no tests in '$(1)': failing" >&2; exit 1; fi; exit $$rc
endef

# The stack's environment as `make up` left it (SLURM_CONF, the service URLs it settled on), read as CI's run reads it:
# `make test` in a new shell runs the Slurm tests without the user sourcing it first.
define with_stack_env
if [ -f "$(KB_HOME)/stack.env" ]; then set -a; . "$(KB_HOME)/stack.env"; set +a; fi
endef

.PHONY: up down status test e2e image image-test proto lint bench

up:
	@command -v $(BOOTSTRAP_PYTHON) >/dev/null || { apt-get update && apt-get install -y python3 python3-venv; }
	KB_HOME=$(KB_HOME) $(BOOTSTRAP_PYTHON) deploy/local/stack.py up

down:
	KB_HOME=$(KB_HOME) $(BOOTSTRAP_PYTHON) deploy/local/stack.py down

status:
	@KB_HOME=$(KB_HOME) $(BOOTSTRAP_PYTHON) deploy/local/stack.py status

test:
	@$(with_stack_env); $(call strict_pytest,$(TESTS))

# tests/e2e and tests/faults start their own stack (own database, nats-server, KB_HOME, free ports) beside any
# `make up` stack; they need the machine's PostgreSQL, nats-server and the Slurm cluster that prepare brings up.
e2e:
	@test -d tests/e2e || { echo "make e2e: tests/e2e is not in this checkout" >&2; exit 1; }
	KB_HOME=$(KB_HOME) $(BOOTSTRAP_PYTHON) deploy/local/stack.py prepare
	@KB_HOME=$(KB_HOME) $(call strict_pytest,tests/e2e $(wildcard tests/faults))

# The container image deploy/k8s runs, built with podman (deploy/container/build.sh: no Docker daemon needed; the base
# comes from debootstrap where no registry is reachable), then started process by process against the stack.
image:
	deploy/container/build.sh $(or $(TAG),dev)

image-test:
	@KB_HOME=$(KB_HOME) $(call strict_pytest,tests/image)

proto:
	$(PYTHON) protos/generate.py

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

# Each area's benchmark, run as its header says, from the repository root with the stack's environment (SLURM_CONF for
# the scheduler's); each prints or records its numbers under bench/<area>/. The GPU ones were measured on the H200
# through the device tool: on a machine without a GPU their recorded results stand.
bench:
	@set -e; ran=0; \
	$(with_stack_env); \
	export PYTHONPATH=$(CURDIR):$(CURDIR)/protos; \
	cpu() { if [ ! -f "$$1" ]; then echo "==> $$1: not in this checkout"; return; fi; shift; \
	  echo "==> $$*"; "$$@"; ran=$$((ran + 1)); }; \
	gpu() { [ -f "$$1" ] || return 0; \
	  if nvidia-smi >/dev/null 2>&1; then echo "==> $$1: a GPU is here, run it as its header says"; \
	  else echo "==> $$1: needs a GPU; recorded results: $$2"; fi; }; \
	cpu bench/log/run.py $(PYTHON) -m bench.log.run; \
	cpu bench/common/rpc_overhead.py $(PYTHON) bench/common/rpc_overhead.py; \
	cpu bench/ingest/push_bench.py $(PYTHON) bench/ingest/push_bench.py; \
	cpu bench/scheduler/slurm_latency.py $(PYTHON) bench/scheduler/slurm_latency.py; \
	cpu bench/board/bench_fold.py $(PYTHON) bench/board/bench_fold.py; \
	cpu bench/web/bench_board_page.py $(PYTHON) bench/web/bench_board_page.py; \
	cpu bench/verifier/smoke_check.py $(PYTHON) -m bench.verifier.smoke_check kernels/triton; \
	gpu bench/kernels/run.py kernels/RESULTS.md; \
	gpu bench/harness/gpu_run.sh "bench/harness/results_*/summary.md"; \
	echo "make bench: $$ran benchmark(s) run"
