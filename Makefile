# slidelog - developer targets. Modules are the `use` lines of go.work.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -o pipefail -c
.DEFAULT_GOAL := help

MODULES := $(shell scripts/modules.sh)
FRAMEWORK ?= chi
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(CURDIR)/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

# foreach_module runs $(1) in every module directory, keeps going after a
# failure and fails at the end, naming the modules that failed.
define foreach_module
	@fail=""; for m in $(MODULES); do \
		echo "==> $$m: $(1)"; \
		( cd "$$m" && $(1) ) || fail="$$fail $$m"; \
	done; \
	if [ -n "$$fail" ]; then echo "FAILED in:$$fail"; exit 1; fi
endef

INSTALLCHECK_VERSION ?= v0.0.0-installcheck

.PHONY: help build vet lint tidy-check install-check test test-servers faults cluster-up cluster-down demo bench bench-report bench-scaling

help: ## list targets
	@echo "slidelog make targets (modules: $(MODULES))"
	@awk -F':.*## ' '/^[a-z-]+:.*## /{printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## go build ./... in every module
	$(call foreach_module,go build ./...)

vet: ## go vet ./... in every module
	$(call foreach_module,go vet ./...)

lint: $(GOLANGCI_LINT) ## golangci-lint v2 run ./... in every module (first run builds the linter, ~2 min)
	$(call foreach_module,$(GOLANGCI_LINT) run ./...)

# Built once from the module proxy (same as `go run ...@$(GOLANGCI_LINT_VERSION)`), kept in bin/ (gitignored).
$(GOLANGCI_LINT):
	@mkdir -p bin
	cd bin && GOWORK=off GOBIN=$(CURDIR)/bin/.golangci go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv bin/.golangci/golangci-lint $@ && rm -rf bin/.golangci

tidy-check: ## fail if `GOWORK=off go mod tidy` would change any module's go.mod/go.sum
	@fail=""; for m in $(MODULES); do \
		echo "==> $$m: GOWORK=off go mod tidy (check)"; \
		tmp=$$(mktemp -d); cp "$$m/go.mod" "$$tmp/go.mod"; \
		if [ -f "$$m/go.sum" ]; then cp "$$m/go.sum" "$$tmp/go.sum"; fi; \
		if ! ( cd "$$m" && GOWORK=off go mod tidy ); then \
			fail="$$fail $$m"; \
		elif ! cmp -s "$$m/go.mod" "$$tmp/go.mod" || \
		     { [ -f "$$tmp/go.sum" ] && ! cmp -s "$$m/go.sum" "$$tmp/go.sum"; } || \
		     { [ ! -f "$$tmp/go.sum" ] && [ -s "$$m/go.sum" ]; }; then \
			echo "$$m: go.mod/go.sum not tidy; run (cd $$m && GOWORK=off go mod tidy). Diff:"; \
			diff -u "$$tmp/go.mod" "$$m/go.mod" || true; \
			if [ -f "$$tmp/go.sum" ]; then diff -u "$$tmp/go.sum" "$$m/go.sum" | head -n 40 || true; fi; \
			fail="$$fail $$m"; \
		fi; \
		cp "$$tmp/go.mod" "$$m/go.mod"; \
		if [ -f "$$tmp/go.sum" ]; then cp "$$tmp/go.sum" "$$m/go.sum"; else rm -f "$$m/go.sum"; fi; \
		rm -rf "$$tmp"; \
	done; \
	if [ -n "$$fail" ]; then echo "tidy-check FAILED in:$$fail"; exit 1; fi; \
	echo "tidy-check: all modules tidy"

install-check: ## install every adapter by version from a file proxy of the working tree, outside go.work, and build its docs page's quick start
	go run ./tools/installcheck -root . -version $(INSTALLCHECK_VERSION)

test: ## start the Redis rig, go test -race in every module (+ short fuzz), stop the rig
	scripts/test.sh

test-servers: ## core's Redis suites on Redis 6.2.14 and Valkey 8.0.1, built from source once (scripts/test-servers.sh)
	scripts/test-servers.sh

faults: ## run the fault suite (its own disposable Cluster) and write its table into docs/operations.md
	scripts/faults.sh

cluster-up: ## start standalone Redis :6399 + Redis Cluster :7100-7105 (reuses a healthy rig)
	@scripts/redis-rig.sh up
	@scripts/redis-rig.sh env

cluster-down: ## stop the Redis rig started by cluster-up / test
	@scripts/redis-rig.sh down

demo: ## run the demo for FRAMEWORK (default chi; or gin, echo, echov5, fiber, grpc, connect)
	@bash scripts/demo.sh "$(FRAMEWORK)"

bench: ## run the benchmarks (scripts/bench.sh)
	@if [ -f scripts/bench.sh ]; then bash scripts/bench.sh; else echo "scripts/bench.sh is not there yet"; fi

bench-report: ## write the benchmark report (scripts/bench.sh report)
	@if [ -f scripts/bench.sh ]; then bash scripts/bench.sh report; else echo "scripts/bench.sh is not there yet"; fi

bench-scaling: ## decisions/s against 1, 2, 3 and 6 Redis Cluster masters; writes docs/scaling.md's tables (scripts/scaling.sh)
	scripts/scaling.sh
