"""Type stubs for the Rust extension ``dafka._native`` (checked with mypy.stubtest).

The docstrings here are what IDEs show; they follow the Rust ``#[pyo3]`` doc text.
Defaults are written out as values: ``tests/test_defaults.py`` checks that they are
``DEFAULTS``, which the extension reads from the Rust configs.
"""

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from inspect import Signature
from typing import Any, ClassVar, Final, Literal, Self, final

from typing_extensions import Buffer

from dafka.exceptions import DeliveryError
from dafka.log import PartitionInfo

__all__ = [
    "DEFAULTS",
    "TIMESTAMP_CREATE",
    "TIMESTAMP_LOG_APPEND",
    "Consumer",
    "DecodedMessage",
    "HeadsWatch",
    "MetricsServer",
    "NativeLog",
    "Producer",
    "Record",
    "Store",
    "Tower",
    "__version__",
    "check_node",
    "cluster_view",
    "describe_group",
    "fetch_range",
    "fetch_ranges",
    "has_curve",
    "heads",
    "keygen",
    "list_groups",
    "offsets",
    "offsets_for_times",
    "read_certificate",
    "run_store_cli",
    "run_tower_cli",
    "serve_metrics",
    "topics",
    "wire_decode",
    "wire_encode",
]

__version__: str
"""The package version (the Rust crate's)."""

TIMESTAMP_CREATE: Final[int]
"""``Record.timestamp_type`` of a create time, set by the producer (0, as Kafka's)."""
TIMESTAMP_LOG_APPEND: Final[int]
"""``Record.timestamp_type`` of a store's append time, for a record that came without a
create time (1, as Kafka's)."""

DEFAULTS: Final[Mapping[str, Mapping[str, object]]]
"""The defaults of the node classes, the read clients and ``dafka.Log``:
``{entry point: {keyword: default}}``, e.g. ``DEFAULTS["Producer"]["max_unacked_bytes"]``
(read-only mappings). Read from the Rust configs' ``Default`` impls; the signatures use
them. The read
clients' per-call ``timeout``, ``settle``, ``fail_on_loss``, ``partitions`` and
``exclude`` are not in it (see their signatures)."""

_OPTIONS: Final[Mapping[str, tuple[tuple[str, str, str, str], ...]]]
"""``{entry point: ((option, declaration, annotation, doc paragraph), ...)}``, in the
order the signatures show them: what ``scripts/gen_api.py`` writes this stub's option
parameters and docs/python.md's option tables from."""

def run_store_cli(argv: list[str]) -> int:
    """Runs ``dafka-store`` with ``argv`` (the arguments after the program name)
    until Ctrl-C; returns the exit code.
    """

def run_tower_cli(argv: list[str]) -> int:
    """Runs ``dafka-tower`` with ``argv`` (the arguments after the program name)
    until Ctrl-C; returns the exit code.
    """

def keygen(directory: str, name: str, *, role: str, topics: str | None = None) -> tuple[str, str]:
    """Writes a new CURVE certificate pair in czmq's format: ``DIRECTORY/NAME.key``
    (the public certificate, for trust directories) and ``DIRECTORY/NAME.key_secret``
    (both keys, mode 0600, for the node itself), with ``role`` (store, producer,
    consumer or tower) and ``topics`` (comma-separated patterns, ``*`` for any run of
    characters; None for every topic) in their metadata. Never overwrites a file
    (``FileExistsError``). Returns the two paths.
    """

def read_certificate(path: str) -> tuple[str, str | None, str, bool]:
    """Reads a certificate file (public or secret): ``(public_key_z85, role,
    topics, has_secret)``; ``role`` None when its metadata names none, ``topics``
    the patterns as written ("*" when it names none).
    """

def has_curve() -> bool:
    """Whether this build's libzmq has CURVE (secure clusters need it)."""

def serve_metrics(host: str = "127.0.0.1", port: int = 0) -> MetricsServer:
    """Serves Prometheus metrics of every node of this process (each ``Producer``,
    ``Consumer``, ``Store`` and ``Tower`` from its creation until it is closed) at
    ``http://HOST:PORT/metrics``, on threads of their own; returns the running
    ``MetricsServer``. ``port=0`` takes any free port (``server.port`` says which).

    Raises
    ------
    ConfigError
        ``host`` or ``port`` name no address to listen on, or it cannot be bound (in use).
    """

@final
class MetricsServer:
    """A running metrics server (``dafka.serve_metrics``): ``host``, ``port`` (the one bound,
    when 0 was asked), ``url``; ``close()`` stops it (also on leaving a ``with`` block).
    """

    @property
    def host(self) -> str:
        """The host it listens on."""
    @property
    def port(self) -> int:
        """The port it listens on."""
    @property
    def url(self) -> str:
        """``http://HOST:PORT/metrics``."""
    def close(self) -> None:
        """Stops serving (idempotent)."""
    def __enter__(self) -> Self:
        """Returns the server, for ``with dafka.serve_metrics(...) as server:``."""
    def __exit__(self, *_exc: object) -> Literal[False]:
        """Closes the server on leaving the ``with`` block; an exception propagates."""

def wire_encode(
    kind: str,
    dialect: str,
    topic: bytes,
    address: bytes | None,
    subject: bytes,
    sequence: int,
    count: int,
    content: bytes,
    subjects: list[bytes],
) -> list[bytes]:
    """Encodes one message from its fields; unused fields are ignored. A batch
    takes its values from `subjects` (its count is theirs).
    """

def wire_decode(frames: list[bytes]) -> DecodedMessage:
    """Decodes a frame list (either dialect) into a :class:`DecodedMessage`. A
    batch gives its values as ``subjects``.
    """

@final
class DecodedMessage:
    """One decoded message: what :func:`wire_decode` returns, for ``dafka.wire``
    to build its dataclass from. A field the kind does not have is None.
    """

    @property
    def kind(self) -> str:
        """The message kind as PROTOCOL.md names it, e.g. ``"RECORD"``, ``"ACK"``."""
    @property
    def dialect(self) -> Literal["rfc", "zproto"]:
        """The dialect the frames were in: ``"rfc"`` or ``"zproto"``."""
    @property
    def topic(self) -> bytes:
        """The topic (the key after the ID in frame 0)."""
    @property
    def address(self) -> bytes | None:
        """The sender's or partition's address (None for a zproto ACK, which has none)."""
    @property
    def subject(self) -> bytes | None:
        """The subject (the partition's topic, or what a FETCH or ACK is about)."""
    @property
    def sequence(self) -> int | None:
        """The offset the message carries."""
    @property
    def count(self) -> int | None:
        """A FETCH's record count, or a batch's number of values."""
    @property
    def content(self) -> bytes | None:
        """A record's value."""
    @property
    def subjects(self) -> tuple[bytes, ...] | None:
        """A CONSUMER-HELLO's subjects, or a batch's values."""

def heads(
    topic: str,
    *,
    timeout: float = 10.0,
    settle: float = 0.5,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> dict[str, int]:
    """The partitions of ``topic`` held by stores (and live producers), each with
    its next offset: ``{partition: last_offset + 1}``.
    """

def offsets(
    topic: str,
    *,
    partitions: list[str] | None = None,
    exclude: list[str] | None = None,
    timeout: float = 10.0,
    settle: float = 0.5,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> dict[str, tuple[int, int]]:
    """The partitions of ``topic`` held by stores (and live producers), each with
    ``(first, next)``: the lowest offset still held (where "earliest" begins
    once retention deleted older records; 0 when nobody answered) and the next
    offset. The first-offset probe (one FETCH each) covers ``partitions`` (all
    when None) except those in ``exclude``; the others report 0. It ends as
    soon as every partition it covers answered 0, else ``settle`` after the
    last answer (a lower one may still come from another store).
    """

def fetch_range(
    topic: str,
    partition: str,
    start: int,
    end: int,
    *,
    timeout: float = 60.0,
    fail_on_loss: bool = True,
    with_meta: bool = False,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> tuple[list[Any], list[tuple[int, int]]]:
    """Reads exactly ``[start, end)`` of one partition from stores; returns
    ``(records, lost)`` with ``records`` a list of ``(offset, value)`` in order
    (with ``with_meta``, of ``Record``s, with keys, headers and timestamps)
    and ``lost`` the ``(from, to)`` ranges retention removed (raises
    DataLossError instead when ``fail_on_loss``).
    """

def topics(
    *,
    timeout: float = 10.0,
    settle: float = 0.5,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> list[str]:
    """The topics the stores hold records of, sorted (names that are not UTF-8
    with surrogate escapes). Asks every store that connects within
    ``timeout`` for every partition it holds, and ends ``settle`` seconds after
    the first one with no new store or topic since; raises FetchTimeoutError
    when none connects. In a secure cluster, the topics the certificate may
    read.
    """

def list_groups(
    *,
    timeout: float = 10.0,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """The consumer groups the stores hold commits of, sorted:
    ``[{"group": str, "topics": [str], "partitions": int}]`` (partitions: how many it
    committed). Asks every store that connects within ``timeout`` seconds and listens
    about 1.3 s after the first; raises ``CommitTimeoutError`` when none connects.
    """

def describe_group(
    group: str,
    *,
    timeout: float = 10.0,
    listen: float = 1.5,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Consumer group ``group`` as the stores and its members tell it: ``{"group": str,
    "members": [{"address", "topics", "partitions"}], "partitions": [{"topic",
    "partition", "owner", "committed", "head", "lag"}], "lag": int}``. ``owner`` is the
    member reading the partition (None: nobody), ``committed`` the group's commit (the
    next offset to read; None: never committed), ``head`` the last offset the stores hold
    (None: unknown), ``lag`` how many records exist past the commit. Members are heard
    for ``listen`` seconds (they announce every ``beacon_interval``: keep it above one
    and a half of theirs); raises ``CommitTimeoutError`` when no store answers within
    ``timeout``.
    """

def cluster_view(
    topic: str | None = None,
    *,
    timeout: float = 10.0,
    listen: float | None = None,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """The cluster as the towers relay it and the stores tell it: ``{"towers": [str],
    "nodes": [{"address", "kind", "endpoint", "key", "last_heard"}], "stores": [str],
    "partitions": [{"store", "topic", "partition", "first", "next", "bytes"}]}``.
    ``kind`` is ``"store"``, ``"producer"``, ``"consumer"`` or None (not shown yet),
    ``last_heard`` the seconds since the towers last relayed the node's beacon (None:
    not heard), ``stores`` the stores that answered. Listens ``listen`` seconds (None:
    one and a half ``beacon_interval``); with ``topic`` (``""``: every topic) also asks
    every store for its partitions of it (first and next offsets, bytes on disk).
    Raises ``FetchTimeoutError`` when no tower, or asking for partitions no store,
    answers within ``timeout``.
    """

def offsets_for_times(
    topic: str,
    timestamp: int | datetime | str,
    *,
    timeout: float = 10.0,
    settle: float = 0.5,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> dict[str, int]:
    """For each partition of ``topic`` that stores hold, the first offset whose
    time (its timestamp, else the time a store appended it) is at or after
    ``timestamp``, or the partition's next offset when no record is that
    late: ``{partition: offset}``, where a reader starting at that time
    begins. ``timestamp`` is ms since the epoch (int), a ``datetime`` or an ISO
    8601 str. Asks the stores (TIME-QUERY) and ends ``settle`` seconds after
    the first store connected with no lower answer since; raises
    FetchTimeoutError when no store connects within ``timeout``.
    """

def check_node(
    *,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
    role: str = "consumer",
) -> None:
    """Checks node settings as a node would at start-up, without starting one:
    raises ``ConfigError`` (or ``ValueError``) saying what to fix. For a Spark
    driver, so that a bad option is reported once there, not by every task.
    With ``cert`` and ``trust`` it reads both, as a node of ``role``
    (``"store"``, ``"producer"``, ``"consumer"``, the read clients' role, or
    ``"tower"``) would: a missing file raises ``OSError``, a certificate of
    another role ``ConfigError``.
    """

def fetch_ranges(
    ranges: list[tuple[str, str, int, int]],
    *,
    timeout: float = 60.0,
    fail_on_loss: bool = True,
    with_meta: bool = False,
    towers: list[str] | None = None,
    peers: list[str] | None = None,
    wire: str = "rfc",
    bind: str = "tcp://127.0.0.1:*",
    beacon_interval: float = 1.0,
    beacon_timeout: float = 4.0,
    advertise_host: str | None = None,
    cert: str | os.PathLike[str] | None = None,
    trust: str | os.PathLike[str] | None = None,
) -> list[tuple[list[Any], list[tuple[int, int]]]]:
    """:func:`fetch_range` of several ``(topic, partition, start, end)`` ranges,
    in turn, by one client (discovery and connections paid once); returns one
    ``(records, lost)`` per range. ``timeout`` applies to each range.
    """

@final
class Record:
    """One record of a partition.

    ``topic`` is the topic name (bytes that are not UTF-8 are kept as surrogate
    escapes, so ``topic.encode("utf-8", "surrogateescape")`` gives them back),
    ``partition`` the partition's name (the producer's address), ``offset`` its
    position in the partition, ``value`` its content, ``key`` its key (None
    without one), ``headers`` its headers (a list of ``(name, value)`` pairs, in
    order, repeats allowed), ``timestamp`` its time in ms since the epoch (None
    when not known) and ``timestamp_type`` what that time is:
    ``TIMESTAMP_CREATE`` (0, set by the producer) or ``TIMESTAMP_LOG_APPEND``
    (1, a store's append time, for a record that came without one).
    """

    __match_args__ = ("topic", "partition", "offset", "value")
    def __new__(
        cls,
        topic: str,
        partition: str,
        offset: int,
        value: bytes,
        *,
        timestamp: int | None = None,
        key: bytes | None = None,
        headers: Iterable[tuple[str, bytes]] | None = None,
        timestamp_type: int | None = None,
    ) -> Record: ...
    @property
    def topic(self) -> str:
        """The topic name (surrogate escapes for bytes that are not UTF-8)."""
    @property
    def partition(self) -> str:
        """The partition's name: its producer's address."""
    @property
    def offset(self) -> int:
        """The record's position in its partition, from 0."""
    @property
    def value(self) -> bytes:
        """The record's content."""
    @property
    def timestamp(self) -> int | None:
        """The record's time in ms since the epoch (None when not known)."""
    @property
    def timestamp_type(self) -> int | None:
        """0 (create time, set by the producer), 1 (a store's append time), or
        None without a timestamp.
        """
    @property
    def key(self) -> bytes | None:
        """The record's key (None without one)."""
    @property
    def headers(self) -> list[tuple[str, bytes]]:
        """The record's headers: ``(name, value)`` pairs in order (a new list each time)."""
    def __eq__(self, other: object, /) -> bool:
        """Return self==value."""
    def __ne__(self, other: object, /) -> bool:
        """Return self!=value."""
    def __hash__(self) -> int:
        """Return hash(self)."""
    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as a constructor call (every protocol): `Record(*args)`, or
        `copyreg.__newobj_ex__(Record, args, kwargs)` with a timestamp, key or headers.
        """

@final
class HeadsWatch:
    """A read client kept across :meth:`offsets` rounds of one topic, for a
    streaming source that plans every micro-batch: after the first round, a
    round asks once and ends as soon as as many answers came as in the round
    before (every store answered again) instead of waiting ``settle``; heads
    only rise. A store that connects makes a full round; one that went away
    makes the round wait ``settle`` once. Between rounds a thread of its own
    keeps the client known to the stores (beacons, every 0.1 s), so a round
    after a long pause (a ``processingTime`` trigger of minutes) is still a
    quick one. A partition no store has announced for ``forget_after``
    seconds leaves the answers (None, the default: never; stores announce
    every partition they hold records of). Close it (or use ``with``).

    Parameters
    ----------
    towers : list[str] | None, default None
        Towers to find peers through, each ``tcp://HOST:IN_PORT,OUT_PORT`` (what
        ``Tower.endpoint`` gives) or ``tcp://HOST:IN_PORT`` (OUT_PORT = IN_PORT + 1).
        None: no tower.
    peers : list[str] | None, default None
        Static peers: XPUB endpoints ``tcp://HOST:PORT`` (the port the peer is bound to)
        to connect to, no tower needed. A node's ``connect(endpoint)`` adds one later.
    wire : str, default 'rfc'
        The dialect the node sends in, ``"rfc"`` or ``"zproto"`` (the C reference's
        framing). A node receives both.
    bind : str, default 'tcp://127.0.0.1:*'
        Where the node's XPUB binds; port 0 or ``*`` picks a free port. The default is
        reachable from this host only: bind ``tcp://*:0`` to be reachable from others.
    beacon_interval : float, default 1.0
        Seconds between the node's beacons; must be > 0.
    beacon_timeout : float, default 4.0
        Seconds after which a silent peer is forgotten; must be longer than
        ``beacon_interval``.
    advertise_host : str | None, default None
        Host put in beacons (NAT, containers): peers connect to ``tcp://HOST:PORT``.
        ``""`` lets the tower use the TCP peer address. None: the bound host, or ``""``
        when bound to a wildcard.
    cert : str | os.PathLike[str] | None, default None
        Secure mode (CURVE encryption and authentication, docs/security.md): the path of
        the node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it,
        of the node's role (``"producer"``, ``"consumer"``, ``"store"``, ``"tower"``; a
        read client's is ``"consumer"``). Needs ``trust``. None: plaintext, anyone who
        reaches the node joins.
    trust : str | os.PathLike[str] | None, default None
        Secure mode: the directory of trusted public certificates (``NAME.key``), read
        again when it changes. Needs ``cert``. A secure node takes only keyed tower and
        peer endpoints (``...;curve=KEY``, what a secure ``Tower.endpoint`` gives), an
        insecure one only keyless; a secure tower's ``endpoint`` carries its key.
    forget_after : float | None, default None
        Seconds after which a partition no store announces leaves the answers; None
        (the default): never (stores announce every partition they hold records of).
    """

    __signature__: ClassVar[Signature]
    def __new__(
        cls,
        topic: str,
        *,
        towers: list[str] | None = None,
        peers: list[str] | None = None,
        wire: str = "rfc",
        bind: str = "tcp://127.0.0.1:*",
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        advertise_host: str | None = None,
        cert: str | os.PathLike[str] | None = None,
        trust: str | os.PathLike[str] | None = None,
        forget_after: float | None = None,
    ) -> HeadsWatch: ...
    def offsets(
        self,
        *,
        partitions: list[str] | None = None,
        exclude: list[str] | None = None,
        timeout: float = 10.0,
        settle: float = 0.5,
    ) -> dict[str, tuple[int, int]]:
        """:func:`offsets` through this client: ``{partition: (first, next)}``."""
    def stats(self) -> dict[str, int]:
        """``{"rounds", "quick_rounds", "probes", "quick_probes"}``: rounds so
        far, and those that ended once every peer answered again instead of
        waiting ``settle``; rounds that probed first offsets, and those whose
        probe ended at once because every partition answered offset 0.
        (Waits for a round in progress in another thread, GIL released.)
        """
    def close(self) -> None:
        """Closes the client's sockets; later rounds raise ClosedError."""
    def __enter__(self) -> Self:
        """Returns the client, for ``with HeadsWatch(...) as watch:``."""
    def __exit__(self, *_exc: object) -> Literal[False]:
        """Closes the client on leaving the ``with`` block; an exception propagates."""

@final
class Tower:
    """A tower: relays beacons so nodes find each other.

    Nodes send their beacons to the tower's XSUB socket (``beacon_in``), and it relays them to
    every node through its XPUB socket (``beacon_out``). It carries no records. Nodes name it
    in ``towers=[tower.endpoint]``. When a node joins, the tower repeats the last beacons of
    the live nodes it knows, so the new node finds its peers at once. It remembers at most
    16,384 nodes; beacons of more are still relayed. It runs on its own thread until ``close()``.

    Parameters
    ----------
    beacon_in : str, default 'tcp://*:5556'
        Endpoint the XSUB socket binds, where nodes send beacons (5556 as in the C
        reference). Port 0 or ``*`` picks a free port. A wildcard host shows as 127.0.0.1
        in ``endpoint``.
    beacon_out : str, default 'tcp://*:5557'
        Endpoint the XPUB socket binds, where nodes receive beacons (5557 as in the C
        reference). Port 0 or ``*`` picks a free port.
    cert : str | os.PathLike[str] | None, default None
        Secure mode (CURVE encryption and authentication, docs/security.md): the path of
        the node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it,
        of the node's role (``"producer"``, ``"consumer"``, ``"store"``, ``"tower"``; a
        read client's is ``"consumer"``). Needs ``trust``. None: plaintext, anyone who
        reaches the node joins.
    trust : str | os.PathLike[str] | None, default None
        Secure mode: the directory of trusted public certificates (``NAME.key``), read
        again when it changes. Needs ``cert``. A secure node takes only keyed tower and
        peer endpoints (``...;curve=KEY``, what a secure ``Tower.endpoint`` gives), an
        insecure one only keyless; a secure tower's ``endpoint`` carries its key.

    Raises
    ------
    ConfigError
        An endpoint is malformed: not ``tcp://HOST:PORT``, ``ipc://PATH`` or ``inproc://NAME``.
        Secure mode: ``cert`` without ``trust`` (or the reverse), or a certificate of another
        role.
    OSError
        ``cert`` or ``trust`` cannot be read: ``FileNotFoundError``, ``PermissionError``, ...
        (the error names the path).
    SecurityError
        ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
    NodeError
        A socket cannot bind, e.g. the port is in use.
    """

    __signature__: ClassVar[Signature]
    def __new__(
        cls,
        *,
        beacon_in: str = "tcp://*:5556",
        beacon_out: str = "tcp://*:5557",
        cert: str | os.PathLike[str] | None = None,
        trust: str | os.PathLike[str] | None = None,
    ) -> Tower: ...
    @property
    def endpoint(self) -> str:
        """What nodes pass in ``towers=[...]``: ``tcp://HOST:IN_PORT,OUT_PORT``, with
        ``;curve=KEY`` (the tower's public key) after it for a secure tower.
        """
    @property
    def beacon_in(self) -> str:
        """The bound endpoint of the XSUB that receives beacons (a wildcard host shows as
        127.0.0.1).
        """
    @property
    def beacon_out(self) -> str:
        """The bound endpoint of the XPUB that sends beacons (a wildcard host shows as
        127.0.0.1).
        """
    def stats(self) -> dict[str, int]:
        """Counters: ``beacons`` relayed, ``malformed`` dropped, ``peers`` (the nodes it
        knows now), ``beacons_refused`` (beacons of new nodes past the 16,384 it remembers);
        the nodes it knows by the kind they announced: ``nodes_producer``,
        ``nodes_consumer``, ``nodes_store``, ``nodes_unknown`` (none announced: a
        C-reference node), and ``announcements_refused`` (kinds of new nodes not kept past
        16,384); in secure mode ``auth_refused`` (connections refused at the handshake) and
        ``identity_refused`` (beacons or kind announcements for a node that is not the
        sender key's).
        """
    def close(self) -> None:
        """Stops the tower (idempotent)."""
    def __enter__(self) -> Self:
        """Returns the tower, for ``with Tower(...) as tower:``."""
    def __exit__(self, *_exc: object) -> Literal[False]:
        """Closes the tower on leaving the ``with`` block; an exception propagates."""

@final
class Producer:
    """A producer: one partition of one topic.

    Publishes records to ``topic``. The partition is named by the producer's ``address`` (32 hex
    characters, new for each producer unless ``address_seed`` names it), and its offsets count
    from 0 (or ``first_offset``). Each record stays in memory
    until ``min_acks`` distinct stores have ACKed it, and FETCHes for it are answered from there.
    Once it has published, the producer sends a HEAD every ``head_interval`` seconds. The node runs
    on its own thread; calls that wait release the GIL and can be interrupted with Ctrl-C.

    Parameters
    ----------
    topic : str
        The topic, 1 to 255 bytes.
    towers : list[str] | None, default None
        Towers to find peers through, each ``tcp://HOST:IN_PORT,OUT_PORT`` (what
        ``Tower.endpoint`` gives) or ``tcp://HOST:IN_PORT`` (OUT_PORT = IN_PORT + 1).
        None: no tower.
    peers : list[str] | None, default None
        Static peers: XPUB endpoints ``tcp://HOST:PORT`` (the port the peer is bound to)
        to connect to, no tower needed. A node's ``connect(endpoint)`` adds one later.
    wire : str, default 'rfc'
        The dialect the node sends in, ``"rfc"`` or ``"zproto"`` (the C reference's
        framing). A node receives both.
    bind : str, default 'tcp://127.0.0.1:*'
        Where the node's XPUB binds; port 0 or ``*`` picks a free port. The default is
        reachable from this host only: bind ``tcp://*:0`` to be reachable from others.
    beacon_interval : float, default 1.0
        Seconds between the node's beacons; must be > 0.
    beacon_timeout : float, default 4.0
        Seconds after which a silent peer is forgotten; must be longer than
        ``beacon_interval``.
    advertise_host : str | None, default None
        Host put in beacons (NAT, containers): peers connect to ``tcp://HOST:PORT``.
        ``""`` lets the tower use the TCP peer address. None: the bound host, or ``""``
        when bound to a wildcard.
    cert : str | os.PathLike[str] | None, default None
        Secure mode (CURVE encryption and authentication, docs/security.md): the path of
        the node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it,
        of the node's role (``"producer"``, ``"consumer"``, ``"store"``, ``"tower"``; a
        read client's is ``"consumer"``). Needs ``trust``. None: plaintext, anyone who
        reaches the node joins.
    trust : str | os.PathLike[str] | None, default None
        Secure mode: the directory of trusted public certificates (``NAME.key``), read
        again when it changes. Needs ``cert``. A secure node takes only keyed tower and
        peer endpoints (``...;curve=KEY``, what a secure ``Tower.endpoint`` gives), an
        insecure one only keyless; a secure tower's ``endpoint`` carries its key.
    sndhwm : int, default 1000000
        XPUB send high-water mark, in messages per subscriber; 0 = unlimited, at most
        2,147,483,647.
    rcvhwm : int, default 1000000
        SUB receive high-water mark, in messages per peer; 0 = unlimited, at most
        2,147,483,647.
    min_acks : int, default 1
        Distinct stores that must ACK a record before it leaves the buffer, 0 to 1,024.
        With 0 a record is released as soon as it is sent.
    head_interval : float, default 1.0
        Seconds between HEADs once something was published; must be > 0.
    max_unacked_bytes : int, default 268435456
        Bytes of records not yet released (268435456 is 256 MiB); must be > 0. ``send``
        blocks while a record would pass it, until ACKs free room or its timeout passes.
        An empty buffer takes any record.
    send_timeout : float | None, default None
        Seconds ``send``, ``send_many`` and ``send_buffers`` wait for room when called
        without ``timeout``, before they raise ``BufferFullError``. None waits for good.
    on_delivery : Callable[[int], object] | Callable[[DeliveryError | None, Record], object] | None, default None
        Delivery reports, called by ``poll()``, ``flush()`` and ``close()`` in the calling
        thread. A callable of two arguments is called as ``on_delivery(err, record)``, as
        confluent-kafka calls it: once per record, in offset order, ``err`` None once
        ``min_acks`` stores ACKed it, or a ``DeliveryError`` for a record the producer
        closed without (``record`` is a ``Record``: topic, partition, offset, value, key,
        headers, timestamp). Each record sent is then kept until reported. A callable of
        one argument is called as ``on_delivery(acked_offset)`` when the acknowledged
        offset has advanced. Another is refused with ``TypeError``.
    max_record_bytes : int, default 67108864
        A longer value raises ``RecordTooLargeError`` and nothing is sent (67108864 is 64
        MiB); must be > 0. Stores drop records over their own ``max_record_bytes`` (the
        same default): raise both together.
    record_batches : bool, default False
        Whether nodes that know no metadata (the C reference) get no RECORDs: stores and
        consumers of this project always get records in batches of up to 64 KiB
        (META-RECORD-BATCH, with keys, headers and timestamps). For a node that does not
        know it, False sends one RECORD per record, True none, and such a node gets the
        records by fetching them. The XPUB holds ``sndhwm / 64`` messages per subscriber
        (at least 1,000).
    address_seed : str | bytes | None, default None
        The seed the partition's address comes from: the same seed (and, in secure mode,
        the same certificate) gives the same address, for a writer that runs again and
        goes on with its partition (per-key order across restarts) or rewrites it (a
        retried Spark task). None: a new address.
    first_offset : int | None, default None
        The offset of the first record sent. None: 0 for a new address; with
        ``address_seed``, where the partition ends, which the constructor asks the stores
        (up to 10 s, then ``FetchTimeoutError``), so the records follow the ones stored
        instead of being dropped as duplicates of them. Give it to rewrite offsets (what
        the Spark sink does on a retry), and in secure mode, where a producer may not ask.
    close_timeout : float, default 10.0
        Seconds ``close()`` and leaving a ``with`` block wait for the stores' ACKs of what
        was sent; 0 closes at once. Leaving a ``with`` block with records still
        unacknowledged raises ``DeliveryError`` (unless 0).

    Raises
    ------
    ConfigError
        An option is out of range or malformed: an endpoint, ``wire``, ``topic``, a zero interval
        or bound, ``min_acks`` over 1,024.
        Secure mode: ``cert`` without ``trust`` (or the reverse), a certificate of another role,
        or a tower or peer endpoint keyed (``;curve=KEY``) without ``cert``, or keyless with it.
    ValueError
        A negative or too large integer, or a number of seconds that is negative or not finite.
    TypeError
        ``towers`` or ``peers`` is a ``str`` instead of a list, or ``on_delivery`` is not callable
        with one or two arguments.
    FetchTimeoutError
        ``address_seed`` without ``first_offset``, and no store said where the partition ends
        within 10 seconds.
    OSError
        ``cert`` or ``trust`` cannot be read: ``FileNotFoundError``, ``PermissionError``, ...
        (the error names the path).
    SecurityError
        ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
    NodeError
        The node cannot start, e.g. its ``bind`` endpoint is in use.
    """

    __signature__: ClassVar[Signature]
    def __new__(
        cls,
        topic: str,
        *,
        towers: list[str] | None = None,
        peers: list[str] | None = None,
        wire: str = "rfc",
        bind: str = "tcp://127.0.0.1:*",
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        advertise_host: str | None = None,
        cert: str | os.PathLike[str] | None = None,
        trust: str | os.PathLike[str] | None = None,
        sndhwm: int = 1000000,
        rcvhwm: int = 1000000,
        min_acks: int = 1,
        head_interval: float = 1.0,
        max_unacked_bytes: int = 268435456,
        send_timeout: float | None = None,
        on_delivery: Callable[[int], object]
        | Callable[[DeliveryError | None, Record], object]
        | None = None,
        max_record_bytes: int = 67108864,
        record_batches: bool = False,
        address_seed: str | bytes | None = None,
        first_offset: int | None = None,
        close_timeout: float = 10.0,
    ) -> Producer: ...
    def send(
        self,
        value: Buffer,
        key: Buffer | None = None,
        *,
        headers: Iterable[tuple[str, Buffer]] | None = None,
        timestamp: int | datetime | None = None,
        timeout: float | None = None,
    ) -> int:
        """Publishes one record; returns its offset. ``key`` (bytes) and
        ``headers`` (a list of ``(str, bytes)`` pairs, in order, repeats allowed)
        travel with it and count against ``max_record_bytes``; ``timestamp`` is
        its create time, ms since the epoch (an int) or a ``datetime`` (default:
        now; a float, or an int that reads as seconds, is refused). Blocks (GIL
        released) while the unacknowledged buffer is full, up to ``timeout``
        (default the producer's ``send_timeout``, None = forever), then raises
        BufferFullError. ``key`` may be given by position too (``send(value,
        key)``), which a hot loop calls about 40 ns faster than ``key=key``.
        """
    def send_many(
        self,
        values: Iterable[Buffer],
        *,
        keys: Sequence[Buffer | None] | None = None,
        headers: Sequence[Iterable[tuple[str, Buffer]] | None] | None = None,
        timestamps: Sequence[int | datetime | None] | None = None,
        timeout: float | None = None,
    ) -> int | None:
        """Publishes a batch of values (``bytes`` or bytes-like) in one call;
        returns the last offset (None for an empty batch). ``keys``,
        ``headers`` and ``timestamps``, when given, are sequences as long as
        ``values`` (an entry may be None): each record's key, headers and
        create time, as ``send`` takes them.
        """
    def send_buffers(
        self,
        data: Buffer,
        offsets: Buffer,
        *,
        large: bool = False,
        timeout: float | None = None,
        key_data: Buffer | None = None,
        key_offsets: Buffer | None = None,
        key_large: bool = False,
        key_validity: Buffer | None = None,
        key_bit_offset: int = 0,
        timestamps: Buffer | None = None,
    ) -> tuple[int, int] | None:
        """Publishes the values of an Arrow ``binary``/``string`` array straight
        from its buffers: ``data`` is the value buffer, ``offsets`` the raw bytes
        of its ``n + 1`` value offsets (native-endian int32, or int64 with
        ``large=True`` for ``large_binary``/``large_string``); both any object with
        the buffer protocol, e.g. ``pyarrow.Buffer``. No Python call per value.
        Keys, optional, come the same way: ``key_data`` and ``key_offsets`` (of
        the same width, ``key_large``), with ``key_validity`` the Arrow validity
        bitmap (bit ``key_bit_offset + i`` clear: record ``i`` has no key; None:
        every record has one). ``timestamps``, optional, is a buffer of ``n``
        native-endian int64 create times in ms (default: now). Headers go
        through ``send_many``. Returns ``(first_offset, last_offset)``, or None
        when there are no values. The offsets are contiguous unless the values
        exceed ``max_unacked_bytes`` (they then go in pieces) and another thread
        sends meanwhile.
        """
    def flush(self, timeout: float | None = None) -> int:
        """Waits (GIL released) until every record sent is acknowledged by
        ``min_acks`` stores (or sent, with ``min_acks=0``), up to ``timeout``
        seconds (None = forever). Returns how many are still outstanding (0 = all
        delivered) and calls ``on_delivery``.

        Stores are counted apart by the address their ACKs carry: every dafka
        store's does, in both dialects (ADDRESSED-ACK), but a C-reference store's
        zproto ACK has none, so all C-reference stores together count as one. A
        ``min_acks`` above what can be counted is never reached: such ACKs are
        counted in ``stats()["min_acks_unreachable"]``, and the producer logs a
        warning once to the ``dafka`` logger.
        """
    def wait_for_stores(self, n: int = 1, timeout: float = 10.0) -> int:
        """Waits (GIL released) until ``n`` stores have connected to this producer
        (subscribed to its records), up to ``timeout`` seconds; returns how many
        have, counted as ``min_acks`` counts them (``stores_seen``): each dafka
        store, plus one for all C-reference stores together; in a secure cluster
        each store key once. Records sent before
        a store connects are not lost (it fetches them from this producer's
        buffer) but cross the wire twice: wait before a burst.
        """
    @property
    def stores_seen(self) -> int:
        """Stores connected now whose ACKs can be counted apart (one that left no
        longer counts): each dafka store, plus one for all C-reference stores
        together (their zproto ACKs carry no address). In a secure cluster,
        each store key once (ACKs count by key there).
        """
    def poll(self, timeout: float = 0.0) -> int:
        """Waits up to ``timeout`` seconds for delivery progress and serves
        ``on_delivery``: ``on_delivery(None, record)`` for each record newly
        acknowledged, or ``on_delivery(acked_offset)`` if it advanced. Returns
        how many records were newly acknowledged.
        """
    @property
    def close_timeout(self) -> float:
        """Seconds ``close()`` and leaving a ``with`` block wait for the stores'
        ACKs by default (the ``close_timeout`` it was made with).
        """
    @property
    def acked_offset(self) -> int | None:
        """Highest offset acknowledged by ``min_acks`` stores (None before any)."""
    @property
    def next_offset(self) -> int:
        """The offset the next ``send`` gets."""
    @property
    def unacked_bytes(self) -> int:
        """Bytes of the records held until ``min_acks`` stores ACK them (bounded by
        ``max_unacked_bytes``).
        """
    @property
    def topic(self) -> str:
        """The topic this producer publishes to."""
    @property
    def address(self) -> str:
        """The partition name: this producer's address (32 hex characters)."""
    @property
    def endpoint(self) -> str:
        """The XPUB endpoint other nodes list in ``peers=[...]``."""
    def connect(self, endpoint: str) -> None:
        """Connects to one more peer (an XPUB endpoint), like ``peers=[...]``."""
    def stats(self) -> dict[str, int]:
        """The node's counters as ``{name: count}``. A producer counts ``records_sent`` and
        ``bytes_sent`` (the bytes of their bodies: metadata and value), the same of its
        answers to FETCHes (``direct_records_sent``, ``direct_bytes_sent``),
        ``acks_received``, ``fetches_received``, ``heads_sent``, ``malformed``, ``peers``,
        ``min_acks_unreachable`` (address-less ACKs received while ``min_acks``
        was more than the stores it can count apart; see ``flush``), ``acks_ahead``
        (ACKs for offsets past the last it sent: the stores hold records of its
        partition it did not write, and drop its own at those offsets as
        duplicates; logged the first time) and, as every node, ``towers_silent``
        (times it warned that it heard no tower for a few seconds).
        """
    def close(self, timeout: float | None = None) -> int:
        """Waits until stores acknowledged what was sent (``min_acks`` of them, as
        ``flush``), up to ``timeout`` seconds (None: the producer's
        ``close_timeout``, 10 by default; 0 does not wait), then publishes what
        is left and stops the node. Returns how many records are still not
        acknowledged: those are logged (a warning of the ``dafka`` logger,
        with their offsets) and reported to ``on_delivery(err, record)`` with a
        ``DeliveryError``, as no node can fetch them from this producer any
        more. Idempotent: a second call returns the same count. Ctrl-C during
        the wait still closes the producer.
        """
    def __enter__(self) -> Self:
        """Returns the producer, for ``with Producer(...) as producer:``."""
    def __exit__(self, *exc: object) -> Literal[False]:
        """Closes the producer on leaving the ``with`` block, waiting up to
        ``close_timeout`` for the stores' ACKs of what was sent (``close()``).
        Records still unacknowledged then raise ``DeliveryError`` (unless
        ``close_timeout`` is 0, or the block called ``close()``, which returned
        their count). An exception leaving the block closes at once
        (``close(timeout=0)``, what is left logged) and propagates.
        """

@final
class Consumer:
    """A consumer of one or more topics.

    Receives the records of every partition (producer) of ``topics`` that it finds through its
    towers and peers. It returns them in offset order per partition and drops duplicates. Gaps are
    fetched from the producer and the stores. With ``group=`` it is a member of a consumer group:
    the members share the partitions and commit their positions to the stores. Without one,
    Dafka keeps no consumer offsets on the network: to resume after a restart, save
    ``positions()`` and pass them as ``start_offsets``. The node runs
    on its own thread; calls that wait release the GIL and can be interrupted with Ctrl-C.

    Parameters
    ----------
    topics : list of str
        The topics to read, at least one, each 1 to 255 bytes.
    towers : list[str] | None, default None
        Towers to find peers through, each ``tcp://HOST:IN_PORT,OUT_PORT`` (what
        ``Tower.endpoint`` gives) or ``tcp://HOST:IN_PORT`` (OUT_PORT = IN_PORT + 1).
        None: no tower.
    peers : list[str] | None, default None
        Static peers: XPUB endpoints ``tcp://HOST:PORT`` (the port the peer is bound to)
        to connect to, no tower needed. A node's ``connect(endpoint)`` adds one later.
    wire : str, default 'rfc'
        The dialect the node sends in, ``"rfc"`` or ``"zproto"`` (the C reference's
        framing). A node receives both.
    bind : str, default 'tcp://127.0.0.1:*'
        Where the node's XPUB binds; port 0 or ``*`` picks a free port. The default is
        reachable from this host only: bind ``tcp://*:0`` to be reachable from others.
    beacon_interval : float, default 1.0
        Seconds between the node's beacons; must be > 0.
    beacon_timeout : float, default 4.0
        Seconds after which a silent peer is forgotten; must be longer than
        ``beacon_interval``.
    advertise_host : str | None, default None
        Host put in beacons (NAT, containers): peers connect to ``tcp://HOST:PORT``.
        ``""`` lets the tower use the TCP peer address. None: the bound host, or ``""``
        when bound to a wildcard.
    cert : str | os.PathLike[str] | None, default None
        Secure mode (CURVE encryption and authentication, docs/security.md): the path of
        the node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it,
        of the node's role (``"producer"``, ``"consumer"``, ``"store"``, ``"tower"``; a
        read client's is ``"consumer"``). Needs ``trust``. None: plaintext, anyone who
        reaches the node joins.
    trust : str | os.PathLike[str] | None, default None
        Secure mode: the directory of trusted public certificates (``NAME.key``), read
        again when it changes. Needs ``cert``. A secure node takes only keyed tower and
        peer endpoints (``...;curve=KEY``, what a secure ``Tower.endpoint`` gives), an
        insecure one only keyless; a secure tower's ``endpoint`` carries its key.
    sndhwm : int, default 1000000
        XPUB send high-water mark, in messages per subscriber; 0 = unlimited, at most
        2,147,483,647.
    rcvhwm : int, default 1000000
        SUB receive high-water mark, in messages per peer; 0 = unlimited, at most
        2,147,483,647.
    offset_reset : str, default 'earliest'
        Where a partition seen for the first time starts, ``"earliest"`` or ``"latest"``,
        unless ``start_offsets`` lists it: ``"earliest"`` at offset 0, fetching
        everything the producer and stores still hold; ``"latest"`` at the first record
        seen (or after the first HEAD seen). Every producer run is a new partition, found
        only once discovery connects to it, so ``"latest"`` skips the first records of
        partitions born while the consumer runs. With ``start_offsets`` given, every
        partition it does not name starts at ``"earliest"``, whatever this says.
    fetch_retry : float, default 0.5
        Seconds after which an unanswered FETCH is sent again; must be > 0. After
        ``give_up_fetches`` unanswered tries the interval doubles per retry, up to 16
        times this.
    max_fetch : int, default 10000
        Most records one FETCH asks for; must be > 0.
    max_pending : int, default 100000
        Out-of-order records held per partition while a gap is fetched (and at most 64
        MiB); must be > 0. Records past the bound are fetched again once the gap fills.
    max_buffered : int, default 100000
        Records received but not yet returned to the application; must be > 0. While it
        is full, the node stops reading (counted in ``stats()["pauses"]``); what the
        producers drop meanwhile is fetched once it reads again.
    max_buffered_bytes : int, default 67108864
        The same bound in bytes of values (67108864 is 64 MiB); must be > 0. One record
        is taken however large.
    give_up_fetches : int, default 6
        FETCH rounds in a row, each answered from past a gap and none with any of it,
        before the gap is skipped (retention deleted it). Skipped records count in
        ``stats()["records_lost"]``. Must be > 0.
    start_offsets : dict[str, int] | None, default None
        ``{partition: next offset}`` to start at, e.g. a saved ``positions()``. It
        overrides ``offset_reset`` for the partitions listed; given (even empty), the
        partitions it does not name (born while the consumer was away) start at their
        first record held, whatever ``offset_reset`` says.
    idle_after : float, default 60.0
        Seconds after which a partition caught up and not heard of keeps only its
        position, not its protocol state; must be > 0.
    forget_after : float | None, default 691200.0
        Seconds (691200.0 is 8 days) after which the position of a partition not heard of
        is forgotten, unless it was seeked; heard of again, it starts by
        ``offset_reset``. Keep it above the stores' retention (168 hours by default).
        None keeps every position; 0 is refused.
    start_time : int | datetime | str | None, default None
        Where every partition the stores hold starts: at its first record at or after
        this time (ms since the epoch, a ``datetime``, or an ISO 8601 str such as
        ``"2026-11-27T09:00"``, naive times being local), as ``offsets_for_times`` finds
        it (the constructor waits for it), and every other partition at its start
        (``offset_reset`` is then ``"earliest"``); ``start_offsets`` still wins for the
        partitions it lists. Raises ``FetchTimeoutError`` when no store answers within 10
        seconds.
    group : str | None, default None
        The consumer group to join (1 to 255 bytes, docs/groups.md): the consumers of one
        group share the topics' partitions, each read by one live member, found by the
        same discovery as every node (no coordinator), and commit their positions to the
        stores. A member starts a partition at the group's last commit, one the group
        never committed by ``offset_reset``. None reads every partition. In a secure
        cluster the certificate must allow every topic (docs/groups.md, "Security").
    enable_auto_commit : bool, default True
        In a group, whether what ``poll`` returned is committed every
        ``auto_commit_interval``; False commits only on ``commit()`` (and where a
        partition moves to another member, or the consumer closes).
    auto_commit_interval : float | None, default 5.0
        In a group, seconds between commits of what ``poll`` returned; None commits only
        when a partition moves to another member and on ``commit()``. Must be > 0.
    commit_timeout : float, default 10.0
        In a group, seconds ``commit(asynchronous=False)`` and ``committed()`` wait for the
        stores before raising ``CommitTimeoutError``; must be > 0.
    on_assign : Callable[[list[tuple[str, str]]], object] | None, default None
        In a group, called as ``on_assign(partitions)`` with the list of ``(topic,
        partition)`` this member starts reading, from ``poll`` (and ``poll_many``,
        iteration) in the application's thread, before it returns records of them. An
        exception it raises propagates out of ``poll``, which then returned no record
        (none is committed past what it returned before); the changes after it are
        called by the next ``poll``.
    on_revoke : Callable[[list[tuple[str, str]]], object] | None, default None
        In a group, called as ``on_revoke(partitions)`` with the ``(topic, partition)``
        given to other members, from ``poll`` in the application's thread, before any
        ``on_assign`` that came after. They were already stopped and their positions
        committed (where the next owner starts): ``poll`` returns none of their records
        after this.

    Raises
    ------
    ConfigError
        An option is out of range or malformed: an endpoint, ``wire``, ``offset_reset``, a topic or
        partition name, a zero interval or bound.
        Secure mode: ``cert`` without ``trust`` (or the reverse), a certificate of another role,
        or a tower or peer endpoint keyed (``;curve=KEY``) without ``cert``, or keyless with it.
    ValueError
        ``topics`` is empty, an integer or offset is negative or too large, or a number of seconds
        is negative or not finite.
    TypeError
        ``topics``, ``towers`` or ``peers`` is a ``str`` instead of a list of str.
    OSError
        ``cert`` or ``trust`` cannot be read: ``FileNotFoundError``, ``PermissionError``, ...
        (the error names the path).
    SecurityError
        ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
    NodeError
        The node cannot start, e.g. its ``bind`` endpoint is in use.
    """

    __signature__: ClassVar[Signature]
    def __new__(
        cls,
        topics: Sequence[str],
        *,
        towers: list[str] | None = None,
        peers: list[str] | None = None,
        wire: str = "rfc",
        bind: str = "tcp://127.0.0.1:*",
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        advertise_host: str | None = None,
        cert: str | os.PathLike[str] | None = None,
        trust: str | os.PathLike[str] | None = None,
        sndhwm: int = 1000000,
        rcvhwm: int = 1000000,
        offset_reset: str = "earliest",
        fetch_retry: float = 0.5,
        max_fetch: int = 10000,
        max_pending: int = 100000,
        max_buffered: int = 100000,
        max_buffered_bytes: int = 67108864,
        give_up_fetches: int = 6,
        start_offsets: dict[str, int] | None = None,
        idle_after: float = 60.0,
        forget_after: float | None = 691200.0,
        start_time: int | datetime | str | None = None,
        group: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval: float | None = 5.0,
        commit_timeout: float = 10.0,
        on_assign: Callable[[list[tuple[str, str]]], object] | None = None,
        on_revoke: Callable[[list[tuple[str, str]]], object] | None = None,
    ) -> Consumer: ...
    def poll(self, timeout: float | None = None) -> Record | None:
        """The next record, waiting up to ``timeout`` seconds (None = until one
        arrives); None on timeout.
        """
    def poll_many(self, max_records: int = 10000, timeout: float | None = None) -> list[Record]:
        """Up to ``max_records`` records in one call, waiting up to ``timeout``
        seconds (None = until at least one arrives) for the first.
        """
    def _take(self, max_records: int) -> list[Record]:
        """For ``dafka.aio``: the records already here, up to ``max_records``,
        never waiting (for records, or for a thread waiting for them: then
        none). Safe on an event loop's thread.
        """
    def _ready(self, timeout: float) -> bool:
        """For ``dafka.aio``: waits (GIL released) up to ``timeout`` seconds until
        a record is here to take, and takes none: a caller that gives up
        loses nothing. Raises ``ClosedError`` once the consumer is closed.
        """
    def seek(self, partition: str, offset: int) -> None:
        """Restarts ``partition`` (a producer address) at ``offset``, fetching
        from there (a partition gone idle too); a partition not seen yet
        starts there when it is. A name that is no producer address (32 hex
        characters, e.g. Kafka's ``"0"``) raises ``ConfigError``.
        """
    def seek_to_time(
        self, partition: str | None, timestamp: int | datetime | str
    ) -> dict[str, int]:
        """Moves ``partition`` (every partition of this consumer's topics the
        stores hold, when None) to the first offset at or after
        ``timestamp`` (ms since the epoch, a ``datetime`` or an ISO 8601 str):
        asks the stores as :func:`offsets_for_times` does, then seeks. Returns
        ``{partition: offset}`` as sought; raises FetchTimeoutError when no
        store answers within 10 seconds, and UnknownPartitionError (a
        LookupError) when ``partition`` is not among what the stores hold.
        """
    def positions(self) -> dict[str, int]:
        """The next offset of each partition this consumer has returned records
        of (or seeked, or started at): ``{partition: offset}``. Save it and pass
        it as ``start_offsets=`` to resume where this consumer left off.
        """
    def commit(
        self, offsets: Mapping[str, int] | None = None, *, asynchronous: bool = True
    ) -> None:
        """In a group: commits ``offsets`` (``{partition: next offset to read}``, each a partition
        ``assignment()`` lists), or with None the position of each partition it reads that
        ``poll`` moved since the last commit (auto-commit does the same every
        ``auto_commit_interval``). ``asynchronous=False`` waits until the stores confirm
        it (every store the member knows, or any for 200 ms), raising ``CommitTimeoutError``
        after ``commit_timeout``. ``ConfigError`` without a group or for a partition it does
        not read, ``TypeError`` for offsets that are no such dict, ``ValueError`` for a
        negative offset.
        """
    def committed(self, partitions: Sequence[str] | None = None) -> dict[str, int | None]:
        """In a group: the group's last commit of each of ``partitions`` (a list of partition
        names, None for ``assignment()``'s) as the stores answer: ``{partition: offset}``,
        None for one never committed. Raises ``CommitTimeoutError`` when no store answers
        within ``commit_timeout``, ``ConfigError`` without a group.
        """
    def pause(self, partitions: Sequence[str]) -> None:
        """Stops returning records of ``partitions`` (a list of partition names) until
        ``resume``: what ``poll`` has not returned of them is dropped and fetched again on
        resuming, from where ``poll`` stopped. Each must be one it reads (a group member's
        ``assignment()``, else one of ``positions()``), else ``ConfigError``. A partition
        given to another member is no longer paused.
        """
    def resume(self, partitions: Sequence[str]) -> None:
        """Returns records of paused ``partitions`` again, from where ``poll`` stopped; others
        are left as they are.
        """
    def paused(self) -> list[str]:
        """The partitions paused, sorted."""
    def group_members(self) -> int:
        """In a group: the live members this one counts, itself included (0 without a group)."""
    def assignment(self) -> list[tuple[str, str]]:
        """In a group: the partitions this member reads, as ``[(topic, partition)]`` sorted (empty
        without a group, and until the group settled).
        """
    @property
    def group(self) -> str | None:
        """The consumer group it is a member of, or None."""
    def connect(self, endpoint: str) -> None:
        """Connects to one more peer (an XPUB endpoint), like ``peers=[...]``."""
    @property
    def topics(self) -> list[str]:
        """The topics this consumer reads."""
    @property
    def address(self) -> str:
        """This consumer's address (32 hex characters)."""
    @property
    def endpoint(self) -> str:
        """The XPUB endpoint other nodes list in ``peers=[...]``."""
    def stats(self) -> dict[str, int]:
        """The node's counters as ``{name: count}``, e.g. ``delivered``, ``records_received``
        and ``bytes_received`` (the bytes of their bodies: metadata and value), ``gaps``,
        ``fetches_sent``, ``duplicates``, ``records_lost``, ``stalled_partitions``, ``pauses``,
        ``malformed``.
        """
    def close(self) -> None:
        """Stops the node (idempotent)."""
    def __iter__(self) -> Self:
        """Returns the consumer: ``for record in consumer`` waits for each record and ends
        when the consumer is closed."""
    def __next__(self) -> Record:
        """Blocks until the next record; stops when the consumer is closed."""
    def __enter__(self) -> Self:
        """Returns the consumer, for ``with Consumer(...) as consumer:``."""
    def __exit__(self, *_exc: object) -> Literal[False]:
        """Closes the consumer on leaving the ``with`` block; an exception propagates."""

@final
class NativeLog:
    """The native handle of a log directory; ``dafka.Log`` is its typed Python face
    (use that: it documents every option and method). Every call releases the GIL
    around the disk work; after :meth:`close`, calls raise ``LogError``.

    Parameters
    ----------
    segment_bytes : int, default 536870912
        Roll a partition to a new segment file when the active one would pass this size
        (536870912 is 512 MiB); 48 to 2147483648.
    retain_hours : int | None, default 168
        Delete segments whose newest record is older than this many hours, the active one
        too, checked every 60 s; an emptied partition keeps its next offset, parked. None
        keeps records for good; 0 is refused.
    retain_bytes : int | None, default None
        Delete a partition's oldest sealed segments while it holds more bytes than this.
        None sets no limit.
    forget_parked_hours : int | None, default 720
        Forget a parked partition (one that retention emptied, kept as its next offset)
        this many hours after it was parked. None keeps them for good; 0 is refused.
    index_interval_bytes : int, default 4096
        Bytes of records between two index entries.
    flush_messages : int, default 10000
        With ``fsync="interval"``: sync once this many records are unsynced.
    flush_interval_ms : int, default 1000
        With ``fsync="interval"``: sync once this many milliseconds passed since the last
        sync.
    fsync : Literal["always", "interval", "never"], default 'interval'
        When appends are synced: ``"always"`` (every append call), ``"interval"`` (once
        ``flush_messages`` records are unsynced or ``flush_interval_ms`` passed, checked on
        append and ``tick()``) or ``"never"`` (only ``flush()``).
    recovery : Literal["tolerate_tail_corruption", "absolute_consistency"], default 'tolerate_tail_corruption'
        What opening does with damage at the end of a partition's last segment:
        ``"tolerate_tail_corruption"`` cuts it off if no valid record follows it,
        ``"absolute_consistency"`` cuts off only a torn last record.
    read_only : bool, default False
        Open without changing anything (no recovery truncation, no appends).
    isolate_damaged : bool, default False
        Set aside a partition whose damage recovery refuses (see ``damaged()``) instead of
        failing the open, as a store does.
    """

    __signature__: ClassVar[Signature]
    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        segment_bytes: int = 536870912,
        retain_hours: int | None = 168,
        retain_bytes: int | None = None,
        forget_parked_hours: int | None = 720,
        index_interval_bytes: int = 4096,
        flush_messages: int = 10000,
        flush_interval_ms: int = 1000,
        fsync: Literal["always", "interval", "never"] = "interval",
        recovery: Literal[
            "tolerate_tail_corruption", "absolute_consistency"
        ] = "tolerate_tail_corruption",
        read_only: bool = False,
        isolate_damaged: bool = False,
    ) -> NativeLog: ...
    def append(
        self,
        topic: bytes,
        partition: str,
        offset: int,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp: int | None = None,
    ) -> None:
        """Appends one record at ``offset``, the partition's next one, with its key,
        headers (``(name, value)`` pairs) and create time (ms since the epoch);
        without any of them, a plain value.
        """
    def append_many(
        self,
        topic: bytes,
        partition: str,
        first_offset: int,
        values: list[bytes],
        *,
        keys: list[bytes | None] | None = None,
        headers: list[list[tuple[str, bytes]] | None] | None = None,
        timestamps: list[int | None] | None = None,
    ) -> None:
        """Appends records at ``first_offset``, ``first_offset + 1``, ... in one write;
        ``keys``, ``headers`` and ``timestamps``, when given, hold one entry per value
        (None for none).
        """
    def read(
        self, topic: bytes, partition: str, start: int, max_records: int, max_bytes: int
    ) -> list[tuple[int, int, bytes, bytes | None, list[tuple[str, bytes]], int | None]]:
        """``(offset, append_time, value, key, headers, create_time)`` of the records
        from ``start`` on, at most ``max_records`` and ``max_bytes`` of bodies (at
        least one record); ``create_time`` is None for a plain value.
        """
    def partitions(
        self, topic: bytes | None = None
    ) -> list[tuple[bytes, str, int, int, int, int, int]]:
        """The partitions held (of ``topic``, or all) as the fields of
        ``dafka.log.PartitionInfo``.
        """
    def damaged(self) -> list[tuple[bytes, str, str]]:
        """``(topic, partition, why)`` of each partition set aside because it could not
        be opened (``isolate_damaged``).
        """
    def topics(self) -> list[bytes]:
        """The topics held."""
    def offset_for_time(self, topic: bytes, partition: str, timestamp: int) -> int | None:
        """The first offset whose time (its create time, else its append time) is at or
        after ``timestamp`` (ms since the epoch).
        """
    def verify(self, topic: bytes, partition: str) -> int:
        """Reads every record of the partition checking its CRC, offset and metadata;
        returns how many it holds (0 for a parked one).
        """
    def next_offset(self, topic: bytes, partition: str) -> int | None:
        """The partition's next offset (None for a partition not held)."""
    def first_offset(self, topic: bytes, partition: str) -> int | None:
        """The lowest offset the partition still holds (None when not held)."""
    def durable_next(self, topic: bytes, partition: str) -> int | None:
        """The offset below which records are synced to disk (None when not held)."""
    def flush(self) -> None:
        """Syncs every partition's unsynced appends to disk."""
    def tick(self) -> None:
        """Periodic work: the interval syncs that fell due and, once a minute, retention.
        Cheap when nothing is due.
        """
    def enforce_retention(self) -> int:
        """Applies retention to every partition now, parking those left with no record;
        returns how many segments it deleted.
        """
    def close(self) -> None:
        """Syncs and closes the log (idempotent)."""
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""

@final
class Store:
    """A store: persists the partitions it hears, ACKs what is durable, answers FETCHes.

    Runs a store node in this process over the durable log in ``PATH/log``. Its address is kept in
    ``PATH/store.id`` and reused after a restart. It ACKs, cumulatively per partition, only what
    reached fdatasync (with ``fsync="never"``, what was appended). It fetches its own gaps from
    producers and other stores, and serves FETCHes of late consumers and other stores from the
    log. On a storage error (disk full) it stops ACKing, reports the error in ``stats()["error"]``,
    reopens the failed partitions every second and resumes. The node runs on its own thread.

    Parameters
    ----------
    path : str or os.PathLike
        The store's directory, created if missing. It must not be empty (``"."`` names the
        current directory).
    towers : list[str] | None, default None
        Towers to find peers through, each ``tcp://HOST:IN_PORT,OUT_PORT`` (what
        ``Tower.endpoint`` gives) or ``tcp://HOST:IN_PORT`` (OUT_PORT = IN_PORT + 1).
        None: no tower.
    peers : list[str] | None, default None
        Static peers: XPUB endpoints ``tcp://HOST:PORT`` (the port the peer is bound to)
        to connect to, no tower needed. A node's ``connect(endpoint)`` adds one later.
    wire : str, default 'rfc'
        The dialect the node sends in, ``"rfc"`` or ``"zproto"`` (the C reference's
        framing). A node receives both.
    bind : str, default 'tcp://127.0.0.1:*'
        Where the node's XPUB binds; port 0 or ``*`` picks a free port. The default is
        reachable from this host only: bind ``tcp://*:0`` to be reachable from others.
    beacon_interval : float, default 1.0
        Seconds between the node's beacons; must be > 0.
    beacon_timeout : float, default 4.0
        Seconds after which a silent peer is forgotten; must be longer than
        ``beacon_interval``.
    advertise_host : str | None, default None
        Host put in beacons (NAT, containers): peers connect to ``tcp://HOST:PORT``.
        ``""`` lets the tower use the TCP peer address. None: the bound host, or ``""``
        when bound to a wildcard.
    cert : str | os.PathLike[str] | None, default None
        Secure mode (CURVE encryption and authentication, docs/security.md): the path of
        the node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it,
        of the node's role (``"producer"``, ``"consumer"``, ``"store"``, ``"tower"``; a
        read client's is ``"consumer"``). Needs ``trust``. None: plaintext, anyone who
        reaches the node joins.
    trust : str | os.PathLike[str] | None, default None
        Secure mode: the directory of trusted public certificates (``NAME.key``), read
        again when it changes. Needs ``cert``. A secure node takes only keyed tower and
        peer endpoints (``...;curve=KEY``, what a secure ``Tower.endpoint`` gives), an
        insecure one only keyless; a secure tower's ``endpoint`` carries its key.
    sndhwm : int, default 1000000
        XPUB send high-water mark, in messages per subscriber; 0 = unlimited, at most
        2,147,483,647.
    rcvhwm : int, default 1000000
        SUB receive high-water mark, in messages per peer; 0 = unlimited, at most
        2,147,483,647.
    fsync : Literal["always", "interval", "never"], default 'interval'
        When appends are synced: ``"interval"`` (a group commit once
        ``flush_interval_ms`` passed or ``flush_messages`` records are unsynced),
        ``"always"`` (a sync whenever records are unsynced and none is running) or
        ``"never"`` (only when the store closes).
    flush_interval_ms : int, default 1
        With ``fsync="interval"``: sync once this many milliseconds passed since the last
        sync.
    flush_messages : int, default 100000
        With ``fsync="interval"``: sync once this many records are unsynced; must be >= 1.
    recovery : Literal["tolerate_tail_corruption", "absolute_consistency"], default 'tolerate_tail_corruption'
        What opening does with damage at the end of a partition's last segment:
        ``"tolerate_tail_corruption"`` cuts it off if no valid record follows it,
        ``"absolute_consistency"`` cuts off only a torn last record. A partition whose
        damage recovery refuses is set aside (counted in ``stats()["damaged_partitions"]``).
    max_record_bytes : int, default 67108864
        Longer records are dropped (67108864 is 64 MiB) and counted in
        ``stats()["dropped_oversize"]``; must be >= 1. Keep it at least the producers'
        ``max_record_bytes``.
    fetch_retry : float, default 0.5
        Seconds after which an unanswered FETCH for a gap is sent again; at least 0.001.
        After 6 unanswered tries the interval doubles per retry, up to 16 times this.
    max_open_files : int | None, default None
        Most segment files kept open; the others are reopened on use. None: half the
        process's open-files limit (whose soft value is raised to the hard one), at least
        64. All stores in a process together keep within that half. 0 is refused.
    segment_bytes : int, default 536870912
        Roll a partition to a new segment file when the active one would pass this size
        (536870912 is 512 MiB); 48 to 2147483648.
    retain_hours : int | None, default 168
        Delete segments whose newest record is older than this many hours, the active one
        too, checked every 60 s; an emptied partition keeps its next offset, parked. None
        keeps records for good; 0 is refused.
    retain_bytes : int | None, default None
        Delete a partition's oldest sealed segments while it holds more bytes than this.
        None sets no limit.
    forget_parked_hours : int | None, default 720
        Forget a parked partition (one that retention emptied, kept as its next offset)
        this many hours after it was parked. None keeps them for good; 0 is refused.

    Raises
    ------
    ConfigError
        An option is out of range or malformed: an endpoint, ``wire``, ``fsync``, ``recovery``,
        ``fetch_retry``, a zero count, an empty ``path`` or a bad ``PATH/store.id``.
        Secure mode: ``cert`` without ``trust`` (or the reverse), a certificate of another role,
        or a tower or peer endpoint keyed (``;curve=KEY``) without ``cert``, or keyless with it.
    ValueError
        A negative or too large integer, ``retain_hours=0`` or ``forget_parked_hours=0``, or a
        number of seconds that is negative or not finite.
    TypeError
        ``towers`` or ``peers`` is a ``str`` instead of a list.
    LogError
        The log cannot be opened, e.g. another ``Store`` or ``Log`` holds it; ``LogValueError`` for
        ``segment_bytes`` out of range or ``max_open_files=0``.
    OSError
        ``cert`` or ``trust`` cannot be read: ``FileNotFoundError``, ``PermissionError``, ...
        (the error names the path).
    SecurityError
        ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
    NodeError
        The node cannot start, e.g. its ``bind`` endpoint is in use.
    """

    __signature__: ClassVar[Signature]
    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        towers: list[str] | None = None,
        peers: list[str] | None = None,
        wire: str = "rfc",
        bind: str = "tcp://127.0.0.1:*",
        beacon_interval: float = 1.0,
        beacon_timeout: float = 4.0,
        advertise_host: str | None = None,
        cert: str | os.PathLike[str] | None = None,
        trust: str | os.PathLike[str] | None = None,
        sndhwm: int = 1000000,
        rcvhwm: int = 1000000,
        fsync: Literal["always", "interval", "never"] = "interval",
        flush_interval_ms: int = 1,
        flush_messages: int = 100000,
        recovery: Literal[
            "tolerate_tail_corruption", "absolute_consistency"
        ] = "tolerate_tail_corruption",
        max_record_bytes: int = 67108864,
        fetch_retry: float = 0.5,
        max_open_files: int | None = None,
        segment_bytes: int = 536870912,
        retain_hours: int | None = 168,
        retain_bytes: int | None = None,
        forget_parked_hours: int | None = 720,
    ) -> Store: ...
    @property
    def address(self) -> str:
        """The store's address (32 hex characters), kept in ``PATH/store.id``."""
    @property
    def endpoint(self) -> str:
        """The XPUB endpoint other nodes list in ``peers=[...]``."""
    @property
    def path(self) -> str:
        """The store's directory, as given."""
    def connect(self, endpoint: str) -> None:
        """Connects to one more peer (an XPUB endpoint), like ``peers=[...]``."""
    def partitions(self, topic: str | bytes | None = None) -> list[PartitionInfo]:
        """The partitions held (optionally of one topic), as
        ``dafka.log.PartitionInfo`` (topic, partition, first/next/durable
        offsets, bytes, segments).
        A topic is ``str`` (surrogate escapes for bytes that are not UTF-8, as
        ``dafka.Log`` and ``Record.topic`` give them) or ``bytes``.
        """
    def stats(self) -> dict[str, int | str | None]:
        """Counters of the node and the store logic, and ``error``: the current
        storage error (e.g. disk full) or None. ``appended`` and ``bytes_appended``
        count the records the log took and the bytes of their bodies (metadata and
        value), ``records_served`` and ``bytes_served`` those sent in answer to
        FETCHes. ``syncs``, ``sync_micros_total``
        and ``sync_micros_max`` time the group commits (fdatasyncs) that ACKs
        wait for: a high maximum means the disk stalls.
        """
    def check(self) -> None:
        """Raises the node thread's error if it stopped; otherwise returns."""
    def close(self) -> None:
        """Stops the store: syncs the log, joins the thread (idempotent)."""
    def __enter__(self) -> Self:
        """Returns the store, for ``with Store(...) as store:``."""
    def __exit__(self, *_exc: object) -> Literal[False]:
        """Closes the store on leaving the ``with`` block; an exception propagates."""
