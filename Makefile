# msa.hpc bundle: the few commands a person types. Everything a node needs is done by playbooks.
SHELL := /bin/bash
VENV  ?= $(CURDIR)/.venv
BIN   := $(VENV)/bin
SYSTEM ?= mini
SITE   ?= example
INVENTORY := -i common.yml -i inventories/systems/$(SYSTEM) -i inventories/sites/$(SITE)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(BIN):$(PATH)
# STRATEGY=linear: ansible-core's own strategy instead of ansible.cfg's mitogen_linear (README "Speed")
ifneq ($(STRATEGY),)
export ANSIBLE_STRATEGY := $(STRATEGY)
export ANSIBLE_STRATEGY_PLUGINS := $(CURDIR)/playbooks/strategy_plugins
endif
STAMP = printf '[%s] == %s\n' "$$(date +%H:%M:%S)"
STEP = @$(STAMP)

.PHONY: setup demo sim-up sim-down site image image-slurm-26.05 test unit lint molecule verify bench bench-system clean ee runner

setup:            ## packages, host fixes, venv, node image (each skipped when already there)
	bash scripts/setup.sh

sim-up: setup     ## bring the simulated system up
	$(STEP) "sim_up $(SYSTEM)"
	$(BIN)/ansible-playbook $(INVENTORY) playbooks/sim_up.yml

sim-down:         ## remove the simulated system's containers and networks
	$(STEP) "sim_down $(SYSTEM)"
	$(BIN)/ansible-playbook $(INVENTORY) playbooks/sim_down.yml

site:             ## deploy the whole stack onto the (simulated or real) system
	$(STEP) "site.yml on $(SYSTEM) (site $(SITE))"
	$(BIN)/ansible-playbook $(INVENTORY) playbooks/site.yml

image: setup      ## node images of the software sets (playbooks/image.yml, msa_image_build); nothing is built when none changed
	$(STEP) "image.yml on $(SYSTEM) (site $(SITE))"
	$(BIN)/ansible-playbook $(INVENTORY) playbooks/image.yml

image-slurm-26.05: setup ## node image with Slurm 26.05 (forky's packages, local repository .cache/slurm-26.05); not part of make test
	MSA_SLURM_NEXT_NO_SETUP=1 bash scripts/slurm_next.sh

demo: sim-up site ## the README's first command: simulated system, full stack, a modular workflow
	$(STEP) "demo workflow"
	$(BIN)/ansible-playbook $(INVENTORY) playbooks/demo.yml

ee: setup         ## build the execution environment image (ansible-builder, on a base built here; prints time and size)
	bash scripts/ee.sh

runner:           ## site.yml (or PLAYBOOK=..., TAGS=...) through ansible-runner in the EE container, as AWX runs it: make runner SYSTEM=dev4
	MSA_RUNNER_TAGS=$(TAGS) bash scripts/runner.sh $(SYSTEM) $(or $(PLAYBOOK),playbooks/site.yml) $(SITE)

unit: setup       ## unit and integration tests that need no simulated system (two pytest-xdist workers, each file on one: a module fixture runs once)
	$(STEP) "pytest"
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

lint: setup       ## ansible-lint (production profile), ansible-test sanity and units of the collection
	MSA_VENV=$(VENV) bash scripts/lint.sh

molecule: setup ee ## build the simulated system, converge, verify (verify_fabric re-runs site.yml through ansible-runner in the EE: changed=0 is the idempotence check), destroy
	$(STEP) "molecule test (default scenario: $(SYSTEM))"
	$(BIN)/molecule test -s default
	bash scripts/check_clean.sh $(SYSTEM)

CHECK ?= faults
verify:           ## run one of molecule's checks against a running system: make verify SYSTEM=dev CHECK=faults
	$(STEP) "molecule/default/verify_$(CHECK).yml on $(SYSTEM)"
	$(BIN)/ansible-playbook $(INVENTORY) molecule/default/verify_$(CHECK).yml $(ARGS)

test: setup ee     ## the README's second command (and what .ci/run calls): unit, lint and molecule, lint and the longest unit file beside molecule's waits (scripts/test.sh)
	MSA_VENV=$(VENV) MSA_SYSTEM=$(SYSTEM) bash scripts/test.sh

SKIP ?=
bench: setup      ## every benchmark (scripts/bench.sh): a bench that cannot run fails unless skipped by name: make bench SKIP=bench_scale
	MSA_BENCH_SKIP=$(SKIP) MSA_BENCH_SYSTEM=$(SYSTEM) bash scripts/bench.sh all

bench-system: setup ## the benches that need a running system, on $(SYSTEM): brought up and deployed first unless it runs
	MSA_BENCH_SKIP=$(SKIP) MSA_BENCH_SYSTEM=$(SYSTEM) bash scripts/bench.sh system

clean: sim-down
	rm -rf .cache
