"""Uniqueness over millions of IDs from threads sharing one generator, and the default."""

from __future__ import annotations

import threading

from conftest import run_json

import monoflake

THREADS = 8


def test_threads_sharing_a_generator_never_share_an_id(state_dir):
    per_thread: list[list[int]] = [[] for _ in range(THREADS)]
    with monoflake.Generator(state_dir=state_dir) as g:

        def work(out: list[int]) -> None:
            for _ in range(50):
                out.extend(g.next_id() for _ in range(1000))
                out.extend(g.next_ids(2000))
                out.extend(g.next_ids_array(2000))

        threads = [threading.Thread(target=work, args=(out,)) for out in per_thread]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        issued = g.stats().issued
    total = sum(len(ids) for ids in per_thread)
    assert total == issued == THREADS * 50 * 5000  # 2,000,000
    everything = set()
    for ids in per_thread:
        assert ids == sorted(ids)  # increasing within each thread
        everything.update(ids)
    assert len(everything) == total


def test_threads_on_the_default_never_share_an_id(state_dir):
    result = run_json(
        """
import json, threading, monoflake
out = [[] for _ in range(8)]
def work(ids):
    for _ in range(125_000):
        ids.append(monoflake.next_id())
threads = [threading.Thread(target=work, args=(ids,)) for ids in out]
for t in threads: t.start()
for t in threads: t.join()
everything = [i for ids in out for i in ids]
print(json.dumps({
    "total": len(everything),
    "unique": len(set(everything)),
    "increasing": all(ids == sorted(ids) for ids in out),
}))
""",
        state_dir,
    )
    assert result == {"total": 1_000_000, "unique": 1_000_000, "increasing": True}
