"""Spark against a secure cluster: the ``dafka`` data source writes and reads with the
``cert`` and ``trust`` options; without them the secure tower is refused."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dafka
import dafka.spark

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

FAST = {"beacon_interval": 0.2, "beacon_timeout": 3.0}


class Secure:
    """A secure tower and store, and the certificates of a writer and a reader."""

    def __init__(self, root: Path) -> None:
        self.trust = root / "trust"
        self.secret = root / "secret"
        self.trust.mkdir(parents=True)
        for name, role in {
            "tower": "tower",
            "store": "store",
            "writer": "producer",
            "reader": "consumer",
        }.items():
            public, _ = dafka.keygen(self.secret, name, role=role)
            public.rename(self.trust / public.name)
        self.tower = dafka.Tower(
            beacon_in="tcp://127.0.0.1:0", beacon_out="tcp://127.0.0.1:0", **self.of("tower")
        )
        self.store = dafka.Store(
            root / "store",
            towers=[self.tower.endpoint],
            **self.of("store"),
            **FAST,  # type: ignore[arg-type]
        )

    def of(self, name: str) -> dict[str, str]:
        return {"cert": str(self.secret / f"{name}.key_secret"), "trust": str(self.trust)}

    def close(self) -> None:
        self.store.close()
        self.tower.close()


@pytest.fixture
def secure(tmp_path: Path) -> Iterator[Secure]:
    s = Secure(tmp_path)
    try:
        yield s
    finally:
        s.close()


def test_spark_writes_and_reads_a_secure_cluster(spark: Any, secure: Secure) -> None:
    df = spark.range(0, 5000, 1, 2).selectExpr("cast(id AS string) AS value")
    (
        df.write.format("dafka")
        .option("topic", "sec")
        .option("towers", secure.tower.endpoint)
        .option("cert", secure.of("writer")["cert"])
        .option("trust", secure.of("writer")["trust"])
        .option("beaconInterval", "0.2")
        .option("flushTimeout", "60")
        .mode("append")
        .save()
    )
    assert len(secure.store.partitions("sec")) == 2
    got = (
        spark.read.format("dafka")
        .option("subscribe", "sec")
        .option("towers", secure.tower.endpoint)
        .option("cert", secure.of("reader")["cert"])
        .option("trust", secure.of("reader")["trust"])
        .option("beaconInterval", "0.2")
        .option("fetchTimeout", "20")
        .load()
        .collect()
    )
    assert Counter(bytes(r.value) for r in got) == Counter(str(i).encode() for i in range(5000))
    # Without a certificate the secure tower cannot be used at all.
    with pytest.raises(Exception, match="cert and trust"):
        (
            spark.read.format("dafka")
            .option("subscribe", "sec")
            .option("towers", secure.tower.endpoint)
            .load()
            .collect()
        )


def test_spark_streams_into_a_secure_cluster(spark: Any, secure: Secure, tmp_path: Path) -> None:
    """A streaming write reads where each task's partition stands (exactly-once): in
    secure mode with a consumer-role ``readCert`` beside its producer-role ``cert``;
    without one the query fails as it starts, saying so."""
    import json

    src = tmp_path / "src"
    src.mkdir()
    for f in range(2):
        lines = [json.dumps({"value": f"f{f}-{i}"}) for i in range(500)]
        (src / f"part-{f}.json").write_text("\n".join(lines) + "\n")
    stream = spark.readStream.schema("value string").option("maxFilesPerTrigger", 1).json(str(src))

    def start(ckpt: str, **extra: str) -> Any:
        w = (
            stream.writeStream.format("dafka")
            .option("topic", "sec-stream")
            .option("towers", secure.tower.endpoint)
            .option("cert", secure.of("writer")["cert"])
            .option("trust", secure.of("writer")["trust"])
            .option("beaconInterval", "0.2")
            .option("flushTimeout", "60")
            .option("checkpointLocation", str(tmp_path / ckpt))
            .trigger(availableNow=True)
        )
        for k, v in extra.items():
            w = w.option(k, v)
        return w.start()

    with pytest.raises(Exception, match="needs option\\('readCert', PATH\\)"):
        dafka.spark.run_query(lambda: start("c1"), timeout=240)
    q = dafka.spark.run_query(
        lambda: start("c2", readCert=secure.of("reader")["cert"]), timeout=240
    )
    assert q.exception() is None
    assert len([p for p in q.recentProgress if p["numInputRows"]]) == 2
    # One Spark partition a batch: one dafka partition, continued by the second batch.
    (info,) = secure.store.partitions("sec-stream")
    assert info.next_offset == 1000
    got = (
        spark.read.format("dafka")
        .option("subscribe", "sec-stream")
        .option("towers", secure.tower.endpoint)
        .option("cert", secure.of("reader")["cert"])
        .option("trust", secure.of("reader")["trust"])
        .option("beaconInterval", "0.2")
        .load()
        .collect()
    )
    want = Counter(f"f{f}-{i}".encode() for f in range(2) for i in range(500))
    assert Counter(bytes(r.value) for r in got) == want
