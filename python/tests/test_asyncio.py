"""asyncio: a batch that may wait goes through `asyncio.to_thread` (docs/python.md), and the
event loop runs other tasks meanwhile. Every check is an ordering, none a duration."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import monoflake

# Two IDs an hour, no lead: once this hour's two are issued, a call waits for the next hour.
HOURLY = monoflake.Layout.custom(
    time_bits=30,
    sequence_bits=1,
    node_fields=[("worker", 4)],
    epoch_ms=1_700_000_000_000,
    tick_ms=3_600_000,
)


def hourly_generator() -> monoflake.Generator:
    g = monoflake.Generator.unleased(HOURLY, 1, max_lead=0, max_wait=7200)
    while True:
        try:
            g.try_next_id()
        except monoflake.WouldBlock:
            return g


def test_a_batch_waiting_in_to_thread_leaves_the_loop_running() -> None:
    """The batch cannot finish before the next hour; the loop, meanwhile, runs a task that
    counts and then closes the generator, which is what ends the batch (`LeaseLost`). Had the
    batch blocked the loop, nothing could have closed it."""

    async def main() -> tuple[int, str]:
        g = hourly_generator()
        batch = asyncio.ensure_future(asyncio.to_thread(g.next_ids, 2))
        progress = 0
        for _ in range(100):
            progress += 1
            await asyncio.sleep(0)
        assert not batch.done()
        g.close()
        try:
            await batch
            return progress, "issued"
        except monoflake.LeaseLost as e:
            return progress, e.reason

    assert asyncio.run(main()) == (100, "closed")


@pytest.mark.parametrize("threaded", [False, True])
def test_large_batches_at_the_cap_through_to_thread(threaded: bool, state_dir: Path) -> None:
    """Three batches of 300,000 in a row, which wait at the layout's cap (4,096 IDs
    a millisecond): awaited through `to_thread`, a task that counts runs between the
    request and the answer; called directly, it cannot (the control)."""

    async def main() -> tuple[list[int], list[int]]:
        progress = 0
        stop = False

        async def count() -> None:
            nonlocal progress
            while not stop:
                progress += 1
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(count())
        await asyncio.sleep(0)
        ids: list[int] = []
        during: list[int] = []
        with monoflake.Generator(state_dir=state_dir) as g:
            for _ in range(3):
                before = progress
                if threaded:
                    ids += await asyncio.to_thread(g.next_ids, 300_000)
                else:
                    ids += g.next_ids(300_000)
                during.append(progress - before)
        stop = True
        await counter
        return ids, during

    ids, during = asyncio.run(main())
    assert len(ids) == len(set(ids)) == 3 * 300_000 and ids == sorted(ids)
    if threaded:
        assert all(n > 0 for n in during), during
    else:
        assert during == [0, 0, 0]
