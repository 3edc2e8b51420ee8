"""Python and the `monoflake` CLI agree: the same parts for the same IDs, and leases shared on
one state directory never give the two the same ID."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest

import monoflake

LAYOUTS = [
    "twitter",
    "discord",
    "sonyflake",
    "js-safe",
    "game-server",
    "time=40,region=3,host=9,sequence=11,epoch=2024-01-01T00:00:00Z,tick=2ms",
]
# Two node IDs: a Python process and the CLI can hold all of them between them.
TWO_NODES = "time=41,worker=1,sequence=12,epoch=2024-01-01"


def run(cli, *args: str, input: str | None = None, check: bool = True):
    done = subprocess.run(
        [str(cli), *args], input=input, capture_output=True, text=True, timeout=120
    )
    if check and done.returncode != 0:
        pytest.fail(f"monoflake {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done


def cli_decode(cli, layout: str, ids: list[int], *extra: str) -> list[dict]:
    out = run(cli, "decode", "--json", "--layout", layout, *extra, input="\n".join(map(str, ids)))
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_decode_matches_the_cli_for_the_same_ids(cli, state_dir, layout):
    with monoflake.Generator(layout, state_dir=state_dir) as g:
        ids = g.next_ids(200) + [g.next_id() for _ in range(50)]
    lay = monoflake.Layout(layout)
    # Also IDs composed at the edges of every field.
    ids += [
        lay.compose(0, 0, 0),
        lay.compose(lay.max_tick, lay.max_node, lay.max_sequence),
        lay.compose(12345, lay.max_node // 3, lay.max_sequence // 2),
    ]
    expected = cli_decode(cli, layout, ids)
    assert len(expected) == len(ids)
    for id, cli_parts in zip(ids, expected):
        ours = monoflake.decode(id, layout).as_dict()
        assert ours == {**cli_parts, "id": int(cli_parts["id"])}


def test_cli_ids_decode_the_same_in_python(cli, state_dir):
    out = run(cli, "gen", "-n", "500", "--layout", "discord", "--state-dir", str(state_dir))
    ids = [int(line) for line in out.stdout.split()]
    for id, cli_parts in zip(ids, cli_decode(cli, "discord", ids)):
        assert monoflake.decode(id, "discord").as_dict() == {**cli_parts, "id": id}


@pytest.mark.parametrize("encoding", ["hex", "base32", "base62"])
def test_encodings_read_by_the_cli(cli, state_dir, encoding):
    with monoflake.Generator(state_dir=state_dir) as g:
        ids = g.next_ids(100)
    texts = [monoflake.encode(i, encoding) for i in ids]
    decoded = cli_decode(cli, "twitter", texts, "--format", encoding)  # type: ignore[arg-type]
    assert [int(d["id"]) for d in decoded] == ids
    out = run(cli, "gen", "-n", "50", "--format", encoding, "--state-dir", str(state_dir))
    assert all(monoflake.parse(t, encoding) > 0 for t in out.stdout.split())


def test_opaque_ids_with_a_key_file_from_the_cli(cli, state_dir, tmp_path):
    key = tmp_path / "key"
    run(cli, "keygen", "-o", str(key))
    out = run(
        cli, "gen", "-n", "100", "--format", "opaque", "--key-file", str(key),
        "--state-dir", str(state_dir),
    )
    hidden = [int(line) for line in out.stdout.split()]
    opaque = monoflake.Opaque.from_key_file(key)
    revealed = cli_decode(cli, "twitter", hidden, "--key-file", str(key))
    assert [opaque.decrypt(h) for h in hidden] == [int(r["id"]) for r in revealed]
    assert [opaque.encrypt(int(r["id"])) for r in revealed] == hidden


def test_python_and_the_cli_issuing_at_once_share_no_id(cli, state_dir):
    with monoflake.Generator(state_dir=state_dir) as g:
        ours: list[int] = []
        stop = threading.Event()

        def issue() -> None:
            while not stop.is_set():
                ours.extend(g.next_ids(1000))

        t = threading.Thread(target=issue)
        t.start()
        try:
            out = run(cli, "gen", "-n", "300000", "--threads", "2", "--state-dir", str(state_dir))
        finally:
            stop.set()
            t.join()
        theirs = [int(line) for line in out.stdout.split()]
        cli_nodes = {monoflake.decode(i).node for i in theirs}
        assert cli_nodes and g.node not in cli_nodes
    assert len(theirs) == 300_000 and ours
    assert set(ours).isdisjoint(theirs)
    assert len(set(ours)) == len(ours)


def test_a_node_handed_between_python_and_the_cli_never_reissues(cli, state_dir):
    dir = str(state_dir)
    with monoflake.Generator(TWO_NODES, 0, state_dir=dir) as a, monoflake.Generator(
        TWO_NODES, 1, state_dir=dir
    ):
        python_first = a.next_ids(20_000)
        # Python holds both nodes: the CLI finds none free.
        refused = run(cli, "gen", "--layout", TWO_NODES, "--state-dir", dir, check=False)
        assert refused.returncode == 1 and "node" in refused.stderr
    # Python released node 0: the CLI takes it and starts after everything Python issued.
    out = run(cli, "gen", "-n", "20000", "--layout", TWO_NODES, "--node", "0", "--state-dir", dir)
    cli_ids = [int(line) for line in out.stdout.split()]
    assert min(cli_ids) > max(python_first)
    # And back: Python takes node 0 again and starts after the CLI's IDs.
    with monoflake.Generator(TWO_NODES, 0, state_dir=dir) as again:
        python_second = again.next_ids(20_000)
    assert min(python_second) > max(cli_ids)
    assert {monoflake.decode(i, TWO_NODES).node for i in python_first + cli_ids} == {0}
