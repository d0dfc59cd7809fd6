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
	@echo "outputs: data/screen, data/select, data/renders, data/shards, data/lerobot, data/report/card (see README)"

lint: setup
	wmforge lint

# two test processes (pytest-xdist), each test module in one of them (its fixtures built once)
test: setup
	wmforge lint
	pytest -q -n 2 --dist loadscope

params: setup
	wmforge params
