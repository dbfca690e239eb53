# The project's verbs. Each target creates the virtual environment it needs.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NODE_STAMP := tests/node/node_modules/.installed
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: help run test test-fast test-sdk-oldest lint format bench clean browser test-js postgres lock sdk-drift dist

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-9s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

RUN_STAMP := $(VENV)/.installed-run

# setuptools ends every editable install with an "Editable installation" notice (a warning of its
# category InformationOnly, whatever the layout or mode: no setting turns it off). This project's
# own editable installs filter that one message; every other warning still shows.
EDITABLE := PYTHONWARNINGS="$${PYTHONWARNINGS:+$$PYTHONWARNINGS,}ignore:Editable installation"

# Every install takes its versions from a committed lock (pip constraints, written by `make lock`),
# so a fresh clone tests what main was tested with. The package itself keeps lower bounds only.
LOCK        := locks/python.txt
OLDEST_LOCK := locks/python-oldest.txt

# `make run` needs only what serving needs; the dev toolchain comes with `make test`.
$(RUN_STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade -c $(LOCK) pip
	$(EDITABLE) $(BIN)/python -m pip install --quiet -c $(LOCK) -e .
	touch $(RUN_STAMP)

# pip compiles what it installs one file at a time; compileall does it on every core.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade -c $(LOCK) pip
	$(EDITABLE) $(BIN)/python -m pip install --quiet --no-compile -c $(LOCK) -e '.[dev]'
	$(BIN)/python -m compileall -q -j 0 $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') >/dev/null || true
	touch $(RUN_STAMP) $(STAMP)

$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	cd tests/node && npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

# The Go SDK's flows (tests/sdk/go): one source built against the newest openai-go (go.mod) and the
# oldest with the beta Agents sessions (go.oldest.mod, before Responses WebSockets), from the
# committed go.sum files only (-mod=readonly); the module cache is only a cache.
GO_BUILD := .build/sdk-go
GO_STAMP := $(GO_BUILD)/.built
$(GO_STAMP): $(wildcard tests/sdk/go/*.go tests/sdk/go/go.*)
	cd tests/sdk/go && go build -mod=readonly -buildvcs=false -o $(abspath $(GO_BUILD))/sdkflows .
	cd tests/sdk/go && go build -mod=readonly -buildvcs=false -modfile=go.oldest.mod -tags no_responses_websocket \
		-o $(abspath $(GO_BUILD))/sdkflows-oldest .
	touch $(GO_STAMP)

# The official Java SDK's flows (tests/sdk/test_java.py): Maven builds one source twice, fetching
# openai-java and its dependencies from Maven Central, against the two releases pom.xml names (the
# newest, and with -P earlier the earlier one), each into tests/sdk/java/target/openai-java-<release>
# (classes, and every jar in lib/).
JAVA_STAMP := tests/sdk/java/target/.built
$(JAVA_STAMP): tests/sdk/java/pom.xml $(wildcard tests/sdk/java/src/main/java/ptcemulator/sdk/*.java)
	cd tests/sdk/java && mvn -q -B process-classes && mvn -q -B -P earlier process-classes
	touch $(JAVA_STAMP)

JS_STAMP := js/node_modules/.installed
$(JS_STAMP): js/package.json js/package-lock.json
	cd js && npm ci --no-audit --no-fund --loglevel=error
	touch $(JS_STAMP)

test-js: $(STAMP) $(JS_STAMP) ## the npm package in js/ (Vitest, against this checkout's server)
	cd js && PTC_EMULATOR_COMMAND=$(abspath $(BIN))/ptc-emulator ./node_modules/.bin/vitest run

# The trace inspector's tests drive the distribution's headless Chromium and its chromedriver.
# Installed here where that is possible (as root, with apt-get); elsewhere those tests skip and say why.
browser:
	@if ! command -v chromium >/dev/null 2>&1 || [ ! -x /usr/bin/chromedriver ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) \
				>/dev/null 2>&1 || true; \
		fi; \
	fi

# The replica tests start a throwaway PostgreSQL cluster of their own (tests/replicas/cluster.py).
# The server is installed here where that is possible (as root, with apt-get), without the main
# cluster the package would otherwise create and start on port 5432; elsewhere those tests skip.
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			mkdir -p /etc/postgresql-common/createcluster.d && \
			echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/ptc-emulator.conf && \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) \
				>/dev/null 2>&1 || true; \
		fi; \
	fi

run: $(RUN_STAMP) ## serve the bundled demo scenarios (--demo) with SQLite on 127.0.0.1:8000 (PORT=, HOST=)
	$(BIN)/ptc-emulator serve --demo --host $(HOST) --port $(PORT) --store sqlite --data-dir .data

lint: $(STAMP) ## ruff, mypy and the import-layer contract
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=.typing $(BIN)/lint-imports  # the links: grimp walks folders, not the editable mapping
	$(BIN)/mypy

format: $(STAMP) ## sort the imports and format the code with ruff (what `make lint` checks)
	$(BIN)/ruff check --select I --fix .
	$(BIN)/ruff format .

# Three pytest-xdist workers on two cores: most tests wait on servers, processes and sockets, so a
# third worker fills the time the other two wait. One file stays on one worker (module servers).
JOBS ?= 3

# The suite starts about a hundred Python processes (servers, CLIs, inner pytest runs): each would
# compile this project's modules again if an inherited PYTHONDONTWRITEBYTECODE kept the bytecode.
test: $(STAMP) $(NODE_STAMP) $(GO_STAMP) $(JAVA_STAMP) browser postgres lint ## the whole suite, after the lint step (JOBS=0: in this one process)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(JOBS) --dist loadfile
	$(MAKE) --no-print-directory test-js

# The lowest openai release the package supports (pyproject: openai>=3.51), in a virtual
# environment of its own. `make test` runs the whole suite once, on the locked newest; this runs
# the client-facing tests (marked `sdk`: an official client accepts what the server sends, the
# server what the client sends) on the oldest. CI runs both. No `sdk` test needs the browser or
# PostgreSQL.
OLDEST_SDK   ?= 3.51.0
OLDEST_VENV  := .venv-openai-$(OLDEST_SDK)
OLDEST_STAMP := $(OLDEST_VENV)/.installed

$(OLDEST_STAMP): pyproject.toml $(OLDEST_LOCK)
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet --upgrade -c $(OLDEST_LOCK) pip
	$(EDITABLE) $(OLDEST_VENV)/bin/python -m pip install --quiet --no-compile -c $(OLDEST_LOCK) -e '.[dev]' 'openai==$(OLDEST_SDK)'
	touch $(OLDEST_STAMP)

test-sdk-oldest: $(OLDEST_STAMP) $(NODE_STAMP) $(GO_STAMP) $(JAVA_STAMP) ## the client-facing tests (-m sdk) on the oldest supported openai (3.51)
	$(OLDEST_VENV)/bin/python -c 'import openai; assert openai.__version__ == "$(OLDEST_SDK)", openai.__version__'
	PYTHONDONTWRITEBYTECODE= $(OLDEST_VENV)/bin/python -m pytest -m sdk -n $(JOBS) --dist loadfile -q

# With bytecode written and read, as `make test` has it: an inherited PYTHONDONTWRITEBYTECODE made
# every run compile this project's modules and rewrite every test module's asserts again.
test-fast: $(STAMP) ## the unit tier: the app and engine on a fake runner, pure functions (no V8, no server)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m unit tests/unit

bench: $(STAMP) ## the sandbox and HTTP benchmarks (a few minutes; bench/load.py runs on its own)
	$(BIN)/python bench/sandbox_bench.py
	$(BIN)/python bench/http_bench.py
	$(BIN)/python bench/floor.py

lock: ## resolve the newest dependencies afresh into locks/ (commit that on its own, once make test passes)
	$(EDITABLE) PYTHON=$(PYTHON) locks/refresh.sh $(HOLD)

sdk-drift: ## the drift guard against the newest openai and openai-agents on PyPI, in a throwaway venv, with what moved since the lock
	PYTHON=$(PYTHON) JOBS=$(JOBS) locks/sdk-drift.sh

# The version is spelt once, in _root/__init__.py (ptc_emulator.__version__): the Python package
# reads it there, and `make dist` writes it into js/package.json (and its lock) before packing.
# tests/unit/test_release.py fails when a commit leaves those apart, or CHANGELOG.md's newest
# entry names another version. The build runs with PYTHONDONTWRITEBYTECODE unset (set, setuptools
# prints that it skips bytecode, which no wheel ships anyway), verbosely, so a setuptools warning
# shows (tests/packaging/test_dist.py checks there is none). The npm package is packed from a copy
# of what it ships plus the LICENSE, which lives above js/ (npm packs only its own folder's files).
VERSION   := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' _root/__init__.py)
DIST      ?= dist
NPM_STAGE := .build/npm

dist: $(STAMP) ## the release: sdist and wheel (checked by twine) and the npm package of js/, in dist/ (DIST=)
	mkdir -p $(DIST)
	rm -f $(DIST)/ptc_emulator-*.tar.gz $(DIST)/ptc_emulator-*.whl $(DIST)/ptc-emulator-*.tgz
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m build --no-isolation --outdir $(DIST) .
	$(BIN)/twine check --strict $(DIST)/ptc_emulator-$(VERSION).tar.gz $(DIST)/ptc_emulator-$(VERSION)-py3-none-any.whl
	cd js && npm version --no-git-tag-version --allow-same-version $(VERSION) >/dev/null
	rm -rf $(NPM_STAGE) && mkdir -p $(NPM_STAGE)
	cp -R js/package.json js/README.md js/src LICENSE $(NPM_STAGE)/
	cd $(NPM_STAGE) && npm pack --quiet --pack-destination $(abspath $(DIST))

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .venv-openai-* .build tests/sdk/java/target tests/node/node_modules js/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache \
		build dist *.egg-info .data
	find . -name __pycache__ -type d -not -path './.git/*' -prune -exec rm -rf {} +
