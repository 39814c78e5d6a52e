"""Prints cargo ``--config`` arguments that hand the dev profile the C libraries the
release build already made (scripts/test.sh uses them).

libzmq (C++, ``third_party/zmq-sys`` through ``third_party/zeromq-src``) and libsodium
(C, the ``libsodium-sys-stable`` crate) are compiled from source by their crates' build
scripts, once per cargo profile: about two minutes at the head of every dev build on
two cores, before any crate that uses ZeroMQ can start. setup.sh's release build
compiled both; cargo's ``links`` overrides (``target.<triple>.<links>`` tables) give
cargo those build scripts' results instead, so in the dev profile they do not run and
the dev checks and tests link the same static libraries (optimised, which only makes
them faster). Nothing else changes: the Rust crates are still built in the dev profile.

Each override repeats what the release build script printed (its ``output`` file):
the libraries to link, where they are, and its metadata (``include``, ``lib``). Fails
with a message saying what to do when the release build has not run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# package directory prefix in target/release/build -> its `links` key
PACKAGES = {"zmq-sys": "zmq", "libsodium-sys-stable": "sodium"}


def build_output(root: Path, package: str) -> list[str]:
    """The newest successful run of `package`'s release build script, as its lines."""
    runs = [
        p
        for p in (root / "target" / "release" / "build").glob(f"{package}-*/output")
        if "cargo:lib=" in p.read_text()
    ]
    if not runs:
        sys.exit(
            f"c_libs_config: no release build of {package} in target/release/build: "
            "run `cargo build --release` (scripts/setup.sh does) first"
        )
    newest = max(runs, key=lambda p: p.stat().st_mtime)
    return newest.read_text().splitlines()


def overrides(lines: list[str]) -> dict[str, list[str] | str]:
    """The `links` override table equivalent to a build script's output lines."""
    table: dict[str, list[str] | str] = {"rustc-link-lib": [], "rustc-link-search": []}
    for line in lines:
        if not line.startswith("cargo:"):
            continue
        key, _, value = line[len("cargo:") :].partition("=")
        if key in ("rustc-link-lib", "rustc-link-search"):
            entries = table[key]
            assert isinstance(entries, list)
            value = value.strip('"')
            if value not in entries:
                entries.append(value)
        elif key in ("include", "lib", "out"):
            table[key] = value
    return table


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    host = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True)
    triple = next(
        line.split(": ", 1)[1] for line in host.stdout.splitlines() if line.startswith("host:")
    )
    for package, links in PACKAGES.items():
        for key, value in overrides(build_output(root, package)).items():
            # TOML values: a JSON string or array of strings is valid TOML.
            print(f"--config=target.{triple}.{links}.{key}={json.dumps(value)}")


if __name__ == "__main__":
    main()
