"""Values that were accepted, then wrong (issue 36, item 5): refused where they are given."""

from __future__ import annotations

import pytest

import monoflake


def test_node_fields_of_refuses_a_node_too_wide_as_check_node_does():
    layout = monoflake.Layout()
    assert layout.node_fields_of(1023) == {"datacenter": 31, "worker": 31}
    for call in (layout.node_fields_of, layout.check_node):
        with pytest.raises(monoflake.OutOfRange) as e:
            call(1024)
        assert (e.value.field, e.value.value, e.value.max) == ("node", 1024, 1023)


@pytest.mark.parametrize("bits", [12, 13, 2**32 - 1])
def test_start_offset_bits_beyond_the_sequence_are_refused(bits, state_dir):
    for make in (
        lambda: monoflake.Generator.unleased("twitter", 1, start_offset_bits=bits),
        lambda: monoflake.Generator(state_dir=state_dir, start_offset_bits=bits),
    ):
        with pytest.raises(monoflake.InvalidConfig) as e:
            make()
        assert e.value.setting == "start_offset_bits" and e.value.value == str(bits)
        assert "0..=11" in e.value.allowed


def test_start_offset_bits_within_the_sequence_are_taken():
    g = monoflake.Generator.unleased("twitter", 1, start_offset_bits=11)
    assert g.next_id() > 0


def test_lease_ttl_with_the_file_backend_is_refused_as_etcd_ca_is(state_dir):
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(state_dir=state_dir, lease_ttl=0.5)
    assert e.value.setting == "lease_ttl" and "etcd" in e.value.allowed


def test_exceptions_made_by_hand_have_the_attributes_the_stubs_declare():
    assert monoflake.Error("x").kind == "Error"
    t = monoflake.TimedOut("x")
    assert (t.kind, t.waited, t.retry_after) == ("TimedOut", 0.0, 0.0)
    assert monoflake.BatchTooLarge("x").limit == 0
    assert monoflake.InvalidConfig("x").setting == ""


def test_a_tick_too_long_for_the_arithmetic_is_refused_at_build():
    with pytest.raises(monoflake.InvalidLayout) as e:
        monoflake.Layout.custom(
            time_bits=41,
            sequence_bits=12,
            node_fields=[("worker", 10)],
            epoch_ms=1_700_000_000_000,
            tick_ms=2**64 - 1,
        )
    assert e.value.kind == "TickTooLong"


def test_times_past_the_year_9999_raise_out_of_range():
    # 2^41 seconds run far past the year 9999.
    layout = monoflake.Layout.custom(
        time_bits=41,
        sequence_bits=12,
        node_fields=[("worker", 10)],
        epoch_ms=1_700_000_000_000,
        tick_ms=1000,
    )
    with pytest.raises(monoflake.OutOfRange) as e:
        layout.expires_at
    assert (e.value.field, e.value.value) == ("unix_ms", layout.expires_at_ms)
    late = layout.compose(2**41 - 1, 1, 0)
    parts = monoflake.decode(late, layout)
    with pytest.raises(monoflake.OutOfRange):
        parts.time
    assert parts.unix_ms == layout.unix_ms_of_tick(2**41 - 1)


# Ints out of any range: negative, just past 64 bits, far past it.
OUT = [-1, -(2**70), 2**64, 2**100]


@pytest.mark.parametrize("value", OUT)
def test_an_int_out_of_range_is_out_of_range_whatever_its_size(value, state_dir):
    twitter = monoflake.Layout()
    calls = {
        # (field, max): the call
        ("node", 1023): [
            lambda: monoflake.Generator.unleased("twitter", value),
            lambda: monoflake.Generator(node=value, state_dir=state_dir),
            lambda: monoflake.configure_default(node=value),
            lambda: twitter.node_fields_of(value),
            lambda: twitter.check_node(value),
            lambda: twitter.compose(0, value, 0),
            lambda: twitter.compose_at(twitter.epoch_ms, value, 0),
        ],
        ("time", twitter.max_tick): [
            lambda: twitter.compose(value, 0, 0),
            lambda: twitter.unix_ms_of_tick(value),
        ],
        ("sequence", 4095): [
            lambda: twitter.compose(0, 0, value),
            lambda: twitter.compose_at(twitter.epoch_ms, 0, value),
        ],
        ("worker", 31): [lambda: twitter.node_from_fields(worker=value)],
        ("unix_ms", 2**64 - 1): [
            lambda: twitter.tick_at(value),
            lambda: twitter.compose_at(value, 0, 0),
        ],
        ("time_bits", 64): [lambda: custom(time_bits=value)],
        ("sequence_bits", 64): [lambda: custom(sequence_bits=value)],
        ("worker", 64): [lambda: custom(node_fields=[("worker", value)])],
        ("epoch_ms", 2**64 - 1): [lambda: custom(epoch_ms=value)],
        ("tick_ms", 2**64 - 1): [lambda: custom(tick_ms=value)],
    }
    for (field, most), makes in calls.items():
        for make in makes:
            with pytest.raises(monoflake.OutOfRange) as e:
                make()
            assert (e.value.kind, e.value.field, e.value.value, e.value.max) == (
                "OutOfRange",
                field,
                value,
                most,
            )
            assert str(value) in str(e.value)


def custom(**parts):
    """A layout of 41 + 10 + 12 bits, with `parts` changed."""
    return monoflake.Layout.custom(
        **{
            "time_bits": 41,
            "sequence_bits": 12,
            "node_fields": [("worker", 10)],
            "epoch_ms": 1_700_000_000_000,
            **parts,
        }
    )


def test_ints_in_range_at_the_edges_are_taken():
    twitter = monoflake.Layout()
    assert twitter.compose(twitter.max_tick, 1023, 4095) == 2**63 - 1
    assert twitter.unix_ms_of_tick(twitter.max_tick) == twitter.epoch_ms + twitter.max_tick
    assert twitter.tick_at(2**64 - 1) == (2**64 - 1 - twitter.epoch_ms)
    assert twitter.node_from_fields(datacenter=31, worker=31) == 1023
    assert custom(tick_ms=1000).tick_ms == 1000
    # A width that fits 64 bits but not the layout is the layout's error, as before.
    with pytest.raises(monoflake.InvalidLayout):
        custom(time_bits=64)


@pytest.mark.parametrize("value", [-1, 2**32, 2**64, 2**100])
def test_start_offset_bits_of_any_size_is_invalid_config(value, state_dir):
    for make in (
        lambda: monoflake.Generator.unleased("twitter", 1, start_offset_bits=value),
        lambda: monoflake.Generator(state_dir=state_dir, start_offset_bits=value),
    ):
        with pytest.raises(monoflake.InvalidConfig) as e:
            make()
        assert (e.value.setting, e.value.value) == ("start_offset_bits", str(value))


@pytest.mark.parametrize("value", [2**64 - 1, 2**64, 2**100])
def test_a_count_beyond_64_bits_is_batch_too_large_with_the_count_given(value):
    g = monoflake.Generator.unleased("twitter", 1)
    for call in (g.next_ids, g.try_next_ids, g.next_ids_array):
        with pytest.raises(monoflake.BatchTooLarge) as e:
            call(value)
        assert (e.value.requested, e.value.limit) == (value, 413_696)
        assert str(e.value) == (
            f"n {value} is too large: a batch holds 0..=413696 IDs, what fits within "
            "max_lead; ask for fewer at a time"
        )
    for value in (-1, -(2**70)):
        with pytest.raises(monoflake.OutOfRange) as e:
            g.next_ids(value)
        # The real limit, the generator's largest batch; not the 64 bits a count could hold.
        assert (e.value.field, e.value.value, e.value.max) == ("n", value, 413_696)


class Index:
    """What `operator.index` takes, as a numpy integer is."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __index__(self) -> int:
        return self.n


def test_what_operator_index_takes_counts_as_an_int(state_dir):
    twitter = monoflake.Layout()
    assert twitter.check_node(Index(5)) == 5
    assert twitter.compose(Index(1), Index(2), Index(3)) == twitter.compose(1, 2, 3)
    g = monoflake.Generator.unleased("twitter", Index(5), start_offset_bits=Index(3))
    assert g.node == 5 and len(g.next_ids(Index(3))) == 3
    with monoflake.Generator(node=Index(7), state_dir=state_dir) as leased:
        assert leased.node == 7
    # Out of range, the value reported is the int it stands for.
    with pytest.raises(monoflake.OutOfRange) as e:
        twitter.check_node(Index(2**70))
    assert e.value.value == 2**70 and type(e.value.value) is int
    with pytest.raises(monoflake.BatchTooLarge) as e:
        g.next_ids(Index(2**70))
    assert e.value.requested == 2**70 and type(e.value.requested) is int
    with pytest.raises(monoflake.OutOfRange) as e:
        g.next_ids(Index(-3))
    assert e.value.value == -3
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator.unleased("twitter", 1, start_offset_bits=Index(99))
    assert e.value.value == "99"


def test_what_is_not_an_int_is_a_type_error(state_dir):
    twitter = monoflake.Layout()
    for make in (
        lambda: monoflake.Generator.unleased("twitter", 1.0),
        lambda: monoflake.Generator(node=1.0, state_dir=state_dir),
        lambda: twitter.check_node("1"),
        lambda: twitter.compose(0, 0, 0.0),
        lambda: monoflake.Generator.unleased("twitter", 1).next_ids(1.0),
        lambda: monoflake.Generator.unleased("twitter", 1, start_offset_bits=1.0),
    ):
        with pytest.raises(TypeError):
            make()


def test_a_named_layout_keeps_its_name_in_repr_and_equals_its_spec():
    odd = custom(name="odd")
    assert odd.name == "odd"
    # Equality is the spec: the name is a label.
    same = monoflake.Layout(odd.spec)
    assert same.name == "custom" and same == odd and hash(same) == hash(odd)
    # repr() is what eval() makes back, the name included.
    assert repr(odd) == f'Layout("{odd.spec}", name="odd")'
    back = eval(repr(odd), {"Layout": monoflake.Layout})
    assert back == odd and back.name == "odd"
    assert repr(same) == f'Layout("{odd.spec}")'
    assert repr(monoflake.Layout("discord")) == 'Layout("discord")'
    # A preset renamed is still the preset's IDs, under another label.
    orders = monoflake.Layout("twitter", name="orders")
    assert orders == monoflake.Layout() and orders.name == "orders"
    assert eval(repr(orders), {"Layout": monoflake.Layout}).name == "orders"
    # A spec shaped like a preset gets the preset's name; one made by parts keeps "custom".
    shaped = monoflake.Layout.custom(
        time_bits=41,
        sequence_bits=12,
        node_fields=[("datacenter", 5), ("worker", 5)],
        epoch_ms=monoflake.Layout().epoch_ms,
    )
    assert shaped == monoflake.Layout() and shaped.name == "custom"
    assert eval(repr(shaped), {"Layout": monoflake.Layout}).name == "custom"
    # Layouts that differ in what they do to IDs differ.
    assert custom(epoch_ms=1_700_000_000_001) != custom()
    assert custom(node_fields=[("shard", 10)]) != custom()


def test_the_default_is_rebuilt_past_the_librarys_64_generations(state_dir):
    """A chain of forks, each process arming its generation: the Python default is Python's
    own (not the library's, whose per-generation table ends 63 forks deep), so 62, 63 and 64
    forks deep each process still builds one, on a node of its own."""
    from conftest import run_json

    out = run_json(
        r"""
import json, os
import monoflake
r, w = os.pipe()
depth = 0
while True:
    monoflake.Generator.unleased("twitter", 1)  # arms this process's generation
    if depth >= 62:
        try:
            said = monoflake.decode(monoflake.next_id()).node
        except monoflake.Error as e:
            said = [type(e).__name__, e.kind, str(e)]
        os.write(w, (json.dumps([depth, said]) + "\n").encode())
        if depth == 64:
            os._exit(0)
    pid = os.fork()
    if pid == 0:
        depth += 1
        continue
    _, status = os.waitpid(pid, 0)
    if depth:
        os._exit(0 if status == 0 else 1)
    break
os.close(w)
lines = os.read(r, 1 << 16).decode().splitlines()
print(json.dumps({"status": status, "lines": [json.loads(l) for l in lines]}))
""",
        state_dir,
    )
    assert out["status"] == 0
    depths = [d for d, _ in out["lines"]]
    nodes = [n for _, n in out["lines"]]
    assert depths == [62, 63, 64]
    # Each an int (a node), and the three are alive at once (each waits for its child).
    assert all(isinstance(n, int) for n in nodes), nodes
    assert len(set(nodes)) == 3
