"""Offsets and planning: where a read starts and ends in every partition
(offsets, times, their resolution against the heads stores report), and how the
ranges between are cut into Spark tasks (Kafka's ``minPartitions`` rules)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql.datasource import InputPartition

from dafka.exceptions import DataLossError
from dafka.spark._options import BATCH_READ, STREAM_READ
from dafka.spark._produce import Options
from dafka.spark._read_settings import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    PackedRanges,
    RangePartition,
    ReadSettings,
    TimeSpec,
    parse_offsets,
    parse_times,
)

if TYPE_CHECKING:
    pass


def resolve(
    spec: OffsetSpec,
    hs: dict[str, tuple[str, int]],
    default: int,
    firsts: dict[str, int] | None = None,
) -> dict[str, int]:
    """Concrete offsets for every known partition. ``default`` (EARLIEST or
    LATEST) applies to partitions a JSON spec does not name. ``earliest`` is a
    partition's first offset still held (``firsts``; 0 when unknown), as
    Kafka's is the log's start."""
    out: dict[str, int] = {}
    firsts = firsts or {}
    for p, (_t, head) in hs.items():
        if spec.word == "earliest":
            v = EARLIEST
        elif spec.word == "latest":
            v = head
        else:
            v = spec.offsets.get(p, default)
            v = head if v == LATEST else v
        if v == EARLIEST:
            v = firsts.get(p, 0)
        out[p] = min(v, head)
    # Partitions named but not (yet) seen keep their offset.
    for p, v in spec.offsets.items():
        if p not in out and v >= 0:
            out[p] = v
    return out


def needs_firsts(spec: OffsetSpec, default: int) -> bool:
    """Whether resolving ``spec`` for some partition means ``earliest`` (so the
    partitions' first offsets still held are needed)."""
    if spec.word is None:
        return default == EARLIEST or EARLIEST in spec.offsets.values()
    return spec.word == "earliest"


def _part_count(size: int, total: int, least: int) -> int:
    """Kafka's ``KafkaOffsetRangeCalculator.getPartCount``."""
    return max(math.floor(size / total * least + 0.5), 1)  # Scala's round: half up


def _split_for(ranges: list[RangePartition], least: int) -> list[RangePartition]:
    """Kafka's ``minPartitions`` split: ranges cut in pieces in proportion to their
    size, so there are about ``least`` of them (small ranges stay whole and do not
    count towards the proportion)."""
    total = sum(r.end - r.start for r in ranges)
    unsplit = [r for r in ranges if _part_count(r.end - r.start, total, least) == 1]
    split_total = total - sum(r.end - r.start for r in unsplit)
    split_least = max(least - len(unsplit), 1)
    out: list[RangePartition] = []
    for r in ranges:
        size = r.end - r.start
        parts = 1 if split_total == 0 else _part_count(size, split_total, split_least)
        remaining, lo = size, r.start
        for k in range(parts):
            this = remaining // (parts - k)
            remaining -= this
            hi = min(lo + this, r.end)
            if hi > lo:
                out.append(RangePartition(r.topic, r.partition, lo, hi))
            lo = hi
    return out


def _balance(ranges: list[RangePartition], groups: int) -> list[InputPartition]:
    """``ranges`` in ``groups`` tasks of about equal record counts (each range to
    the task holding fewest so far, largest first); a task's ranges stay in
    partition and offset order."""
    packs: list[list[RangePartition]] = [[] for _ in range(groups)]
    held = [0] * groups
    for r in sorted(ranges, key=lambda r: r.end - r.start, reverse=True):
        k = held.index(min(held))
        packs[k].append(r)
        held[k] += r.end - r.start
    out: list[InputPartition] = []
    for pack in packs:
        pack.sort(key=lambda r: (r.partition, r.start))
        if pack:
            out.append(pack[0] if len(pack) == 1 else PackedRanges(tuple(pack)))
    return out


def plan(
    settings: ReadSettings, start: dict[str, int], end: dict[str, int], topics: dict[str, str]
) -> list[InputPartition]:
    """One Spark input partition per ``settings.max_records_per_task`` offsets of
    each dafka partition (a task holds its range in memory while it reads); ranges
    shorter than ``settings.min_records_per_task`` (at most that) are packed
    together until a pack holds at least that many records. With
    ``settings.min_partitions`` (Kafka's ``minPartitions``) a read that would make
    fewer tasks makes about that many: packs are spread over that many tasks, or,
    when there are fewer ranges than that, ranges are cut in pieces in proportion
    to their size, as Kafka does."""
    ranges: list[RangePartition] = []
    step = settings.max_records_per_task
    least = min(settings.min_records_per_task, step)
    for p, e in sorted(end.items()):
        s = start.get(p, 0)
        if p not in topics:
            if e > s and settings.fail_on_data_loss:
                raise DataLossError(
                    f"partition {p} (offsets [{s}, {e})) is no longer held by any store; "
                    "set failOnDataLoss=false to skip it"
                )
            continue
        for lo in range(s, e, step):
            ranges.append(RangePartition(topics[p], p, lo, min(lo + step, e)))
    parts: list[InputPartition] = []
    short: list[RangePartition] = []
    for r in ranges:
        (short if r.end - r.start < least else parts).append(r)
    pack: list[RangePartition] = []
    held = 0
    for r in short:
        pack.append(r)
        held += r.end - r.start
        if held >= least or r is short[-1]:
            parts.append(pack[0] if len(pack) == 1 else PackedRanges(tuple(pack)))
            pack, held = [], 0
    want = settings.min_partitions
    if want is None or len(parts) >= want:
        return parts
    if len(ranges) >= want:
        return _balance(ranges, want)
    return list(_split_for(ranges, want))


def _strategy(options: Options) -> str:
    return str(options.get("startingOffsetsByTimestampStrategy", "latest")).lower()


class _Reads:
    """What batch and streaming reads share: the settings, the starting position
    (offsets or times) and its resolution."""

    def __init__(self, options: Mapping[str, str], kind: str) -> None:
        self.settings = ReadSettings.from_options(options, kind)
        opts = Options(options)
        default = "earliest" if kind == BATCH_READ else "latest"
        self.starting = parse_offsets(
            opts.get("startingOffsets", default), "startingOffsets", self.settings.subscribed, kind
        )
        self.start_times = parse_times(
            opts, "starting", self.settings.subscribed, ["startingOffsets"]
        )
        self.strategy = _strategy(opts)
        if opts.get("startingOffsetsByTimestampStrategy") is not None and not self.start_times:
            raise ValueError(
                "option startingOffsetsByTimestampStrategy applies with startingTimestamp or "
                "startingOffsetsByTimestamp only"
            )
        # Batch reads end (READ: not known yet, so checked as if batch).
        self.ending = OffsetSpec(word="latest")
        self.end_times = TimeSpec()
        if kind != STREAM_READ:
            self.ending = parse_offsets(
                opts.get("endingOffsets", "latest"),
                "endingOffsets",
                self.settings.subscribed,
                BATCH_READ,
            )
            self.end_times = parse_times(
                opts, "ending", self.settings.subscribed, ["endingOffsets"]
            )

    def start_at(
        self,
        hs: dict[str, tuple[str, int]],
        firsts: dict[str, int],
    ) -> dict[str, int]:
        """Where a read starts in every known partition: ``startingTimestamp`` (every
        partition), else ``startingOffsetsByTimestamp`` (the partitions it names)
        over ``startingOffsets``. A partition holding no record at or after its time
        starts at its end (``startingOffsetsByTimestampStrategy`` latest, the
        default) or fails the read (``error``)."""
        unknown = sorted(p for p in self.starting.offsets if p not in hs)
        if unknown:
            raise ValueError(
                f"option startingOffsets names partition(s) {', '.join(unknown)}, which no "
                "store holds of the topics read: name partitions the stores hold (`dafka "
                "offsets TOPIC` lists them), or start them all at earliest or latest"
            )
        start = resolve(self.starting, hs, EARLIEST, firsts)
        if not self.start_times:
            return start
        found = times_to_offsets(self.settings, self.start_times, hs)
        missing = []
        for p, off in found.items():
            head = hs[p][1] if p in hs else off
            if off >= head and self.strategy == "error":
                missing.append(p)
            start[p] = min(off, head)
        if missing:
            raise ValueError(
                f"no record at or after the starting time in partition(s) "
                f"{', '.join(sorted(missing))} (startingOffsetsByTimestampStrategy=error; "
                "latest starts them at their end)"
            )
        return start


def times_to_offsets(
    settings: ReadSettings, spec: TimeSpec, hs: dict[str, tuple[str, int]]
) -> dict[str, int]:
    """The offsets ``spec``'s times give: every known partition for one time,
    the named ones for times by partition (at its end when its stores did not
    answer: no record of it is at or after the time that anyone holds)."""
    wanted: dict[tuple[str, int], list[str]] = {}
    if spec.every is not None:
        for p, (t, _h) in hs.items():
            wanted.setdefault((t, spec.every), []).append(p)
    else:
        for p, ts in spec.by_partition.items():
            topic = spec.topics.get(p) or (hs[p][0] if p in hs else None)
            if topic is None:
                continue  # neither seen nor placed in a topic: nothing to read there
            wanted.setdefault((topic, ts), []).append(p)
    out: dict[str, int] = {}
    for (t, ts), parts in sorted(wanted.items()):
        got = settings.times(t, ts)
        for p in parts:
            out[p] = got.get(p, hs[p][1] if p in hs else 0)
    return out
