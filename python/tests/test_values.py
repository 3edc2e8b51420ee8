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
