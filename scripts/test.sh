#!/usr/bin/env bash
# Set everything up and run every check and test, including that the wheel installs
# and runs outside the checkout. Exits non-zero on any failure, including a pytest run
# that collects no tests.
set -euo pipefail
# Each phase prints the seconds since the start, so a slow CI run shows where it went.
phase() { echo "== $1 (at ${SECONDS} s)"; }
phase "setup"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

phase "rust: fmt, clippy, tests"
cargo fmt --check
# One clippy run over every target with the bindings on (clippy does not link, so the
# extension-less `python` feature checks them next to the tests and benches).
cargo clippy --all-targets --features python -- -D warnings
cargo test --all-targets
phase "rust: long decoder fuzz run"
DAFKA_FUZZ_CASES="${DAFKA_FUZZ_CASES:-200000}" cargo test --release --lib fuzz_ -- --nocapture

phase "python: ruff, mypy, stubtest"
ruff check python tests benches spark_jobs
ruff format --check python tests benches spark_jobs
mypy
python -m mypy.stubtest dafka._native
# The stub's option parameters and docstrings, docs/python.md's option tables and
# dafka.Log's options are generated from the Rust declarations: fail if stale.
python scripts/gen_api.py --check

phase "distribution: the wheel in a fresh venv outside the checkout, and an sdist"
# What `pip install target/wheels/dafka-*.whl` gives a user: nothing of the checkout
# (no .venv, no python/ on the path), no extra packages (`import dafka.spark` imports
# PySpark lazily). The wheel and sdist go to the temporary directory, so no stale wheel
# of an earlier build is picked up.
dist_start=$SECONDS
DIST="$(mktemp -d)"
trap 'rm -rf "$DIST"' EXIT
maturin build --release --quiet --out "$DIST/wheels"
maturin sdist --out "$DIST/sdist"
"$PY" -m venv "$DIST/venv"
"$DIST/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$DIST"/wheels/dafka-*.whl
(
    cd "$DIST"
    venv/bin/dafka demo --records 10000
    venv/bin/dafka store --help >/dev/null
    venv/bin/python -c "import dafka, dafka.spark, sys; sys.exit(not dafka.__file__.startswith('$DIST/venv/'))"
)
echo "distribution checks: $((SECONDS - dist_start)) s"

phase "python: pytest"
set +e
# Two workers: the Spark tests (one shared SparkSession) in one, the standalone Spark
# cluster of the speculation test and the rest in the other (tests/conftest.py); most
# tests wait on nodes and time, so two halve the wall time on two cores.
python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup
rc=$?
set -e
phase "end (pytest exit status $rc)"
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
exit "$rc"
