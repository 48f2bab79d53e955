# Whereabot relay. `make help` lists the targets; README.md explains them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        := .venv
PYTHON      := $(VENV)/bin/python
APT_PACKAGES := libpq-dev libssl-dev libcurl4-openssl-dev postgresql-15 postgresql-client-15 \
                postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl python3-venv \
                haproxy nginx-light chromium nodejs
SWIFT_FLAGS ?= -Xswiftc -gnone  # scripts/lib.sh's SWIFT_DEBUG_FLAGS: no debug info

.PHONY: help deps apt-deps venv run auth auth-stop env db db-stop migrate build test test-fast test-swift test-db test-schemas test-acceptance test-faults cluster bench bench-relay bench-scale bench-pgbus bench-http bench-push audit fuzz clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: apt-deps ## Install missing Debian packages and the Python test tools (.venv)
	@$(MAKE) --no-print-directory venv

apt-deps:
	@missing=$$(for p in $(APT_PACKAGES) $(EXTRA_APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	    | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing $$missing"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: Tests/Acceptance/requirements.txt
	@[ -x $(PYTHON) ] || /usr/bin/python3 -m venv $(VENV)
	@$(PYTHON) -m pip install -q --disable-pip-version-check -r Tests/Acceptance/requirements.txt
	@touch $@

run: deps db auth ## Start the local database, the Supabase Auth stand-in and one relay on 127.0.0.1:8080, and print what to try
	@scripts/run.sh

auth: deps db ## Start the local stand-in for Supabase Auth (OAuth 2.1, magic links) on 127.0.0.1:54321, mailbox on :54324
	@scripts/auth.sh start

auth-stop: ## Stop the Supabase Auth stand-in
	@scripts/auth.sh stop

env: ## Print the local environment as export lines: eval "$$(make -s env)"
	@scripts/env.sh

db: ## Create and start the local PostgreSQL on 127.0.0.1:54322 with the Supabase shim and migrations
	@scripts/db.sh start >/dev/null
	@scripts/db.sh migrate-local

db-stop: ## Stop the local PostgreSQL
	@scripts/db.sh stop

audit: ## Print who may do what (RLS, policies, functions, privileges) from DATABASE_URL's catalog (default: local)
	@scripts/audit.sh

migrate: ## Apply pending migrations to DATABASE_URL (default: the local database)
	@scripts/migrate.sh

build: ## Build the relay (debug)
	swift build $(SWIFT_FLAGS)

test: apt-deps ## Run every test: Swift, pgTAP, schemas and acceptance, with a fresh test database
	@scripts/test.sh

test-fast: deps ## Before every commit (under 2 minutes with a warm build): pgTAP, the schema check, the app's Node tests, swift test and the fuzz smoke of decoders changed in the working tree
	@scripts/test.sh fast

test-swift: ## Swift tests only (needs `make db`)
	swift test $(SWIFT_FLAGS)

test-db: ## pgTAP tests only, on a fresh test database (needs `make db`); `make test-db DATABASE_URL=postgresql://postgres:…@host:5432/postgres` runs them on that database instead (a Supabase branch project with the migrations applied)
	@if [ "$(origin DATABASE_URL)" = "command line" ]; then scripts/test.sh pgtap-on '$(DATABASE_URL)'; \
	else scripts/db.sh reset-test && scripts/test.sh pgtap; fi

test-schemas: ## supabase/schemas/ builds the same catalog as supabase/migrations/ (needs `make db`)
	@scripts/test.sh schemas

test-acceptance: ## Acceptance tests with real clients only (needs `make db`)
	@scripts/db.sh reset-test
	@scripts/test.sh acceptance

test-faults: deps ## Fault tests: two relays behind HAProxy; rolling restart, kill -9, Postgres restart and crash
	@scripts/test.sh faults

cluster: deps db auth ## Two relays behind HAProxy on 127.0.0.1:8080 against the local database and the Supabase Auth stand-in
	@scripts/cluster.sh

bench: bench-pgbus bench-http bench-relay bench-push bench-scale ## Every benchmark (prints numbers, asserts nothing)

bench-relay: deps db ## The relay end to end (compiled load generator): locate latency, locates/s same and cross instance at 2 and 4 instances with p99, CPU and WAL per locate, notifications per locate at 2/4/8 instances, memory and WAL per idle phone, reconnect storm from 1, 200 and 10,000 addresses
	@scripts/bench-relay.sh

bench-scale: deps db ## The curves of docs/scaling.md: NOTIFY/s against 1-128 listeners, an instance's heartbeat against 0-100,000 sockets, re-registration, CPU per idle phone
	@scripts/bench-scale.sh

bench-push: deps db ## Push: APNs pushes/s over one connection to the fake APNs, and a request's start to the wake push
	@scripts/bench-push.sh

bench-pgbus: deps db ## PGBus: query latency, NOTIFY round trip and throughput beside pgbench
	@scripts/bench-pgbus.sh

bench-http: ## HTTPServer: wrk POST requests/s and p99 beside nginx, memory per idle WebSocket
	@$(MAKE) --no-print-directory deps EXTRA_APT_PACKAGES="wrk"
	@scripts/bench-http.sh

fuzz: ## Fuzz every decoder of peer bytes (HTTP, WebSocket, phone messages, MCP, JWT, query, notifications, push responses; FUZZ_SECONDS each, default 60)
	@scripts/fuzz.sh

clean: ## Remove build output, the local cluster and the venv
	-@scripts/db.sh stop
	rm -rf .build .local $(VENV)
