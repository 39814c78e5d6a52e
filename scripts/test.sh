#!/usr/bin/env bash
# Set everything up and run every check and test. Exits non-zero on any failure,
# including a pytest run that collects no tests.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

echo "== rust: fmt, clippy, tests"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
cargo clippy --lib --features python -- -D warnings
cargo test --all-targets
echo "== rust: long decoder fuzz run"
DAFKA_FUZZ_CASES="${DAFKA_FUZZ_CASES:-200000}" cargo test --release --lib fuzz_ -- --nocapture

echo "== python: ruff, mypy, stubtest"
ruff check python tests benches spark_jobs
ruff format --check python tests benches spark_jobs
mypy
python -m mypy.stubtest dafka._native

echo "== python: pytest"
set +e
python -m pytest -q -p no:cacheprovider
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
exit "$rc"
