# The README's commands. `make up` and `make test` must hold on a fresh Debian machine.
PYTHON ?= .venv/bin/python

.PHONY: proto test lint

proto:
	$(PYTHON) protos/generate.py

test:
	$(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
