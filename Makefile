# The two set-up-and-go commands: `make demo` (main job) and `make test` (tests). Both install
# everything first (scripts/setup.sh).
SHELL := /bin/bash
export DVC_NO_ANALYTICS := 1
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: setup demo test lint params

setup:
	@bash scripts/setup.sh

demo: setup
	dvc repro
	@echo "outputs: data/inventory/*.parquet, data/trajectories/<level>/<traj>/ (see README)"

lint: setup
	wmforge lint

test: setup
	wmforge lint
	pytest -q

params: setup
	wmforge params
