"""Every code block of README.md and docs/*.md runs as written (issue 36): two of the
README's blocks used to fail as printed.

How each kind of block runs, and what the harness provides:

- ``sh``: with ``bash -e`` in a fresh directory, in a network namespace of its own
  (``unshare -rn``, loopback up): the blocks start towers on the C reference's fixed
  ports (``tcp://*:5556``), which would clash with other tests and other runs, and
  nothing they send can leave it. ``PATH`` starts with this interpreter's directory
  (the ``dafka`` command); ``target`` and ``examples`` link to the checkout's (the
  blocks of docs/operations.md run from one). A line ending in ``&`` starts a server
  (a tower, a store, a consumer): once the block's other commands succeeded, every
  tower and store it started must print its ready line (and none may exit), then
  they are stopped. Some blocks' output is checked too (``EXPECT``).
- ``python``: the same way, as a script, after a prelude that defines the names a
  fragment assumes (``PRELUDES``, e.g. a running ``Producer`` named ``p``); a block
  that names ``10.0.0.1`` gets that address on the namespace's loopback. Those of
  Spark run in this process with the session fixture and the names they assume:
  ``spark``, ``tower`` (a running tower's endpoint, with a store), and ``orders`` /
  ``df`` (a small DataFrame with every column they name).
- ``toml`` (a config fragment): appended to nothing, it is the ``--config`` file of a
  ``dafka-store`` started with the files it names, which must run.
- no language: sample output, whose lines must have the fields of the lines the
  ``sh`` block before it printed.

A block that needs files made by an earlier block of its document (keys from
``dafka keygen``) runs after the ``sh`` blocks before it that run ``keygen``.

Not run: README's first two blocks set up and test this checkout (``bash
scripts/test.sh`` is what CI runs, and it builds and installs the wheel as the
second block does); running them here would run this test again. They are checked
to name what CI runs.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import dafka

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    out: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        out.append(Block(path, start + 1, m.group(1), "\n".join(body) + "\n"))
        i += 1
    return out


BLOCKS = [b for p in DOCS for b in blocks_of(p)]

#: README's blocks that set up and test this checkout, with what CI runs for each.
CI_RUNS = {
    "bash scripts/demo.sh": "dafka demo --records",
    "maturin build --release && pip install": "maturin build --release",
}

#: Text that the output of a block (by a line of it) must hold.
EXPECT = {
    "printf 'oslo": ["oslo\t21.5", "rome\t22.0", "PARTITION", "sent 2 records"],
    "seq 10 | dafka produce": ["sent 10 records", "\nok\n"],
    "print(dafka.offsets_for_times": ["21.5", "oslo"],
    'print(store.partitions("weather"))': ["21.5", "PartitionInfo"],
    'log.append("weather"': ["22.9"],
    'address_seed="orders-service-1"': [" 0\n", " 3\n"],
    "dafka.describe_topics(towers=towers)": ["weather 1 "],
    "dafka topics --json": ['"topic": "weather"', '"records": 5'],
}

#: Names a fragment assumes, defined before it runs (by a line of the block), and a
#: check run after it.
PRELUDES = {
    'p.send(b"21.5", key=b"oslo"': (
        """
        import time
        import dafka
        tower = dafka.Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0")
        store = dafka.Store("prelude-store", towers=[tower.endpoint])
        p = dafka.Producer("weather", towers=[tower.endpoint])
        p.wait_for_stores(1, timeout=60)
        consumer = dafka.Consumer(["weather"], towers=[tower.endpoint])
        ts = int(time.time() * 1000)
        values, keys = [b"22.0", b"22.4"], [b"rome", None]
        """,
        """
        assert (r.offset, r.value, r.key, r.headers) == (
            0, b"21.5", b"oslo", [("unit", b"C"), ("trace", b"\\x01")]), r
        assert (r.timestamp, r.timestamp_type) == (ts, dafka.TIMESTAMP_CREATE), r
        """,
    ),
    "dafka.keygen(": ("import dafka\n", "assert p.address and tower.endpoint\n"),
    'tower = dafka.Tower(beacon_in="tcp://10.0.0.1:5556"': (
        "import dafka\n",
        """
        assert tower.endpoint.startswith("tcp://10.0.0.1:5556,5557;curve="), tower.endpoint
        assert store.address
        """,
    ),
}


def _for(table: dict[str, Any], block: Block) -> Any:
    hits = [v for k, v in table.items() if k in block.text]
    assert len(hits) <= 1, f"{block.name} matches several entries"
    return hits[0] if hits else None


def netns_works() -> bool:
    r = subprocess.run(
        ["unshare", "-rn", "sh", "-c", "ip link set lo up"],
        capture_output=True,
        check=False,
    )
    return r.returncode == 0


@pytest.fixture(scope="module")
def netns() -> None:
    assert shutil.which("unshare") and netns_works(), (
        "the docs' shell blocks run in a network namespace of their own (`unshare -rn`, "
        "with `ip`): this machine does not allow one"
    )


def workspace(tmp_path: Path, block: Block) -> Path:
    """A fresh directory for ``block`` with what it assumes: the checkout's ``target``
    and ``examples``, and what the ``keygen`` blocks before it in its file made."""
    (tmp_path / "target").symlink_to(ROOT / "target")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for earlier in blocks_of(block.path):
        if earlier.line >= block.line:
            break
        if earlier.lang == "sh" and "keygen" in earlier.text:
            run_sh(earlier, tmp_path)
    return tmp_path


def environment() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


#: Appended to a sh block: with every foreground command done, wait for the
#: background ones (servers: none may exit).
EPILOGUE = """
set +e
echo "HARNESS: block done"
while [ -n "$(jobs -p)" ]; do
    wait -n
    rc=$?
    if [ "$rc" -ne 127 ]; then echo "HARNESS: a background command exited with $rc"; exit 1; fi
done
"""

SERVER = re.compile(
    r"^\s*(?:target/release/dafka-(tower|store)|dafka (tower|store))\b[^#\n]*&\s*(?:#.*)?$", re.M
)
READY = re.compile(r"^dafka-(tower endpoint|store address)=", re.M)


def netns_command(script: Path, extra_addresses: list[str], runner: str) -> list[str]:
    setup = "ip link set lo up && " + "".join(
        f"ip addr add {a}/32 dev lo && " for a in extra_addresses
    )
    return ["unshare", "-rn", "bash", "-c", f'{setup}exec {runner} "$0"', str(script)]


def run_sh(block: Block, cwd: Path) -> str:
    """Runs a sh block (see the module's doc); returns what it printed."""
    script = cwd / f"block-{block.line}.sh"
    script.write_text(block.text + EPILOGUE)
    servers = len(SERVER.findall(block.text))
    log = cwd / f"block-{block.line}.out"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            netns_command(script, [], "bash -e"),
            cwd=cwd,
            env=environment(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 400
        while True:
            text = log.read_text(errors="replace")
            done = "HARNESS: block done" in text
            if proc.poll() is not None:
                assert proc.returncode == 0 and done, f"{block.name} failed:\n{text}"
                break
            if done and len(READY.findall(text)) >= servers:
                break
            assert time.monotonic() < deadline, f"{block.name} did not finish:\n{text}"
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
    text = log.read_text(errors="replace")
    assert len(READY.findall(text)) == servers, f"{block.name}: servers not ready:\n{text}"
    return text


def run_python(block: Block, cwd: Path) -> str:
    prelude, check = _for(PRELUDES, block) or ("", "")
    script = cwd / f"block-{block.line}.py"
    script.write_text(textwrap.dedent(prelude) + block.text + textwrap.dedent(check))
    extra = ["10.0.0.1"] if "10.0.0.1" in block.text else []
    r = subprocess.run(
        netns_command(script, extra, sys.executable),
        cwd=cwd,
        env=environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=400,
        check=False,
    )
    text = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 0, f"{block.name} failed:\n{text}"
    return text


def check_output(block: Block, text: str) -> None:
    for want in _for(EXPECT, block) or []:
        assert want in text, f"{block.name}: {want!r} not in its output:\n{text}"


def is_spark(block: Block) -> bool:
    return "import dafka.spark" in block.text


RUN = [b for b in BLOCKS if not any(k in b.text for k in CI_RUNS)]


def test_every_block_is_run_or_named() -> None:
    """A new block is run by the tests below (or this fails, naming it)."""
    kinds = {"sh", "python", "toml", ""}
    odd = [b.name for b in BLOCKS if b.lang not in kinds]
    assert not odd, f"blocks of a kind no test runs: {odd}"
    assert len(BLOCKS) - len(RUN) == len(CI_RUNS)


def test_readme_setup_blocks_name_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci
    test_sh = (ROOT / "scripts" / "test.sh").read_text()
    demo_sh = (ROOT / "scripts" / "demo.sh").read_text()
    for block in BLOCKS:
        for key, ran in CI_RUNS.items():
            if key in block.text:
                assert ran in test_sh or ran in demo_sh, (block.name, ran)


@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "sh"], ids=lambda b: b.name)
def test_sh_block_runs(block: Block, tmp_path: Path, netns: None) -> None:
    check_output(block, run_sh(block, workspace(tmp_path, block)))


@pytest.mark.parametrize(
    "block", [b for b in RUN if b.lang == "python" and not is_spark(b)], ids=lambda b: b.name
)
def test_python_block_runs(block: Block, tmp_path: Path, netns: None) -> None:
    check_output(block, run_python(block, workspace(tmp_path, block)))


@pytest.mark.parametrize("block", [b for b in RUN if b.lang == ""], ids=lambda b: b.name)
def test_sample_output_is_what_is_printed(block: Block, tmp_path: Path, netns: None) -> None:
    """Each line has the fields of a line the sh block before it printed."""
    before = [b for b in blocks_of(block.path) if b.line < block.line and b.lang == "sh"][-1]
    printed = run_sh(before, workspace(tmp_path, before)).splitlines()

    def shape(line: str) -> list[str]:
        return re.findall(r"(\S+)=", line)

    shapes = {tuple(shape(line)) for line in printed if "=" in line}
    for line in block.text.splitlines():
        assert tuple(shape(line)) in shapes, f"{block.name}: {line!r} is not printed so"


@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "toml"], ids=lambda b: b.name)
def test_toml_block_configures_a_store(block: Block, tmp_path: Path) -> None:
    """The fragment is the config file of a store, beside the files it names (its
    certificate and a trust directory, then given a secure tower): the store runs, and
    serves metrics where a ``[metrics]`` table says."""
    cert = re.search(r'cert = "([^"]+)"', block.text)
    trust = re.search(r'trust = "([^"]+)"', block.text)
    secure: dict[str, Any] = {}
    if cert or trust:
        assert cert and trust, block.text
        keys = tmp_path / Path(cert.group(1)).parent
        name = Path(cert.group(1)).name.removesuffix(".key_secret")
        dafka.keygen(keys, name, role="store")
        dafka.keygen(tmp_path / "tower-keys", "tower", role="tower")
        trusted = tmp_path / trust.group(1)
        trusted.mkdir(parents=True)
        for public in [keys / f"{name}.key", tmp_path / "tower-keys" / "tower.key"]:
            shutil.copy(public, trusted)
        secure = {"cert": tmp_path / "tower-keys" / "tower.key_secret", "trust": trusted}
    config = tmp_path / "store.toml"
    config.write_text(block.text)
    with dafka.Tower(
        beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0", **secure
    ) as tower:
        proc = subprocess.Popen(
            [
                ROOT / "target" / "release" / "dafka-store",
                "--config",
                config,
                "--tower",
                tower.endpoint,
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline().decode()
            assert first.startswith("dafka-store address="), first + proc.stdout.read().decode()
            assert tower.endpoint and tower.stats()["auth_refused"] == 0
            listen = re.search(r'listen = "([^"]+)"', block.text)
            if listen:
                assert first.split()[-1] == f"metrics={listen.group(1)}", first
                url = f"http://{listen.group(1)}/metrics"
                with urllib.request.urlopen(url, timeout=30) as r:
                    assert b"dafka_store_appended_total" in r.read()
        finally:
            proc.terminate()
            proc.wait(timeout=60)


@pytest.fixture
def spark_names(spark: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """What the Spark blocks assume: ``spark``, ``tower`` (with a store behind it),
    and ``orders`` / ``df``, a DataFrame with every column they name."""
    from datetime import UTC, datetime

    with (
        dafka.Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
        dafka.Store(tmp_path / "store", towers=[tower.endpoint]),
    ):
        at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
        rows = [(b"v%d" % i, f"c{i % 3}", at, f"u{i % 2}", at) for i in range(20)]
        df = spark.createDataFrame(
            rows,
            "value binary, customer_id string, ordered_at timestamp, user_id string, "
            "event_time timestamp",
        )
        yield {"spark": spark, "tower": tower.endpoint, "orders": df, "df": df}


@pytest.mark.parametrize(
    "block", [b for b in RUN if b.lang == "python" and is_spark(b)], ids=lambda b: b.name
)
def test_spark_block_runs(block: Block, spark_names: dict[str, Any]) -> None:
    names = dict(spark_names)
    exec(compile(block.text, block.name, "exec"), names)
    topic = "orders" if "orders" in block.text else "events"
    got = dafka.offsets(topic, towers=[spark_names["tower"]], timeout=60)
    assert sum(nxt - first for first, nxt in got.values()) > 0, got
