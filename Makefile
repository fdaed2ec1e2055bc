# The two set-up commands for a fresh machine: `make run` (the main job) and `make test` (the test suite).
VENV ?= .venv

.PHONY: run test lint docs

run:  # `bringup all` includes the runner's selftest: the serve extra brings the runner's packages
	VENV=$(VENV) scripts/setup-venv.sh serve
	$(VENV)/bin/bringup all

test:
	VENV=$(VENV) scripts/setup-venv.sh dev
	$(VENV)/bin/python -m pytest -q

lint:
	VENV=$(VENV) scripts/setup-venv.sh dev
	$(VENV)/bin/ruff check .

docs:
	VENV=$(VENV) scripts/setup-venv.sh docs
	$(VENV)/bin/python -m mkdocs build --strict --site-dir site
