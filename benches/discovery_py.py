"""How long a new node takes to find its peers: what every short-lived client
(a Spark read task's ``fetch_range``, ``heads``) pays before its first record.
Run after ``maturin develop --release``.

A tower and a store run on 127.0.0.1 (towers only, no static peers); the store
holds 10 records of one partition. Then, R times each:

- ``fetch_range`` of those 10 records by a new client (discovery both ways,
  FETCH, answers);
- ``heads`` of the topic (discovery, GET-HEADS, plus its settle time of 0.5 s
  with no new answer: the part of it that is not discovery);
- ``offsets`` of the topic excluding its one partition from the first-offset
  probe (what a streaming micro-batch's plan asked for, per topic, with a new
  client each time);
- a round of one :class:`dafka.HeadsWatch` kept across the runs (what the
  streaming source plans through now), after its first round;
- the same round with the first-offset probe of the partition (what a
  micro-batch pays for a partition new to the query): it begins at offset 0,
  so the probe ends on its answer;
- the same for a second partition (written with :class:`dafka.Log` before the
  store starts) that begins at offset 5, as after retention: its probe waits
  its settle time (0.5 s) for a lower answer from another store, as every
  probe did before session 11;
- three rounds of that watch, each after a 5 s pause: longer than the store's
  beacon timeout (4 s), so a client that did nothing between rounds had been
  dropped by the store and its next round was a full one (reconnect, settle).

Baseline in the same run: a fresh pyzmq SUB connecting to a bound XPUB that
answers its subscription with one message (the least a join can cost: a TCP
connect and a ZeroMQ handshake each way).

``python benches/discovery_py.py [R]`` (default 20). Results: benches/RESULTS.md,
"Discovery".
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import zmq

import dafka


def baseline(r: int) -> list[float]:
    ctx = zmq.Context.instance()
    xpub = ctx.socket(zmq.XPUB)
    xpub.setsockopt(zmq.LINGER, 0)
    port = xpub.bind_to_random_port("tcp://127.0.0.1")
    out = []
    for _ in range(r):
        t0 = time.perf_counter()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVTIMEO, 10_000)
        sub.setsockopt(zmq.SUBSCRIBE, b"x")
        sub.connect(f"tcp://127.0.0.1:{port}")
        assert xpub.recv() == b"\x01x"
        xpub.send(b"x1")
        assert sub.recv() == b"x1"
        out.append(time.perf_counter() - t0)
        sub.close()
        assert xpub.recv() == b"\x00x"  # gone before the next one joins
    xpub.close()
    return out


def main() -> None:
    r = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    trimmed = "B" * 32
    with (
        tempfile.TemporaryDirectory() as d,
        dafka.Tower(beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0") as tower,
    ):
        towers = [tower.endpoint]
        with dafka.Log(f"{d}/log", retain_hours=None) as log:
            log.append_many("t", trimmed, 5, [b"y" * 100] * 3)
        with dafka.Store(d, towers=towers):
            with dafka.Producer("t", towers=towers) as p:
                if p.wait_for_stores(1, timeout=10.0) < 1:
                    raise SystemExit("the producer found no store")
                p.send_many([b"x" * 100] * 10)
                if p.flush(10.0) != 0:
                    raise SystemExit("the store did not ACK")
                partition = p.address
            fetch, heads, plan, watch, probe0, probe5 = [], [], [], [], [], []
            w = dafka.HeadsWatch("t", towers=towers)
            w.offsets(exclude=[partition, trimmed], timeout=30.0)  # the full first round
            for _ in range(r):
                t0 = time.perf_counter()
                got, _lost = dafka.fetch_range("t", partition, 0, 10, towers=towers, timeout=30.0)
                fetch.append(time.perf_counter() - t0)
                if len(got) != 10:
                    raise SystemExit(f"fetch_range read {len(got)} of 10 records")
                t0 = time.perf_counter()
                if partition not in dafka.heads("t", towers=towers, timeout=30.0):
                    raise SystemExit("heads did not list the partition")
                heads.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                if partition not in dafka.offsets("t", towers=towers, exclude=[partition, trimmed]):
                    raise SystemExit("offsets did not list the partition")
                plan.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                if partition not in w.offsets(exclude=[partition, trimmed], timeout=30.0):
                    raise SystemExit("the HeadsWatch round did not list the partition")
                watch.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                if w.offsets(partitions=[partition], timeout=30.0)[partition] != (0, 10):
                    raise SystemExit("the HeadsWatch probe did not find offset 0")
                probe0.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                if w.offsets(partitions=[trimmed], timeout=30.0)[trimmed] != (5, 8):
                    raise SystemExit("the HeadsWatch probe did not find offset 5")
                probe5.append(time.perf_counter() - t0)
            paused = []
            for _ in range(3):
                time.sleep(5.0)
                t0 = time.perf_counter()
                if partition not in w.offsets(exclude=[partition, trimmed], timeout=30.0):
                    raise SystemExit("the HeadsWatch round did not list the partition")
                paused.append(time.perf_counter() - t0)
            rounds = w.stats()
            w.close()
    base = baseline(r)
    med = statistics.median

    def ms(xs: list[float]) -> str:
        return f"median {med(xs) * 1e3:.1f} ms, max {max(xs) * 1e3:.1f} ms"

    print(f"{r} runs each")
    print(f"fetch_range of 10 records by a new client: {ms(fetch)}")
    print(f"heads by a new client (0.5 s of it is settling): {ms(heads)}")
    print(f"offsets excluding the partition, new client: {ms(plan)}")
    print(f"HeadsWatch round after the first: {ms(watch)} ({rounds})")
    print(f"  with the probe of a partition beginning at 0: {ms(probe0)}")
    print(f"  with the probe of a partition beginning at 5: {ms(probe5)}")
    print(f"  after a 5 s pause (3 rounds): {ms(paused)}")
    print(f"baseline, raw pyzmq SUB joining an XPUB: {ms(base)}")
    print(f"fetch_range / baseline: {med(fetch) / med(base):.1f}x")


if __name__ == "__main__":
    main()
