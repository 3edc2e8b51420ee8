"""The exceptions: one class per kind of failure, with the numbers as attributes."""

from __future__ import annotations

import threading
import time

import pytest

import monoflake

# Two IDs per second: a tick of 1 s, one sequence bit, no borrowing ahead of the clock.
SLOW = "time=31,worker=4,sequence=1,epoch=2024-01-01,tick=1s"


def test_the_hierarchy():
    E = monoflake.Error
    assert issubclass(E, Exception) and not issubclass(E, ValueError)
    for cls in (
        monoflake.WouldBlock,
        monoflake.Exhausted,
        monoflake.LeaseLost,
        monoflake.Forked,
        monoflake.NodeUnavailable,
        monoflake.StoreError,
    ):
        assert issubclass(cls, E) and not issubclass(cls, ValueError)
    assert issubclass(monoflake.TimedOut, monoflake.WouldBlock)
    for cls in (
        monoflake.InvalidLayout,
        monoflake.InvalidId,
        monoflake.OutOfRange,
        monoflake.InvalidKey,
        monoflake.InvalidConfig,
    ):
        assert issubclass(cls, E) and issubclass(cls, ValueError)
        assert cls.__module__ == "monoflake"


def test_a_layout_too_wide_says_so_with_the_numbers():
    with pytest.raises(monoflake.InvalidLayout) as e:
        monoflake.Layout("time=37,server=20,sequence=16,epoch=2020-01-01")
    assert e.value.kind == "LayoutTooWide"
    assert "73 bits (time 37 + node 20 + sequence 16)" in str(e.value)
    with pytest.raises(monoflake.InvalidLayout) as e:
        monoflake.Layout("snowflake")
    assert e.value.kind == "UnknownPreset"
    with pytest.raises(ValueError):
        monoflake.Layout.custom(time_bits=41, sequence_bits=0, node_fields=[], epoch_ms=0)


def test_bad_ids_are_invalid_id():
    for bad in (-1, 2**64):
        with pytest.raises(monoflake.InvalidId) as e:
            monoflake.decode(bad)
        assert e.value.kind == "InvalidId" and e.value.input == str(bad)
    with pytest.raises(monoflake.InvalidId) as e:
        monoflake.decode(2**63)  # Twitter IDs fit an i64
    assert e.value.kind in ("IdTooWide", "SignBitSet")
    with pytest.raises(monoflake.InvalidId) as e:
        monoflake.decode(2**53, "js-safe")
    assert e.value.kind == "IdTooWide" and e.value.layout_bits == 53
    with pytest.raises(monoflake.InvalidId) as e:
        monoflake.parse("04W86BB0G400U", "base32")
    assert e.value.kind == "InvalidId" and e.value.input == "04W86BB0G400U"
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.parse("1", "base64")
    assert (e.value.setting, e.value.value) == ("encoding", "base64")


def test_values_out_of_range_give_field_value_and_max(state_dir):
    with pytest.raises(monoflake.OutOfRange) as e:
        monoflake.Generator.unleased("twitter", 1024)
    assert (e.value.field, e.value.value, e.value.max) == ("node", 1024, 1023)
    with pytest.raises(monoflake.OutOfRange) as e:
        monoflake.Layout("twitter").node_from_fields(worker=32)
    assert (e.value.field, e.value.value, e.value.max) == ("worker", 32, 31)
    with pytest.raises(monoflake.OutOfRange) as e:
        monoflake.Generator(node=4096, state_dir=state_dir)
    assert e.value.field == "node"
    with monoflake.Generator(state_dir=state_dir) as g:
        with pytest.raises(monoflake.OutOfRange) as e:
            g.next_ids(-1)
        assert (e.value.field, e.value.value) == ("n", -1)
    with pytest.raises(monoflake.InvalidLayout) as e:
        monoflake.Layout("twitter").node_from_fields(shard=1)
    assert e.value.kind == "InvalidFieldName"


def test_keys_and_settings():
    with pytest.raises(monoflake.InvalidKey):
        monoflake.Opaque(b"short")
    with pytest.raises(monoflake.InvalidKey):
        monoflake.Opaque("not hex at all, not hex at all!!")
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator.unleased("twitter", 1, max_lead=-1.0)
    assert e.value.setting == "max_lead"
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(backend="zookeeper")
    assert (e.value.setting, e.value.value) == ("backend", "zookeeper")
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(node="any")
    assert e.value.setting == "node"
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(etcd_user="me")
    assert "backend" in str(e.value)


def test_the_library_refuses_unsafe_settings(state_dir):
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(state_dir=state_dir, reservation_window=0.001)
    assert e.value.kind == "InvalidConfig" and e.value.setting == "reservation_window"
    assert "10 ms" in e.value.allowed


def test_would_block_then_timed_out_at_the_lead_limit():
    g = monoflake.Generator.unleased(SLOW, 1, max_lead=0, max_wait=0.01)
    issued = []
    with pytest.raises(monoflake.WouldBlock) as e:
        for _ in range(3):
            issued.append(g.try_next_id())
    assert len(issued) <= 2 and e.value.kind == "WouldBlock"
    assert 0 < e.value.retry_after <= 1.0
    with pytest.raises(monoflake.TimedOut) as e:
        for _ in range(3):
            g.next_id()
    assert e.value.kind == "TimedOut"
    assert e.value.waited >= 0.01 and 0 < e.value.retry_after <= 1.0
    assert isinstance(e.value, monoflake.WouldBlock)
    # Python's waits retry the non-waiting call (in slices that check signals): each refusal
    # counts as a WouldBlock returned, the first one's and the retries'.
    stats = g.stats()
    assert stats.would_block_returned >= 3


def test_a_wait_at_the_lead_limit_releases_the_gil():
    # Two IDs per second: the third call waits for the next second. If it held the GIL, this
    # thread could not run any Python code while it waits.
    g = monoflake.Generator.unleased(SLOW, 1, max_lead=0, max_wait=5)
    # Three calls end at the start of a second (the third waits for it), a fourth takes that
    # second's other ID: the next call waits for most of a second.
    for _ in range(4):
        g.next_id()
    span: list[float] = []

    def waiter() -> None:
        t0 = time.monotonic()
        g.next_id()
        span.extend([t0, time.monotonic()])

    stamps: list[float] = []
    t = threading.Thread(target=waiter)
    t.start()
    while t.is_alive():
        stamps.append(time.monotonic())
        time.sleep(0.001)
    t.join()
    t0, t1 = span
    if t1 - t0 < 0.2:
        pytest.skip("the clock reached the next tick before the call had to wait")
    # Past the interpreter's switch interval after the call began, and before it returned.
    inside = [s for s in stamps if t0 + 0.05 < s < t1 - 0.05]
    assert inside, "no Python code ran while next_id() waited"


def test_exhausted_layout_fails_loudly():
    # Baidu's 28 bits of seconds from 2016-05-20 ran out in November 2024.
    g = monoflake.Generator.unleased("baidu", 1)
    for _ in range(2):
        with pytest.raises(monoflake.Exhausted) as e:
            g.next_id()
        assert e.value.expired_at_ms == monoflake.Layout("baidu").expires_at_ms


def test_held_nodes(state_dir):
    two_nodes = "time=41,worker=1,sequence=12,epoch=2024-01-01"
    with monoflake.Generator(two_nodes, 1, state_dir=state_dir):
        with pytest.raises(monoflake.NodeUnavailable) as e:
            monoflake.Generator(two_nodes, 1, state_dir=state_dir)
        assert (e.value.kind, e.value.node) == ("NodeHeld", 1)
        with monoflake.Generator(two_nodes, state_dir=state_dir) as other:
            assert other.node == 0
            with pytest.raises(monoflake.NodeUnavailable) as e:
                monoflake.Generator(two_nodes, state_dir=state_dir)
            assert (e.value.kind, e.value.count, e.value.ahead) == ("AllNodesHeld", 2, 0)
            assert (e.value.unusable, e.value.unusable_reasons) == (0, [])


def test_a_state_dir_that_cannot_be_used_is_a_store_error(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with pytest.raises(monoflake.StoreError) as e:
        monoflake.Generator(state_dir=not_a_dir)
    assert e.value.kind == "StateDir" and e.value.path == str(not_a_dir)
    assert isinstance(e.value.__cause__, OSError)


def test_a_state_dir_others_can_write_is_refused(state_dir):
    state_dir.chmod(0o777)
    with pytest.raises(monoflake.StoreError) as e:
        monoflake.Generator(state_dir=state_dir)
    assert e.value.kind == "UntrustedState" and e.value.path == str(state_dir)
    assert "chmod" in e.value.reason or "install" in e.value.reason


def test_a_default_that_could_not_be_built_is_tried_again(state_dir):
    from conftest import PRIVATE_SHAPE, run_json

    result = run_json(
        f"""
import json, os, monoflake
monoflake.configure_default({PRIVATE_SHAPE!r})
dir = {str(state_dir)!r}
os.chmod(dir, 0o777)
try:
    monoflake.next_id()
    first = "issued"
except monoflake.StoreError as e:
    first = e.kind
os.chmod(dir, 0o700)
print(json.dumps([first, monoflake.decode(monoflake.next_id()).node]))
""",
        state_dir,
    )
    assert result == ["UntrustedState", 0]


def test_closed_generator_raises_lease_lost(state_dir):
    g = monoflake.Generator(state_dir=state_dir)
    node = g.node
    g.close()
    g.close()  # twice is fine
    for call in (g.next_id, g.try_next_id, g.check, g.stats, lambda: g.next_ids(3)):
        with pytest.raises(monoflake.LeaseLost) as e:
            call()
        assert (e.value.node, e.value.reason) == (node, "closed")
    # The node was given up.
    with monoflake.Generator(node=node, state_dir=state_dir) as again:
        assert again.node == node


def test_default_already_built(state_dir):
    from conftest import run_json

    result = run_json(
        """
import json, monoflake
monoflake.next_id()
try:
    monoflake.configure_default("discord")
except monoflake.Error as e:
    print(json.dumps([type(e).__name__, e.kind]))
""",
        state_dir,
    )
    assert result == ["Error", "DefaultAlreadyBuilt"]


def test_the_etcd_backend(state_dir):
    """Against $MONOFLAKE_TEST_ETCD when set (CI starts one on loopback) and the extension was
    built with the `etcd` feature; without the feature, backend="etcd" says how to get it."""
    import os
    import uuid

    endpoint = os.environ.get("MONOFLAKE_TEST_ETCD", "http://127.0.0.1:9")
    prefix = f"/monoflake-pytest-{uuid.uuid4().hex}"
    try:
        a = monoflake.Generator(
            backend="etcd", etcd_endpoints=endpoint, etcd_prefix=prefix, lease_ttl=2
        )
    except monoflake.InvalidConfig as e:
        assert (e.setting, e.value) == ("backend", "etcd")
        assert "--features etcd" in str(e)
        return
    except monoflake.StoreError as e:
        if "MONOFLAKE_TEST_ETCD" in os.environ:
            raise
        assert e.kind == "Store"
        pytest.skip("no etcd to test with: set MONOFLAKE_TEST_ETCD")
    with a, monoflake.Generator(
        backend="etcd", etcd_endpoints=[endpoint], etcd_prefix=prefix, node=5
    ) as b:
        assert a.leased and a.node == 0 and b.node == 5
        assert set(a.next_ids(5000)).isdisjoint(b.next_ids(5000))
        with pytest.raises(monoflake.NodeUnavailable) as e:
            monoflake.Generator(backend="etcd", etcd_endpoints=endpoint, etcd_prefix=prefix, node=5)
        assert (e.value.kind, e.value.node) == ("NodeHeld", 5)
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(backend="etcd", etcd_endpoints=endpoint, lease_ttl=0.5)
    assert e.value.setting == "lease_ttl"


PRESET_NAMES = "twitter, discord, sonyflake, baidu, js-safe, game-server"


def test_error_texts_name_the_argument_its_value_and_the_real_limit(state_dir):
    """The texts, exactly: what was given, under its name, and what is allowed."""
    for bad, shown in ((5, "5 (int)"), (1.5, "1.5 (float)"), (b"twitter", "b'twitter' (bytes)")):
        for call in (
            lambda: monoflake.Generator(layout=bad, state_dir=state_dir),
            lambda: monoflake.Generator.unleased(bad, 1),
            lambda: monoflake.configure_default(bad),
            lambda: monoflake.decode(1, bad),
            lambda: monoflake.Opaque("00" * 16, bad),
        ):
            with pytest.raises(TypeError) as e:
                call()
            assert str(e.value) == (
                f"layout={shown} is not a layout: give a Layout, a preset name "
                f'({PRESET_NAMES}) or a spec such as "time=41,worker=10,sequence=12,'
                'epoch=2024-01-01"'
            )
    with monoflake.Generator(state_dir=state_dir) as g:
        # Twitter's layout with the default 100 ms lead: 101 ticks of 4096 IDs.
        for call in (g.next_ids, g.try_next_ids, g.next_ids_array):
            with pytest.raises(monoflake.OutOfRange) as e:
                call(-1)
            assert str(e.value) == (
                "n -1 is out of range: a batch holds 0..=413696 IDs, what fits within max_lead"
            )
            assert (e.value.field, e.value.value, e.value.max) == ("n", -1, 413_696)
            with pytest.raises(monoflake.BatchTooLarge) as e:
                call(413_697)
            assert str(e.value) == (
                "n 413697 is too large: a batch holds 0..=413696 IDs, what fits within "
                "max_lead; ask for fewer at a time"
            )
    # The limit is the generator's own: another lead, another layout.
    g = monoflake.Generator.unleased("discord", 1, max_lead=0.01)
    with pytest.raises(monoflake.OutOfRange) as e:
        g.next_ids(-5)
    assert str(e.value) == (
        "n -5 is out of range: a batch holds 0..=45056 IDs, what fits within max_lead"
    )
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(etcd_prefix="x", state_dir=state_dir)
    assert str(e.value) == "etcd_prefix='x' is a setting of backend='etcd' only, not of backend='file'"
    assert (e.value.setting, e.value.value, e.value.allowed) == (
        "etcd_prefix",
        "x",
        "only with backend='etcd'",
    )
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(lease_ttl=5, state_dir=state_dir)
    assert str(e.value) == (
        "lease_ttl=5 is a setting of backend='etcd' or 'postgres' only, not of backend='file'"
    )
    # A secret is never repeated back.
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(pg_url="postgres://u:hunter2@db/app", state_dir=state_dir)
    assert str(e.value) == (
        "pg_url=<hidden> is a setting of backend='postgres' only, not of backend='file'"
    )
    assert "hunter2" not in repr(e.value.args) and e.value.value == "<hidden>"


def test_the_default_names_its_own_limit_before_anything_is_claimed(state_dir):
    from conftest import run_json

    out = run_json(
        """
import json, os, monoflake
monoflake.configure_default("discord", max_lead=0.01)
try:
    monoflake.next_ids(-1)
except monoflake.OutOfRange as e:
    said = str(e)
print(json.dumps([said, os.listdir(os.environ["MONOFLAKE_STATE_DIR"])]))
""",
        state_dir,
    )
    assert out == [
        "n -1 is out of range: a batch holds 0..=45056 IDs, what fits within max_lead",
        [],
    ]
