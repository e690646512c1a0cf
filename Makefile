# The two commands the README promises, and their parts. Twelve targets; their variables are
# written beside them with their defaults.
GO ?= go

.PHONY: all test check lint build conformance conformance-nodes selftest variance mutate fuzz explore bench

all: test conformance

# The tests, the fast gate: formatting, vet and staticcheck, then every test of the module once:
# the unit tests, the crash torture, the browser tests (skipped without chromium) and the whole
# conformance suite in-process (reference/conformance). A few minutes on two idle cores.
# RACE=1 runs the same tests under the race detector (what CI runs; the kit's step timeout is
# then 40 s: LOOMCHECK_STEP_TIMEOUT raises it).
# Under RACE=1 the corpus tests (CORPUS_TESTS: single-goroutine checks over a corpus, which the
# race detector makes three times dearer and finds nothing in) judge a share of their corpus,
# hostile-answer fuzzing a share of its seeds, and the storage growth tests of
# reference/internal/threads send 10 and 20 texts; a pass without the race detector
# (CORPUS_PACKAGES) then judges all of them. CORPUS= leaves that pass out (CI runs it as a step of
# its own).
RACE ?=
CORPUS ?= $(RACE)
CORPUS_TESTS = ^(TestJudgedAsBefore|TestEverySchemaJudgedAsBefore|TestComponentsAgreeWithSchemas|FuzzHostileSUT|TestEveryDefectTypeChecks|TestStorageGrowsLinearlyWithAPeerThread|TestAPersonsConversationSendsTheWindowAndGrowsLinearly)$$
CORPUS_PACKAGES = ./harness/contract ./harness ./harness/selftest ./reference/internal/threads
TEST_TIMEOUT ?= 20m
test: check
	$(GO) test -count=1 $(if $(RACE),-race) -timeout $(TEST_TIMEOUT) ./...
	$(if $(CORPUS),$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '$(CORPUS_TESTS)' $(CORPUS_PACKAGES))

# gofmt, go vet and staticcheck (fetched by version from the module proxy, not a dependency).
STATICCHECK_VERSION ?= v0.8.2
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# The independent linters of the contracts, at the versions locked in tools/lint/package-lock.json
# (fetched with npm ci when missing): Redocly's recommended rules over spec/openapi.yaml with every
# warning an error, and every schema of schemas/ compiled by ajv in strict mode (JSON Schema
# 2020-12, the other schemas loaded for their $refs). Redocly sends no telemetry.
LINT_BIN = tools/lint/node_modules/.bin
lint:
	@[ -x $(LINT_BIN)/redocly ] && [ -x $(LINT_BIN)/ajv ] || (cd tools/lint && npm ci --no-audit --no-fund)
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_NOTIFICATIONS=true $(LINT_BIN)/redocly lint --extends recommended-strict --format stylish spec/openapi.yaml
	@for f in schemas/*.schema.json; do \
		refs=$$(for r in schemas/*.schema.json; do [ "$$r" = "$$f" ] || printf ' -r %s' "$$r"; done); \
		$(LINT_BIN)/ajv compile --spec=draft2020 --strict=true -c ajv-formats -s "$$f" $$refs || exit 1; \
	done

# bin/loomcheck, the kit; bin/loom, the engine's own serving binary (`loomcheck serve` without
# the kit linked in, so that it starts as a plain Go server does).
build:
	$(GO) build -o bin/loomcheck ./cmd/loomcheck
	$(GO) build -o bin/loom ./cmd/loom

# The main job: the whole conformance suite against the reference, writing reports/$(OUT).
#   SUT=inprocess (default)  the engine embedded in the kit
#   SUT=process              bin/loom as a process the kit SIGKILLs to crash it
#   SUT=nodes                NODES bin/loom processes sharing each scenario's database behind one
#                            address; a crash kills the node that served the newest answer about the
#                            scenario's execution (STORE=postgres); PARTITIONS, when set, is their
#                            node.partitions
#   STORE=sqlite (default)   a data directory per scenario
#   STORE=postgres           a database per scenario on the server named by PGHOST, PGPORT, PGUSER,
#                            PGPASSWORD and PGDATABASE (eval "$$(.ci/postgres)" starts a throwaway one)
# OUT defaults to latest for the in-process SQLite run and to $(SUT)-$(STORE) otherwise.
# CONCURRENCY, when set, is how many scenarios run at once (loomcheck run --concurrency; its
# default is 8, or twice the number of CPUs with SUT=nodes).
SUT ?= inprocess
STORE ?= sqlite
NODES ?= 2
PARTITIONS ?=
CONCURRENCY ?=
OUT ?= $(if $(filter inprocess-sqlite,$(SUT)-$(STORE)),latest,$(SUT)-$(STORE))
CONFORMANCE_FLAGS = --out reports/$(OUT) $(if $(filter postgres,$(STORE)),--store postgres) \
	$(if $(filter process nodes,$(SUT)),--sut-cmd "$(CURDIR)/bin/loom") $(if $(filter nodes,$(SUT)),--nodes $(NODES) $(if $(PARTITIONS),--partitions $(PARTITIONS))) \
	$(if $(CONCURRENCY),--concurrency $(CONCURRENCY))
conformance:
ifeq ($(SUT),inprocess)
	@echo "compiling loomcheck (the first time this takes a few minutes: SQLite and the dependencies are built once, then cached)" >&2
	$(GO) run ./cmd/loomcheck run $(CONFORMANCE_FLAGS)
else
	$(MAKE) build
	./bin/loomcheck run $(CONFORMANCE_FLAGS)
endif

# The suite against the reference as three nodes of twelve partitions on PostgreSQL
# (spec/nodes.md, What the kit checks): a crash kills the owner of the scenario's partition.
conformance-nodes:
	$(MAKE) conformance SUT=nodes STORE=postgres NODES=3 PARTITIONS=12

# The self-test (docs/proving.md): every named defect of fixtures/defects built as a variant of the
# reference and run against the scenarios that must catch it, PARALLEL at once. SAMPLE=N judges N
# defects chosen by SEED (the same ones for one seed; CI varies it); SAMPLE=0 (default) all of them,
# about 25 minutes on two cores.
SAMPLE ?= 0
SEED ?= 1
PARALLEL ?= 2
selftest:
	$(GO) run ./cmd/loomcheck selftest --parallel $(PARALLEL) --sample $(SAMPLE) --seed $(SEED) \
		--out reports/selftest$(if $(filter-out 0,$(SAMPLE)),-sample)

# Spec-allowed variants (docs/proving.md): each built and run against the profiles it names; every
# one must stay conformant.
variance:
	$(GO) run ./cmd/loomcheck variance --out reports/variance

# Mutation testing of the reference (docs/mutation.md): each mutant against its package's tests
# and the conformance profiles that reached its line. MUTANTS=N judges a fixed-seed sample of N
# per package (MUTATE_SEED, default 1) and fails below MIN_KILL_RATE percent; MUTANTS=0 (default)
# judges every mutant, hours on two cores. SINCE=<git ref> keeps the files changed since it;
# SHARD=k/n the packages whose place in the list is k modulo n.
MUTANTS ?= 0
SHARD ?=
MUTATE_SEED ?= 1
MIN_KILL_RATE ?= 80
mutate:
	$(GO) run ./cmd/loomcheck mutate --sample $(MUTANTS) --seed $(MUTATE_SEED) --workers 2 \
		$(if $(filter-out 0,$(MUTANTS)),--min-kill-rate $(MIN_KILL_RATE)) $(if $(SINCE),--since $(SINCE)) \
		$(if $(SHARD),--shard $(SHARD)) \
		--out reports/mutation$(if $(filter-out 0,$(MUTANTS)),-sample)

# Every fuzz target, two at a time (FUZZJOBS), each for FUZZTIME (default 10s); the tally goes to
# reports/fuzz/tally.tsv. FUZZTARGETS (a regexp) narrows the run; FUZZSHARD=k/n keeps every n-th
# target from the k-th (default 0/1: all).
FUZZTIME ?= 10s
FUZZSHARD ?= 0/1
fuzz:
	FUZZTIME=$(FUZZTIME) FUZZSHARD=$(FUZZSHARD) GO=$(GO) .ci/fuzz

# Crash exploration: every canonical dialogue crashed right after each of its durable writes and
# restarted (reports/explore/). MAX_POINTS bounds the points per dialogue (0, default: all; 20 to
# 30 s on two cores).
MAX_POINTS ?= 0
explore:
	$(GO) run ./cmd/loomcheck explore $(if $(filter-out 0,$(MAX_POINTS)),--max-points $(MAX_POINTS)) --out reports/explore

# The performance figures as a user meets them, each beside its baseline in the same process
# (loomcheck bench, docs/performance.md): FIGURES (a comma list, default all) over ROUNDS rounds
# (default 5); the figures on PostgreSQL run when PGHOST is set. Nothing fails for being slow.
# DOCS=docs/performance.md rewrites that page's latest table with what was measured.
ROUNDS ?= 5
FIGURES ?=
DOCS ?=
bench:
	$(GO) run ./cmd/loomcheck bench --rounds $(ROUNDS) $(if $(FIGURES),--figures $(FIGURES)) $(if $(DOCS),--docs $(DOCS))
