# metalfleet — two commands do all set-up from a fresh clone: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PULUMI_VERSION := $(shell sed -n 's/.*"pulumi==\([0-9.]*\)".*/\1/p' pyproject.toml | head -1)
ENGINE_DIR = $(shell tools/build-pulumi-engine.sh $(PULUMI_VERSION))
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all venv engine clients sshd bmc-tools slurm lint typecheck wheel-check unit test demo clean

all: test

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

# The Pulumi CLI built from its Go modules (cached per user and version; skipped when present).
engine:
	@tools/build-pulumi-engine.sh $(PULUMI_VERSION) >/dev/null

# The official SDK clients we did not write (tests/clients: Go SDKs of Huawei Cloud and AWS), run against the
# emulators by the tests; built once per source hash into ~/.cache/metalfleet/clients (cold: minutes).
clients: venv
	@$(PY) -m tests.clients.gobuild >/dev/null

# sshd and the other host packages the simulated GPU hosts need.
sshd:
	@tests/support/hosts/ensure-sshd.sh

# Debian's slurmctld, slurmd, slurm-client and munge: the real Slurm clusters of the scheduler tests (tests/slurm).
slurm:
	@tests/support/ensure-slurm.sh

# ipmi_sim (Debian openipmi) and ipmitool: the simulated IPMI BMCs of the pool tests (tests/ipmi, the contract suite).
bmc-tools:
	@tests/support/ensure-bmc-tools.sh

lint: venv
	$(VENV)/bin/ruff check .

# Build the wheel, install it in a fresh venv, import every module from it, and type-check the
# installed package (a folder missing from `packages` would otherwise be dropped silently).
wheel-check: venv
	tools/wheel-check.sh $(PY)

unit: venv
	$(VENV)/bin/pytest -q -n $(JOBS) -m "not e2e"

test: venv engine clients sshd bmc-tools slurm lint wheel-check
	$(VENV)/bin/pytest -q -n $(JOBS) --dist loadgroup

# make demo PROVIDER=alibaba|huawei|ipmi: the same flow on the local Alibaba ECS / Huawei BMS emulator or a simulated
# IPMI/Redfish pool (default: aws).
PROVIDER ?= aws
demo: venv engine sshd bmc-tools slurm
	$(PY) tools/demo.py --provider $(PROVIDER)

clean:
	rm -rf $(VENV) .venv-wheel build dist *.egg-info
