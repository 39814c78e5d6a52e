"""The source's readers: :class:`DafkaBatchReader` (a bounded range) and
:class:`DafkaStreamReader` (micro-batches and ``Trigger.AvailableNow``)."""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from dafka._native import HeadsWatch
from dafka.spark._options import BATCH_READ, STREAM_READ, duration_ms
from dafka.spark._produce import Options, integer
from dafka.spark._read_plan import _Reads, needs_firsts, plan, resolve, times_to_offsets
from dafka.spark._read_settings import EARLIEST, LATEST, TOPICS_REFRESH

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadLimit


class DafkaBatchReader(DataSourceReader):
    """A bounded read: from ``startingOffsets`` (default earliest), or the times
    ``startingTimestamp`` / ``startingOffsetsByTimestamp`` give, to
    ``endingOffsets`` (default latest, as the stores report when the query is
    planned) or the times ``endingTimestamp`` / ``endingOffsetsByTimestamp``
    give (exclusive: records before that time)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.reads = _Reads(options, BATCH_READ)
        self.settings = self.reads.settings
        self.ending = self.reads.ending
        self.end_times = self.reads.end_times

    def partitions(self) -> list[InputPartition]:
        probe = needs_firsts(self.reads.starting, EARLIEST)
        hs, firsts = self.settings.offsets(None if probe else ())
        start = self.reads.start_at(hs, firsts)
        end = resolve(self.ending, hs, LATEST)
        if self.end_times:
            for p, off in times_to_offsets(self.settings, self.end_times, hs).items():
                end[p] = min(off, hs[p][1]) if p in hs else off
        topics = {p: t for p, (t, _) in hs.items()}
        return plan(self.settings, start, end, topics)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.settings.read(partition)


class DafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source: each micro-batch reads, per partition, from the last
    batch's end to the heads stores report (capped by ``maxOffsetsPerTrigger``;
    held back while fewer than ``minOffsetsPerTrigger`` records are new, for up
    to ``maxTriggerDelay``). With ``trigger(availableNow=True)`` the heads at
    query start are the target."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.reads = _Reads(options, STREAM_READ)
        self.settings = self.reads.settings
        self.starting = self.reads.starting
        opts = Options(options)
        self.max_per_trigger = (
            None
            if opts.get("maxOffsetsPerTrigger") is None
            else integer(options, "maxOffsetsPerTrigger", 1)
        )
        self.min_per_trigger = (
            None
            if opts.get("minOffsetsPerTrigger") is None
            else integer(options, "minOffsetsPerTrigger", 1)
        )
        delay = opts.get("maxTriggerDelay")
        if delay is not None and self.min_per_trigger is None:
            raise ValueError("option maxTriggerDelay applies with minOffsetsPerTrigger only")
        #: Seconds (Kafka's default: 15 minutes).
        self.max_trigger_delay = (
            900.0 if delay is None else duration_ms("maxTriggerDelay", delay) / 1000
        )
        if (
            self.min_per_trigger is not None
            and self.max_per_trigger is not None
            and self.min_per_trigger > self.max_per_trigger
        ):
            raise ValueError(
                f"option minOffsetsPerTrigger ({self.min_per_trigger}) must be at most "
                f"maxOffsetsPerTrigger ({self.max_per_trigger})"
            )
        #: When the last batch was let through (Kafka's ``lastTriggerMillis``: the
        #: first one is, as soon as there are records).
        self.last_trigger = -math.inf
        self.topics: dict[str, str] = {}
        self.target: dict[str, tuple[str, int]] | None = None
        # First offsets still held of partitions that appeared after the query
        # started (read from there, like Kafka's new partitions from earliest).
        self.firsts: dict[str, int] = {}
        # Read clients kept across micro-batches, one per topic; made on first
        # use (Spark also builds readers that only plan reads on executors).
        self._watch_clients: dict[str, HeadsWatch] | None = None
        # Partitions in the offsets that no store announced, since when
        # (``forgetPartitionsAfter``; a restarted query starts counting again).
        self.absent_since: dict[str, float] = {}
        # Topics the last planning round found no partition of (see _watches).
        self._empty: set[str] = set()
        # The topics read (a pattern's: refreshed every TOPICS_REFRESH seconds).
        self._names: tuple[str, ...] = self.settings.topics
        self._names_at = -math.inf

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_watch_clients"] = None
        state["absent_since"] = {}
        return state

    def _clock(self) -> float:
        return time.monotonic()

    def _gone(self, start: dict[str, int], hs: Collection[str]) -> set[str]:
        """Partitions of ``start`` no store has announced for
        ``forgetPartitionsAfter`` (they leave the offsets)."""
        now = self._clock()
        self.absent_since = {p: t for p, t in self.absent_since.items() if p in start}
        gone = set()
        for p in start:
            if p in hs:
                self.absent_since.pop(p, None)
            elif now - self.absent_since.setdefault(p, now) >= self.settings.forget_absent_after:
                gone.add(p)
        for p in gone:
            del self.absent_since[p]
            self.topics.pop(p, None)
        return gone

    def _topic_names(self) -> tuple[str, ...]:
        """The topics read: those named, or with ``subscribePattern`` those the
        stores held that it matches when last asked (at most TOPICS_REFRESH ago)."""
        if self.settings.pattern is not None:
            now = self._clock()
            if now - self._names_at >= TOPICS_REFRESH:
                self._names, self._names_at = self.settings.topic_names(), now
        return self._names

    def _watches(self) -> dict[str, HeadsWatch]:
        """The read clients the next round goes through: one per topic, but none
        for a topic whose last round found no partition (a :class:`HeadsWatch`
        round after one no store answered waits for answers that do not come, as
        stores holding nothing of a topic say nothing: a one-off round, which
        ``headsSettle`` ends, asks instead until a partition appears)."""
        if self._watch_clients is None:
            self._watch_clients = {}
        names = self._topic_names()
        for t in names:
            if t not in self._watch_clients:
                self._watch_clients[t] = self.settings.watch(t)
        return {t: self._watch_clients[t] for t in names if t not in self._empty}

    def _round(
        self, only: Collection[str] | None, exclude: Collection[str] = ()
    ) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
        """A planning round (``ReadSettings.offsets``) over the topics read, through
        the kept clients; notes which topics it found no partition of."""
        watches = self._watches()
        hs, firsts = self.settings.offsets(
            only, exclude=exclude, watches=watches, topics=self._topic_names()
        )
        self._empty = set(self._topic_names()) - {t for t, _ in hs.values()}
        return hs, firsts

    def prepareForTriggerAvailableNow(self) -> None:
        # A full round by a new client: the target must be everything stores
        # hold now, not what answered within a short round.
        self.target = self.settings.heads()

    def _heads(self) -> dict[str, tuple[str, int]]:
        hs = self.target if self.target is not None else self._round(())[0]
        self.topics.update({p: t for p, (t, _) in hs.items()})
        return hs

    def initialOffset(self) -> dict[str, int]:
        if not needs_firsts(self.starting, EARLIEST):
            return self.reads.start_at(self._heads(), {})
        hs, firsts = self._round(None)
        if self.target is not None:
            hs = self.target
        self.topics.update({p: t for p, (t, _) in hs.items()})
        return self.reads.start_at(hs, firsts)

    def _begin(self, start: dict[str, int], parts: Collection[str]) -> dict[str, int]:
        """Where each of ``parts`` begins in a batch after ``start``: its offset
        there, else (a partition new to the query) its first offset held."""
        self.firsts = {p: v for p, v in self.firsts.items() if p not in start}
        new = [p for p in parts if p not in start and p not in self.firsts]
        if new:
            self.firsts.update(self._round(new)[1])
        return {p: start[p] if p in start else self.firsts.get(p, 0) for p in parts}

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

        if self.max_per_trigger is not None:
            return ReadMaxRows(self.max_per_trigger)
        if self.min_per_trigger is not None:
            return ReadMinRows(self.min_per_trigger)
        return ReadAllAvailable()

    def _hold_back(self, new: int, limit: ReadLimit) -> bool:
        """Kafka's ``delayBatch``: whether a batch of ``new`` records waits for
        ``minOffsetsPerTrigger`` (not once ``maxTriggerDelay`` passed since the last
        batch, nor under ``availableNow``, which must reach its target)."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        if self.min_per_trigger is None or self.target is not None:
            return False
        if isinstance(limit, ReadAllAvailable):
            return False
        now = self._clock()
        if now - self.last_trigger >= self.max_trigger_delay:
            self.last_trigger = now
            return False
        if new < self.min_per_trigger:
            return True
        self.last_trigger = now
        return False

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        from pyspark.sql.streaming.datasource import ReadMaxRows

        if self.target is None:
            # The heads, and in the same round where partitions new to the
            # query begin: they are read from their first record held.
            hs, firsts = self._round(None, exclude=start.keys())
            self.topics.update({p: t for p, (t, _) in hs.items()})
            self.firsts.update(firsts)
        else:
            hs = self._heads()
        begin = self._begin(start, hs)
        latest = {p: max(head, begin[p]) for p, (_t, head) in hs.items()}
        new = sum(latest[p] - begin[p] for p in latest)
        if new and self._hold_back(new, limit):
            return dict(start)
        gone = self._gone(start, hs)
        kept = {p: v for p, v in start.items() if p not in gone}
        for p, v in kept.items():
            latest.setdefault(p, v)
            begin.setdefault(p, v)
        if not isinstance(limit, ReadMaxRows):
            return latest
        budget = limit.max_rows
        out = dict(kept)
        # Fair share: repeatedly give every partition with data an equal slice.
        backlog = {p: latest[p] - begin[p] for p in latest if latest[p] > begin[p]}
        for p in latest:
            out.setdefault(p, begin[p])
        while budget > 0 and backlog:
            share = max(1, budget // len(backlog))
            for p in sorted(backlog):
                take = min(share, backlog[p], budget)
                out[p] += take
                backlog[p] -= take
                budget -= take
                if budget == 0:
                    break
            backlog = {p: n for p, n in backlog.items() if n > 0}
        return out

    def reportLatestOffset(self) -> dict[str, int] | None:
        return None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        if any(p not in self.topics for p in end):
            self._heads()
        return plan(self.settings, self._begin(start, end), end, self.topics)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.settings.read(partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: stores keep records by their own retention."""

    def stop(self) -> None:
        """Closes the planning clients (each task's reads close their own)."""
        for w in (self._watch_clients or {}).values():
            w.close()
        self._watch_clients = None
