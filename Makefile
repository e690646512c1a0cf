# The two commands the README promises, and their parts.
GO ?= go

.PHONY: all conformance conformance-process conformance-postgres conformance-nodes test check vet race race-short unit selftest selftest-sample build bench gobench bench-stream browser-test mutate mutate-sample fuzz explore explore-ci slow lint

all: test conformance

# The main job: the whole conformance suite against the embedded reference, writing reports/latest.
conformance:
	@echo "compiling loomcheck (the first time this takes a few minutes: SQLite and the dependencies are built once, then cached)" >&2
	$(GO) run ./cmd/loomcheck run --out reports/latest

# The same suite with the reference as a separate process that the kit SIGKILLs to crash it.
conformance-process: build
	./bin/loomcheck run --sut-cmd "$(CURDIR)/bin/loom" --out reports/process

# The suite on PostgreSQL (spec/nodes.md): every scenario in-process on a database of its own, which
# the kit creates and drops on the server of PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE
# (eval "$$(.ci/postgres)" starts a throwaway one).
conformance-postgres:
	$(GO) run ./cmd/loomcheck run --store postgres --out reports/postgres

# The suite against two reference processes sharing each scenario's database behind one address;
# a crash SIGKILLs the node that holds the lease, and the other takes its executions over.
conformance-nodes: build
	./bin/loomcheck run --sut-cmd "$(CURDIR)/bin/loom" --store postgres --nodes 2 --out reports/nodes

# bin/loomcheck, the kit; bin/loom, the engine's own serving binary (`loomcheck serve` without
# the kit linked in, so that it starts as a plain Go server does).
build:
	$(GO) build -o bin/loomcheck ./cmd/loomcheck
	$(GO) build -o bin/loom ./cmd/loom

# The test command, the fast gate (about 12 minutes on two busy cores): formatting, vet and
# staticcheck; every test under the race detector but the long ones (-short); every test, the long
# ones too (the whole conformance suite in-process, the crash torture), without it; and the
# self-test on a fixed sample of SELFTEST_SAMPLE defects. The slow layers are their own targets
# (`make slow` runs them all): race (every test under the race detector), selftest (every defect),
# mutate, explore, fuzz.
test: check race-short unit selftest-sample

# The linter, fetched by version from the module proxy (not a dependency of the module).
STATICCHECK_VERSION ?= v0.8.2
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Every test under the race detector, the whole conformance suite and the crash torture included:
# about 16 minutes on two cores. Under the detector the kit's step timeout is 40 s
# (LOOMCHECK_STEP_TIMEOUT raises it).
race:
	$(GO) test -race -count=1 -timeout 30m ./...

# The part of race the test command runs: the tests -short keeps (a few minutes).
race-short:
	$(GO) test -race -short -count=1 -timeout 20m ./...

# Every test, without the race detector (about 2 minutes).
unit:
	$(GO) test -count=1 -timeout 20m ./...

# The whole self-test: every defect of fixtures/defects, SELFTEST_PARALLEL variants at once
# (about 25 minutes on two cores).
SELFTEST_PARALLEL ?= 2
selftest:
	$(GO) run ./cmd/loomcheck selftest --parallel $(SELFTEST_PARALLEL) --out reports/selftest

# The part of the self-test the test command runs: SELFTEST_SAMPLE defects chosen by SELFTEST_SEED
# (the same ones every time for one seed; CI varies the seed so that, over its runs, every defect is
# judged). SELFTEST_SAMPLE=0 judges them all.
SELFTEST_SAMPLE ?= 30
SELFTEST_SEED ?= 1
selftest-sample:
	$(GO) run ./cmd/loomcheck selftest --parallel $(SELFTEST_PARALLEL) --sample $(SELFTEST_SAMPLE) \
		--seed $(SELFTEST_SEED) --out reports/selftest-sample

# Every slow layer in full: hours on two cores (mutation testing above all).
slow: race selftest explore fuzz mutate

# Crash exploration: every canonical dialogue crashed right after each of its durable writes and
# restarted (reports/explore/). 20 to 30 s on two cores; explore-ci is a bounded part for slow machines.
explore:
	$(GO) run ./cmd/loomcheck explore --out reports/explore

explore-ci:
	$(GO) run ./cmd/loomcheck explore --max-points 12 --out reports/explore

# The performance figures as a user meets them, each beside its baseline in the same process, runs
# alternating (loomcheck bench, reference/perf): a Markdown table of the medians and the ratios'
# min / median / max over BENCH_ROUNDS rounds, and whether each goal is met (nothing fails for being
# slow). The figures on PostgreSQL run when PGHOST is set. A few minutes on two cores;
# BENCH_FLAGS adds flags (--figures turns,restart --quick --out FILE --json).
BENCH_ROUNDS ?= 5
bench:
	$(GO) run ./cmd/loomcheck bench --rounds $(BENCH_ROUNDS) $(BENCH_FLAGS)

# The Go benchmarks of every package (go test -bench; what `make bench` ran before it printed the
# figures' table): the store's appends and reads, the kernel, the gateway's latencies.
gobench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The session stream's figures (reference/sessionstream_bench_test.go): append-to-receipt over a
# loopback WebSocket for 3000 frames beside a bare WebSocket sending the same bytes, and kill to
# the first resumed frame over 30 kills, in-process and of a `loomcheck serve` process. Each figure
# is printed as a metric (milliseconds); nothing asserts a duration.
bench-stream:
	$(GO) test -run '^$$' -bench Stream -benchtime 1x ./reference/

# The browser tests alone (harness/browser): they need /usr/bin/chromium and `npm ci` in
# harness/browser, and skip without them (except in CI, where they fail instead).
browser-test:
	$(GO) test -count=1 ./harness/browser/

# Mutation testing of the reference (docs/mutation.md): every mutant of reference/{store/sqlite,store/postgres,kernel,
# agent,conversation,conversation/live,conversation/participants,conversation/record,conversation/turn,
# conversation/dialogue,envelope,budget,gateway,model} against its package's tests and the in-process
# conformance suite, with a progress line and the time left; writes reports/mutation/.
# About 2,400 mutants at 4 to 15 s each: hours on two cores. MUTATE_FLAGS adds flags (--workers 2).
mutate:
	$(GO) run ./cmd/loomcheck mutate --out reports/mutation $(MUTATE_FLAGS)

# The bounded part CI runs: a fixed-seed sample of MUTATE_SAMPLE mutants per package (and, with
# MUTATE_SINCE=<git ref>, only those in files changed since it). It fails when the kill rate is below
# MUTATE_MIN_KILL_RATE percent. A few minutes.
MUTATE_SAMPLE ?= 3
MUTATE_SEED ?= 1
MUTATE_MIN_KILL_RATE ?= 80
mutate-sample:
	$(GO) run ./cmd/loomcheck mutate --sample $(MUTATE_SAMPLE) --seed $(MUTATE_SEED) --workers 2 \
		--min-kill-rate $(MUTATE_MIN_KILL_RATE) $(if $(MUTATE_SINCE),--since $(MUTATE_SINCE)) --out reports/mutation-sample

# Every fuzz target, one after the other, each for FUZZTIME (default 10s); the tally goes to
# reports/fuzz/tally.tsv. FUZZTARGETS (a regexp) narrows the run.
FUZZTIME ?= 10s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) .ci/fuzz

# The independent linters, at the versions locked in tools/lint/package-lock.json (fetched with
# npm ci when missing): Redocly's recommended rules over spec/openapi.yaml with every warning an
# error, every schema of schemas/ compiled by ajv in strict mode (JSON Schema 2020-12, the other
# schemas loaded for their $refs), and staticcheck with its default checks. Redocly sends no
# telemetry and looks for no update.
LINT_BIN = tools/lint/node_modules/.bin
lint:
	@[ -x $(LINT_BIN)/redocly ] && [ -x $(LINT_BIN)/ajv ] || (cd tools/lint && npm ci --no-audit --no-fund)
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_NOTIFICATIONS=true $(LINT_BIN)/redocly lint --extends recommended-strict --format stylish spec/openapi.yaml
	@for f in schemas/*.schema.json; do \
		refs=$$(for r in schemas/*.schema.json; do [ "$$r" = "$$f" ] || printf ' -r %s' "$$r"; done); \
		$(LINT_BIN)/ajv compile --spec=draft2020 --strict=true -c ajv-formats -s "$$f" $$refs || exit 1; \
	done
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
