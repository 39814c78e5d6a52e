#!/usr/bin/env bash
# Set everything up and run every check and test, including that the wheel installs
# and runs outside the checkout. Exits non-zero on any failure, including a pytest run
# that collects no tests.
set -euo pipefail
# Each phase prints the seconds since the start, so a slow CI run shows where it went.
phase() { echo "== $1 (at ${SECONDS} s)"; }
phase "setup"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

# pytest runs in the background from here, beside the lints, the distribution checks
# and the Rust checks: its tests mostly wait on nodes, processes and Spark, the others
# mostly compile, and the suite holds on a busy machine (docs/testing.md). Its output
# is printed when it ends, after the others'.
phase "python: pytest starts in the background"
PYTEST_LOG="$(mktemp)"
# Two workers; most tests wait on nodes and time, so two halve the wall time on two
# cores. The groups of tests/conftest.py (the Spark tests in one worker) are not kept
# with pytest 9.2 (pytest-xdist issue 1386): each worker starts its own SparkSession
# when it first needs one (docs/testing.md).
python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup >"$PYTEST_LOG" 2>&1 &
PYTEST_PID=$!

checks() {
    set -euo pipefail
    phase "python: ruff, mypy, stubtest"
    ruff check python tests benches spark_jobs
    ruff format --check python tests benches spark_jobs
    mypy
    python -m mypy.stubtest dafka._native
    # The stub's option parameters and docstrings, docs/python.md's option tables and
    # dafka.Log's options are generated from the Rust declarations: fail if stale.
    python scripts/gen_api.py --check

    phase "distribution: the wheel in a fresh venv outside the checkout, and an sdist"
    # What `pip install target/wheels/dafka-*.whl` gives a user: nothing of the
    # checkout (no .venv, no python/ on the path), no extra packages (`import
    # dafka.spark` imports PySpark lazily). The wheel and sdist go to a temporary
    # directory, so no stale wheel of an earlier build is picked up.
    local dist
    dist="$(mktemp -d)"
    # Expanded now: the trap runs when this subshell exits, after `dist` is gone.
    # shellcheck disable=SC2064
    trap "rm -rf '$dist'" EXIT
    maturin build --release --quiet --out "$dist/wheels"
    maturin sdist --out "$dist/sdist"
    "$PY" -m venv "$dist/venv"
    "$dist/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$dist"/wheels/dafka-*.whl
    (
        cd "$dist"
        venv/bin/dafka demo --records 10000
        venv/bin/dafka store --help >/dev/null
        venv/bin/python -c "import dafka, dafka.spark, sys; sys.exit(not dafka.__file__.startswith('$dist/venv/'))"
        # The console's page is package data: it must be in the wheel.
        venv/bin/python -c "import dafka.console as c, sys; sys.exit(b'/api/cluster' not in c.page())"
    )

    phase "rust: fmt, clippy, tests"
    cargo fmt --check
    # The dev profile links the libzmq and libsodium that setup.sh's release build
    # compiled, instead of compiling them again (scripts/c_libs_config.py says how).
    local c_libs
    mapfile -t c_libs < <(python scripts/c_libs_config.py)
    [ "${#c_libs[@]}" -gt 0 ]
    # One clippy run over every target with the bindings on (clippy does not link, so
    # the extension-less `python` feature checks them next to the tests and benches).
    cargo clippy "${c_libs[@]}" --all-targets --features python -- -D warnings
    cargo test "${c_libs[@]}" --all-targets
    phase "rust: long decoder fuzz run"
    # On the dev build just made (its generators optimized: Cargo.toml), not a release
    # build of the library's tests, which cost CI a build of about 200 s.
    DAFKA_FUZZ_CASES="${DAFKA_FUZZ_CASES:-200000}" cargo test "${c_libs[@]}" --lib fuzz_ -- --nocapture
}

# In a subshell of its own, so that `set -e` stops it at its first failure while this
# script still waits for pytest and prints its output.
set +e
(checks)
checks_rc=$?
phase "checks done (exit status $checks_rc); waiting for pytest"
wait "$PYTEST_PID"
rc=$?
set -e
cat "$PYTEST_LOG"
rm -f "$PYTEST_LOG"
phase "end (checks exit status $checks_rc, pytest exit status $rc)"
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
if [ "$checks_rc" -ne 0 ]; then
    exit "$checks_rc"
fi
exit "$rc"
