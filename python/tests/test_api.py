"""The API: layouts, decoding, encodings, opaque IDs, generators and their lifecycle."""

from __future__ import annotations

import ast
import importlib.metadata
import datetime
import pickle
import threading
from pathlib import Path

import pytest

import monoflake

STUB = Path(__file__).resolve().parents[1] / "python" / "monoflake" / "__init__.pyi"
UTC = datetime.timezone.utc


def test_discord_documented_example_decodes_exactly():
    # Discord's developer documentation: 175928847299117063 is 2016-04-30 11:18:25.796 UTC,
    # internal worker 1, process 0, increment 7.
    parts = monoflake.decode(175928847299117063, "discord")
    assert parts.unix_ms == 1462015105796
    assert parts.time == datetime.datetime(2016, 4, 30, 11, 18, 25, 796000, tzinfo=UTC)
    assert parts.time.tzinfo is not None
    assert parts.rfc3339 == "2016-04-30T11:18:25.796Z"
    assert parts.fields == {"worker": 1, "process": 0}
    assert (parts.field("worker"), parts.field("process"), parts.field("nope")) == (1, 0, None)
    assert (parts.node, parts.sequence) == (32, 7)
    assert parts.layout == monoflake.Layout("discord")
    assert str(parts) == "175928847299117063 2016-04-30T11:18:25.796Z worker=1 process=0 sequence=7"
    assert parts == monoflake.decode(175928847299117063, monoflake.Layout("discord"))


def test_twitter_is_the_default_layout_and_decodes_its_own_ids():
    layout = monoflake.Layout()
    assert layout == monoflake.Layout("twitter")
    assert (layout.time_bits, layout.node_bits, layout.sequence_bits) == (41, 10, 12)
    assert layout.node_fields == [("datacenter", 5), ("worker", 5)]
    assert layout.epoch_ms == 1288834974657
    node = layout.node_from_fields(datacenter=3, worker=17)
    assert node == 3 << 5 | 17
    assert layout.node_fields_of(node) == {"datacenter": 3, "worker": 17}
    id = layout.compose_at(1_700_000_000_123, node, 9)
    parts = monoflake.decode(id)
    assert (parts.unix_ms, parts.node, parts.sequence) == (1_700_000_000_123, node, 9)
    assert parts.tick == layout.tick_at(1_700_000_000_123)
    assert layout.compose(parts.tick, node, 9) == id
    assert layout.unix_ms_of_tick(parts.tick) == 1_700_000_000_123


def test_layout_presets_specs_and_custom():
    assert set(monoflake.PRESETS) == set(monoflake.Layout.presets())
    assert {"twitter", "discord", "sonyflake", "baidu", "js-safe", "game-server"} <= set(
        monoflake.PRESETS
    )
    for name in monoflake.PRESETS:
        layout = monoflake.Layout(name)
        assert layout.name == name
        assert monoflake.Layout(layout.spec) == layout  # the spec reads back as the preset
        assert repr(layout) == f'Layout("{name}")'
    sony = monoflake.Layout("sonyflake")
    assert sony.node_below_sequence and sony.tick_ms == 10
    custom = monoflake.Layout.custom(
        time_bits=40,
        sequence_bits=11,
        node_fields=[("region", 4), ("host", 8)],
        epoch_ms=1_700_000_000_000,
        name="orders",
    )
    assert (custom.name, custom.total_bits, custom.max_node) == ("orders", 63, (1 << 12) - 1)
    assert custom.expires_at_ms == 1_700_000_000_000 + (1 << 40)
    epoch = datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert custom.expires_at == epoch + datetime.timedelta(milliseconds=1 << 40)
    assert custom.state_name.startswith("custom-")
    assert custom.shape_key == "t40-n12-s11-node-high"
    spec = monoflake.Layout("time=41,worker=10,sequence=12,epoch=2024-01-01")
    assert spec.epoch_ms == 1_704_067_200_000 and spec.max_sequence == 4095


def test_layouts_hash_compare_and_pickle():
    a, b = monoflake.Layout("twitter"), monoflake.Layout("twitter")
    assert a == b and hash(a) == hash(b) and a != monoflake.Layout("discord")
    assert len({a, b, monoflake.Layout("discord")}) == 2
    named = monoflake.Layout.custom(
        time_bits=41, sequence_bits=12, node_fields=[("w", 10)], epoch_ms=1_600_000_000_000,
        name="orders",
    )
    for layout in (a, named, monoflake.Layout("sonyflake")):
        back = pickle.loads(pickle.dumps(layout))
        assert back == layout and back.name == layout.name


def test_encodings_round_trip_and_keep_order():
    ids = sorted([0, 1, 175928847299117063, 2**62 + 12345, 2**64 - 1])
    assert monoflake.encode(175928847299117063) == "04W86BB0G4007"
    assert monoflake.encode(175928847299117063, "hex") == "0271065ac1020007"
    for encoding, width in [("hex", 16), ("base32", 13), ("base62", 11)]:
        texts = [monoflake.encode(i, encoding) for i in ids]
        assert all(len(t) == width for t in texts)
        assert texts == sorted(texts)  # fixed width: text order is ID order
        assert [monoflake.parse(t, encoding) for t in texts] == ids
    assert monoflake.parse("0x0271065AC1020007", "hex") == 175928847299117063
    assert monoflake.parse("175928847299117063") == 175928847299117063
    assert monoflake.encode(42, "decimal") == "42"


def test_opaque_ids_round_trip_and_hide_order(tmp_path):
    key = bytes(range(16))
    opaque = monoflake.Opaque(key)
    assert opaque.bits == 63
    ids = [monoflake.Layout().compose(1000 + i, 1, 0) for i in range(100)]
    hidden = [opaque.encrypt(i) for i in ids]
    assert [opaque.decrypt(h) for h in hidden] == ids
    assert hidden != sorted(hidden) and len(set(hidden)) == 100
    assert all(h < 2**63 for h in hidden)
    # The same key as hex text, and from a key file, is the same permutation.
    assert monoflake.Opaque(key.hex()).encrypt(ids[0]) == hidden[0]
    path = tmp_path / "key"
    path.write_text(key.hex() + "\n")
    assert monoflake.Opaque.from_key_file(path).encrypt(ids[0]) == hidden[0]
    assert monoflake.Opaque(key, "js-safe").bits == 53


def test_generator_issues_increasing_ids_on_its_leased_node(state_dir):
    with monoflake.Generator(state_dir=state_dir) as g:
        assert g.leased and not g.closed
        assert g.layout == monoflake.Layout("twitter")
        ids = [g.next_id(), g.try_next_id(), *g.next_ids(500), *g.try_next_ids(10)]
        ids += list(g.next_ids_array(700))
        assert ids == sorted(set(ids)) and len(ids) == 1212
        assert {monoflake.decode(i).node for i in ids} == {g.node}
        assert g.last_tick == monoflake.decode(ids[-1]).tick
        stats = g.stats()
        assert stats.issued == 1212 and stats.reservation_writes >= 1
        assert stats.as_dict()["issued"] == 1212
        g.check()
        assert g.next_ids(0) == [] and len(g.next_ids_array(0)) == 0
    assert g.closed
    assert "closed" in repr(g)


def test_next_ids_array_is_unsigned_64_bit(state_dir):
    with monoflake.Generator(state_dir=state_dir) as g:
        arr = g.next_ids_array(5)
        assert arr.typecode == "Q" and arr.itemsize == 8
        assert list(arr) == sorted(arr)
        assert all(monoflake.decode(i).node == g.node for i in arr)


def test_two_generators_on_one_state_dir_take_different_nodes(state_dir):
    with monoflake.Generator(state_dir=state_dir) as a, monoflake.Generator(
        state_dir=state_dir
    ) as b:
        assert a.node != b.node
        assert set(a.next_ids(1000)).isdisjoint(b.next_ids(1000))


def test_a_released_node_is_reused_and_starts_after_everything_issued(state_dir):
    with monoflake.Generator(node=3, state_dir=state_dir) as g:
        last = g.next_ids(5000)[-1]
    with monoflake.Generator(node=3, state_dir=state_dir) as again:
        assert again.node == 3
        assert again.next_id() > last


def test_a_generator_dropped_without_close_gives_its_node_up(state_dir):
    g = monoflake.Generator(node=3, state_dir=state_dir)
    last = g.next_ids(5000)[-1]
    del g  # the last reference: the lease is released as by close()
    with monoflake.Generator(node=3, state_dir=state_dir) as again:
        assert again.next_id() > last


def test_node_fields_choose_an_exact_node(state_dir):
    layout = monoflake.Layout("twitter")
    node = layout.node_from_fields(datacenter=2, worker=9)
    with monoflake.Generator(layout, node, state_dir=state_dir) as g:
        assert monoflake.decode(g.next_id()).fields == {"datacenter": 2, "worker": 9}


def test_unleased_generator_uses_the_node_given():
    g = monoflake.Generator.unleased("discord", 7, max_lead=0.01, max_wait=0.5)
    assert not g.leased and g.node == 7 and g.max_wait == 0.5
    assert monoflake.decode(g.next_id(), "discord").node == 7
    g.close()
    with pytest.raises(monoflake.LeaseLost):
        g.next_id()


def test_settings_reach_the_library(state_dir):
    with monoflake.Generator(
        "js-safe",
        state_dir=state_dir,
        max_lead=0.005,
        max_wait=7.5,
        start_offset_bits=2,
        reservation_window=2.0,
        future_reservation_tolerance=60,
    ) as g:
        assert g.layout.name == "js-safe"
        assert g.max_wait >= 7.5  # a leased generator waits at least its window plus a tick
        assert all(i < 2**53 for i in g.next_ids(300))  # 64 per ms, 5 ms of lead


def test_a_generator_is_shared_between_threads(state_dir):
    with monoflake.Generator(state_dir=state_dir) as g:
        results: list[list[int]] = [[] for _ in range(8)]

        def work(out: list[int]) -> None:
            for _ in range(2000):
                out.append(g.next_id())
            out.extend(g.next_ids(3000))

        threads = [threading.Thread(target=work, args=(r,)) for r in results]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    everything = [i for r in results for i in r]
    assert len(set(everything)) == len(everything) == 8 * 5000
    assert all(r == sorted(r) for r in results)


def test_unknown_settings_are_type_errors(state_dir):
    with pytest.raises(TypeError, match="unexpected keyword argument 'state_directory'"):
        monoflake.Generator(state_directory=state_dir)
    with pytest.raises(TypeError):
        monoflake.decode("123")


def test_the_stub_names_what_the_module_has():
    tree = ast.parse(STUB.read_text())
    stub: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            stub[node.name] = {
                n.name if isinstance(n, ast.FunctionDef) else n.target.id  # type: ignore[union-attr]
                for n in node.body
                if isinstance(n, ast.FunctionDef)
                or (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))
            }
        elif isinstance(node, ast.FunctionDef):
            stub[node.name] = set()
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stub[node.target.id] = set()
    public = {n for n in dir(monoflake) if not n.startswith("_") and n != "monoflake"}
    assert public == {n for n in stub if not n.startswith("_")}
    for name, members in stub.items():
        if name.startswith("_") or not members:
            continue
        cls = getattr(monoflake, name)
        if issubclass(cls, Exception):
            continue  # attributes set per instance
        missing = {m for m in members if not m.startswith("__") and not hasattr(cls, m)}
        assert not missing, f"{name} lacks {missing}"
        extra = {m for m in dir(cls) if not m.startswith("_")} - members
        assert not extra, f"{name} has {extra} the stub does not name"


def test_the_package_ships_its_stubs_and_says_it_is_typed():
    package = Path(monoflake.__file__).parent
    assert (package / "py.typed").exists()
    assert (package / "__init__.pyi").read_text() == STUB.read_text()
    assert monoflake.__doc__ and "Snowflake" in monoflake.__doc__
    assert monoflake.__version__ == importlib.metadata.version("monoflake")
