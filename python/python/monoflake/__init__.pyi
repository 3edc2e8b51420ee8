"""Snowflake-style 64-bit IDs that are never issued twice, whatever the clock, a restart or a
fork does: a native extension over the monoflake Rust library.

IDs are plain ``int``; durations are float seconds; times are aware ``datetime`` in UTC.
"""

import array
import datetime
import os
from typing import Literal, Optional, Sequence, Union, final

__all__ = [
    "Error",
    "WouldBlock",
    "TimedOut",
    "Exhausted",
    "LeaseLost",
    "Forked",
    "NodeUnavailable",
    "StoreError",
    "InvalidLayout",
    "InvalidId",
    "OutOfRange",
    "BatchTooLarge",
    "InvalidKey",
    "InvalidConfig",
    "LeaseWarning",
    "Layout",
    "Parts",
    "Generator",
    "Stats",
    "Opaque",
    "next_id",
    "next_ids",
    "configure_default",
    "decode",
    "encode",
    "parse",
    "PRESETS",
]

__version__: str
PRESETS: tuple[str, ...]
"""The layout preset names: twitter, discord, sonyflake, baidu, js-safe, game-server."""

_Path = Union[str, "os.PathLike[str]"]
_LayoutArg = Union["Layout", str]
_Encoding = Literal["decimal", "hex", "base32", "base62"]

def next_id() -> int:
    """One ID from the process-wide default generator: the Twitter layout and a node claimed
    from the host-wide file store ($MONOFLAKE_STATE_DIR, else /var/lib/monoflake), unless
    `configure_default` said otherwise. The first call in a process, and the first in a forked
    child, claims a node (the GIL is released meanwhile); later calls cost about what
    `time.monotonic_ns()` does. Waits, bounded, at the layout's lead limit.

    At a normal exit the default gives its node up (the final reservation written), so the
    next process takes it at once. After a lost lease it is released and a node claimed
    again, said by a `LeaseWarning`.

    Raises `TimedOut`, `Exhausted`, `LeaseLost`, `NodeUnavailable` or `StoreError`."""

def next_ids(n: int) -> list[int]:
    """`n` consecutive IDs from the process-wide default generator. The list is made with
    the GIL held; a wait at the lead limit releases it. In asyncio, a large batch goes
    through ``await asyncio.to_thread(monoflake.next_ids, n)``."""

def configure_default(
    layout: Optional[_LayoutArg] = None,
    node: Union[int, Literal["auto"], None] = None,
    *,
    backend: Literal["file", "etcd", "postgres"] = "file",
    state_dir: Optional[_Path] = None,
    etcd_endpoints: Union[str, Sequence[str]] = ...,
    etcd_prefix: str = "/monoflake",
    lease_ttl: float = 10,
    etcd_ca: Optional[_Path] = None,
    etcd_cert: Optional[_Path] = None,
    etcd_key: Optional[_Path] = None,
    etcd_user: Optional[str] = None,
    etcd_password: Optional[str] = None,
    pg_url: Optional[str] = None,
    pg_table: str = "monoflake_nodes",
    max_lead: Optional[float] = None,
    max_wait: Optional[float] = None,
    start_offset_bits: int = 0,
    reservation_window: Optional[float] = None,
    future_reservation_tolerance: Optional[float] = None,
    trust_future_reservation: bool = False,
) -> None:
    """How the default generator is built (the settings of `Generator`); call it before the
    first `next_id()`. Forked children build theirs the same way. Raises `Error` (kind
    ``"DefaultAlreadyBuilt"``) once the default exists."""

def decode(id: int, layout: Optional[_LayoutArg] = None) -> Parts:
    """The parts of `id` under `layout`; by default the default generator's layout
    (`configure_default`'s, else Twitter's)."""

def encode(id: int, encoding: _Encoding = "base32") -> str:
    """`id` as text: decimal, or fixed-width order-preserving hex (16), base32 (13, Crockford)
    or base62 (11)."""

def parse(text: str, encoding: _Encoding = "decimal") -> int:
    """The ID written as `text` in `encoding` (hex with or without ``0x``, as the CLI prints
    it); `InvalidId` when it is not one."""

@final
class Layout:
    """Bit widths, named node fields, epoch and tick, checked when made.

    ``Layout("discord")`` takes a preset name, ``Layout("time=41,worker=10,sequence=12,
    epoch=2024-01-01")`` a spec (as the CLI's ``--layout``), and ``name`` a name for it.
    Hashable and picklable. Two layouts are equal when they split IDs alike, which is what
    their ``spec`` says (widths, node field names, order, epoch, tick, sign bit); the name is a
    label and is not compared: ``Layout(odd.spec) == odd``. ``repr()`` keeps the name.

    An int argument out of its range (negative, or beyond 64 bits) raises `OutOfRange`."""

    def __new__(cls, spec: str = "twitter", name: Optional[str] = None) -> Layout: ...
    @staticmethod
    def custom(
        *,
        time_bits: int,
        sequence_bits: int,
        node_fields: Sequence[tuple[str, int]],
        epoch_ms: int,
        tick_ms: int = 1,
        node_below_sequence: bool = False,
        allow_sign_bit: bool = False,
        name: Optional[str] = None,
    ) -> Layout: ...
    @staticmethod
    def presets() -> list[str]: ...
    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> str: ...
    @property
    def state_name(self) -> str: ...
    @property
    def shape_key(self) -> str: ...
    @property
    def time_bits(self) -> int: ...
    @property
    def node_bits(self) -> int: ...
    @property
    def sequence_bits(self) -> int: ...
    @property
    def total_bits(self) -> int: ...
    @property
    def node_fields(self) -> list[tuple[str, int]]: ...
    @property
    def node_below_sequence(self) -> bool: ...
    @property
    def allows_sign_bit(self) -> bool: ...
    @property
    def epoch_ms(self) -> int: ...
    @property
    def tick_ms(self) -> int: ...
    @property
    def max_tick(self) -> int: ...
    @property
    def max_node(self) -> int: ...
    @property
    def max_sequence(self) -> int: ...
    @property
    def expires_at_ms(self) -> int: ...
    @property
    def expires_at(self) -> datetime.datetime:
        """`expires_at_ms` as a datetime; `OutOfRange` past the year 9999."""
    def tick_at(self, unix_ms: int) -> int: ...
    def unix_ms_of_tick(self, tick: int) -> int: ...
    def compose(self, tick: int, node: int, sequence: int) -> int: ...
    def compose_at(self, unix_ms: int, node: int, sequence: int) -> int: ...
    def node_from_fields(self, **fields: int) -> int: ...
    def node_fields_of(self, node: int) -> dict[str, int]:
        """The node fields of `node`; `OutOfRange` when it does not fit the layout."""
    def check_node(self, node: int) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Parts:
    """An ID read back by its layout."""

    @property
    def id(self) -> int: ...
    @property
    def tick(self) -> int: ...
    @property
    def unix_ms(self) -> int: ...
    @property
    def time(self) -> datetime.datetime:
        """Aware, UTC, millisecond precision."""
    @property
    def rfc3339(self) -> str: ...
    @property
    def node(self) -> int: ...
    @property
    def sequence(self) -> int: ...
    @property
    def fields(self) -> dict[str, int]: ...
    @property
    def layout(self) -> Layout: ...
    def field(self, name: str) -> Optional[int]: ...
    def as_dict(self) -> dict[str, Union[int, str]]:
        """The keys of ``monoflake decode --json``: id, unix_ms, time, node, sequence and the
        named fields."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Stats:
    """A generator's counters (see the Rust ``Stats`` for each)."""

    issued: int
    borrowed_ticks: int
    max_lead_ticks: int
    would_block_returned: int
    waiting_calls: int
    wait_retries: int
    wait_spins: int
    wait_yields: int
    wait_sleeps: int
    timed_out: int
    reanchors: int
    max_skew_ns: int
    skew_ns: int
    slew_left_ns: int
    clock_held_back_ns: int
    nodes_skipped_ahead: int
    claim_wait_ms: int
    reservation_writes: int
    reservation_failures: int
    lease_renewals: int
    lease_losses: int
    def as_dict(self) -> dict[str, int]: ...

@final
class Generator:
    """IDs on one node, leased from a node store: the node is never shared with another live
    generator, and a restart never reissues a time its node used. Thread-safe; a context
    manager that releases the node on exit. In a forked child it raises `Forked`.

    The store is ``backend``: ``"file"`` (``state_dir``), ``"etcd"`` (the ``etcd_*`` settings)
    or ``"postgres"`` (``pg_url``, else ``$MONOFLAKE_PG_URL``; ``pg_table``). ``lease_ttl``
    (whole seconds) is etcd's and PostgreSQL's. A setting of another backend than the one
    chosen raises `InvalidConfig`."""

    def __new__(
        cls,
        layout: Optional[_LayoutArg] = None,
        node: Union[int, Literal["auto"], None] = None,
        *,
        backend: Literal["file", "etcd", "postgres"] = "file",
        state_dir: Optional[_Path] = None,
        etcd_endpoints: Union[str, Sequence[str]] = ...,
        etcd_prefix: str = "/monoflake",
        lease_ttl: float = 10,
        etcd_ca: Optional[_Path] = None,
        etcd_cert: Optional[_Path] = None,
        etcd_key: Optional[_Path] = None,
        etcd_user: Optional[str] = None,
        etcd_password: Optional[str] = None,
        pg_url: Optional[str] = None,
        pg_table: str = "monoflake_nodes",
        max_lead: Optional[float] = None,
        max_wait: Optional[float] = None,
        start_offset_bits: int = 0,
        reservation_window: Optional[float] = None,
        future_reservation_tolerance: Optional[float] = None,
        trust_future_reservation: bool = False,
    ) -> Generator: ...
    @staticmethod
    def unleased(
        layout: _LayoutArg,
        node: int,
        *,
        max_lead: Optional[float] = None,
        max_wait: Optional[float] = None,
        start_offset_bits: int = 0,
    ) -> Generator:
        """A generator on a node you assign yourself: no lease, no time reservation."""
    def next_id(self) -> int:
        """One ID; waits (the GIL released) at the lead limit, for at most `max_wait`."""
    def try_next_id(self) -> int:
        """One ID without waiting: raises `WouldBlock` (with `retry_after`) instead."""
    def next_ids(self, n: int) -> list[int]:
        """`n` consecutive IDs, reserved at once; waits as `next_id`. `BatchTooLarge` at once
        when `n` can never fit within max_lead."""
    def next_ids_array(self, n: int) -> "array.array[int]":
        """`n` consecutive IDs as ``array.array("Q")``: no int objects made (a buffer numpy
        and database drivers take as is)."""
    def try_next_ids(self, n: int) -> list[int]:
        """`n` consecutive IDs without waiting: `WouldBlock` when they do not fit now,
        `BatchTooLarge` when they never can."""
    def check(self) -> None:
        """Raises what a call would raise now, without issuing (a readiness probe)."""
    def stats(self) -> Stats: ...
    @property
    def node(self) -> int: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def leased(self) -> bool: ...
    @property
    def max_wait(self) -> float: ...
    @property
    def last_tick(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Stops issuing, writes the final reservation, gives the node up. Calls waiting on
        other threads, and later calls, raise `LeaseLost`. In a forked child it only marks
        the generator closed."""
    def __enter__(self) -> Generator: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...

@final
class Opaque:
    """A keyed permutation of a layout's IDs: `encrypt` hides time, node and order. Without
    `layout`, the default generator's (`configure_default`'s, else Twitter's)."""

    def __new__(cls, key: Union[bytes, str], layout: Optional[_LayoutArg] = None) -> Opaque: ...
    @staticmethod
    def from_key_file(path: _Path, layout: Optional[_LayoutArg] = None) -> Opaque: ...
    @property
    def bits(self) -> int: ...
    def encrypt(self, id: int) -> int: ...
    def decrypt(self, opaque: int) -> int: ...

class Error(Exception):
    """Base of every monoflake error."""

    kind: str
    """The Rust variant, e.g. ``"AllNodesHeld"``."""

class WouldBlock(Error):
    retry_after: float

class TimedOut(WouldBlock):
    waited: float

class Exhausted(Error):
    expired_at_ms: int

class LeaseLost(Error):
    node: int
    reason: str

class Forked(Error):
    node: int

class NodeUnavailable(Error): ...
class StoreError(Error): ...
class InvalidLayout(Error, ValueError): ...
class InvalidId(Error, ValueError): ...

class OutOfRange(Error, ValueError):
    field: str
    value: int
    max: int

class BatchTooLarge(Error, ValueError):
    """A batch that can never fit within max_lead; refused at once, nothing issued."""

    requested: int
    limit: int

class InvalidKey(Error, ValueError): ...

class InvalidConfig(Error, ValueError):
    setting: str
    value: str
    allowed: str

class LeaseWarning(UserWarning):
    """Said once: the default state directory is this user's own (the host-wide one cannot
    be used), or the default generator claimed a node again after its lease was lost."""
