# make demo: run Conduit on the embedded default (SQLite, django-q2's ORM broker).
# make test: the whole suite on a throwaway PostgreSQL cluster started here, then mutation-fast.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test fuzz bench bench-cpu bench-send bench-reconcile bench-admin soak mutation mutation-fast venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,bench]"
	touch $@

demo: venv
	@# Stopped by Ctrl-C (130) or SIGTERM (143) is how a demo ends, not an error of make's. The
	@# recipe's shell traps both (a no-op, so the demo still gets them): killed by the terminal's
	@# signal, it would make make print "*** Interrupt" however the demo itself ended.
	@trap : INT TERM; scripts/demo; status=$$?; if [ $$status -eq 130 ] || [ $$status -eq 143 ]; then exit 0; fi; exit $$status

# The tests never read a developer's .demo.env (CONDUIT_ENV_FILE names none): what they run on is
# what they set. scripts/test-tools installs the programs the suite drives, or names what is missing.
# After the suite, the fast mutation subset (mutation-fast): a rule test that stops killing the
# key or table mutants fails make test, not only make mutation.
test: venv
	scripts/test-tools
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	CONDUIT_ENV_FILE=/dev/null SECRET_KEY=test-only-not-secret PG_EXTRA_OPTS="-c fsync=off -c synchronous_commit=off" \
		scripts/with-postgres $(PY) -m pytest $(PYTEST_ARGS)
	$(MAKE) --no-print-directory mutation-fast

# make fuzz: Schemathesis against the served /api/schema/ (a token user, sample rows, DEBUG off);
# FUZZ_ARGS go to schemathesis, e.g. FUZZ_ARGS="--max-examples 500".
fuzz: venv
	SECRET_KEY=fuzz-only-not-secret scripts/with-postgres $(PY) tests/api/schemathesis_run.py $(FUZZ_ARGS)

bench: venv
	SECRET_KEY=bench-only-not-secret scripts/with-postgres $(PY) tests/bench/run.py $(BENCH_ARGS)

# make bench-cpu: instructions and WAL per webhook request, Conduit beside the bare Django floor,
# counted under valgrind's callgrind (steady on a shared machine, where timed figures are not), then
# the CPU a request costs the Python process and its PostgreSQL backend, timed. PostgreSQL loads
# pg_stat_statements for the statements' times where the server scripts/with-postgres runs ($PGBIN,
# else Debian's newest) has it and PG_EXTRA_OPTS names no preload libraries of its own; planning is
# tracked either way (a setting PostgreSQL keeps aside until the module is loaded).
PG_LIB := $(or $(PGBIN),$(lastword $(wildcard /usr/lib/postgresql/*/bin)))/../lib
PGSS_OPTS := $(if $(findstring shared_preload_libraries,$(PG_EXTRA_OPTS))$(findstring shared-preload-libraries,$(PG_EXTRA_OPTS)),,$(if $(wildcard $(PG_LIB)/pg_stat_statements.so),-c shared_preload_libraries=pg_stat_statements)) -c pg_stat_statements.track_planning=on
bench-cpu: venv
	@command -v valgrind >/dev/null || { echo "bench-cpu: valgrind is missing (Debian: apt-get install valgrind)" >&2; exit 1; }
	SECRET_KEY=bench-only-not-secret PG_EXTRA_OPTS="$(PG_EXTRA_OPTS) $(PGSS_OPTS)" \
	  scripts/with-postgres $(PY) tests/bench/instructions.py $(BENCH_ARGS)

bench-send: venv
	SECRET_KEY=bench-only-not-secret scripts/with-postgres $(PY) tests/bench/send.py $(BENCH_ARGS)

bench-reconcile: venv
	SECRET_KEY=bench-only-not-secret scripts/with-postgres $(PY) tests/bench/reconciliation.py $(BENCH_ARGS)

# make soak: three web nodes, two workers on Redis, a streaming replica and the sandbox provider,
# killed -9 and restarted under signed traffic, then checked (scripts/soak; not part of make test,
# whose tests/soak runs `scripts/soak --quick`). It starts its own PostgreSQL pair and Redis.
soak: venv
	SECRET_KEY=soak-only-not-secret $(PY) scripts/soak $(SOAK_ARGS)

bench-admin: venv
	SECRET_KEY=bench-only-not-secret scripts/with-postgres $(PY) tests/bench/admin.py $(BENCH_ARGS)

# mutmut over the deciding rules (scripts/mutation); one worker, niced: the machine is shared.
mutation: venv
	$(PY) -c "import mutmut" 2>/dev/null || $(PY) -m pip install --quiet -e ".[mutation]"
	SECRET_KEY=test-only-not-secret PG_EXTRA_OPTS="-c fsync=off -c synchronous_commit=off" \
		scripts/with-postgres nice -n 10 $(PY) scripts/mutation $(MUTATION_ARGS)

# The subset make test ends with (scripts/mutation --fast, about 3 minutes): the keys group whole
# and the tables group's table mutants; under MUTATION_TARGET it fails.
mutation-fast: venv
	$(PY) -c "import mutmut" 2>/dev/null || $(PY) -m pip install --quiet -e ".[mutation]"
	CONDUIT_ENV_FILE=/dev/null SECRET_KEY=test-only-not-secret PG_EXTRA_OPTS="-c fsync=off -c synchronous_commit=off" \
		scripts/with-postgres nice -n 10 $(PY) scripts/mutation --fast

clean:
	rm -rf $(VENV) conduit.sqlite3 .demo.env .pytest_cache
