"""The main client's rate limiters: ``TokenBucket`` (client-go's: waiting calls leave in the
order they came) and ``PriorityTokenBucket`` (``apiCallOrder: Priority``: each token goes to
the waiting call about the pod of the highest priority). Orders and token accounting only;
no assertion on how fast anything runs."""

from __future__ import annotations

import asyncio

import pytest

from scheduler.kube.transport import PriorityTokenBucket, TokenBucket, token_bucket


async def _grant_order(bucket: TokenBucket, priorities: list[int | None]) -> list[int]:
    """Spend the bucket's one token, queue a call per priority (in this order, all in one
    turn of the loop, before any token comes back) and return their indexes as granted."""
    await bucket.take()
    granted: list[int] = []

    async def call(i: int, priority: int | None) -> None:
        await bucket.take(priority)
        granted.append(i)

    await asyncio.gather(*(call(i, p) for i, p in enumerate(priorities)))
    return granted


def test_waiting_calls_go_by_priority_then_arrival_and_calls_about_no_pod_first() -> None:
    bucket = PriorityTokenBucket(qps=500, burst=1)
    order = asyncio.run(_grant_order(bucket, [0, 0, 10, None, 1000, 10, 0]))
    # the call about no pod (a listing) first, then 1000, then the two 10s and the three 0s
    # each in the order they came
    assert order == [3, 4, 2, 5, 0, 1, 6]


def test_client_go_s_bucket_gives_each_waiting_call_the_next_slot_whatever_its_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each call reserves the next free slot as it asks (client-go's reservation) and then
    sleeps until it: the slots, recorded rather than slept, follow the calls' order."""
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def record(delay: float) -> None:
        slept.append(delay)
        await real_sleep(0)

    async def go() -> None:
        bucket = TokenBucket(qps=0.001, burst=1)  # no refill worth counting meanwhile
        await bucket.take()
        monkeypatch.setattr(asyncio, "sleep", record)
        for priority in (0, 0, 10, None, 1000, 10, 0):
            await bucket.take(priority)

    asyncio.run(go())
    # 1000 s a token: the n-th waiting call sleeps n * 1000 s (less what refilled meanwhile)
    assert [round(s / 1000) for s in slept] == [1, 2, 3, 4, 5, 6, 7]


def test_the_factory_picks_the_order() -> None:
    assert type(token_bucket(50, 100)) is TokenBucket
    assert type(token_bucket(50, 100, by_priority=True)) is PriorityTokenBucket


def test_the_budget_is_client_go_s_a_burst_then_qps() -> None:
    async def go() -> float:
        bucket = PriorityTokenBucket(qps=1000, burst=3)
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.gather(*(bucket.take(i % 3) for i in range(13)))
        return loop.time() - start

    # 3 at once, then 10 more at 1000 a second: not sooner than 10 ms (a limit, not a speed)
    assert asyncio.run(go()) >= 0.0099


def test_a_call_cancelled_while_it_waits_takes_no_token() -> None:
    async def go() -> None:
        bucket = PriorityTokenBucket(qps=200, burst=1)
        await bucket.take()
        first = asyncio.ensure_future(bucket.take(5))
        second = asyncio.ensure_future(bucket.take(1))
        await asyncio.sleep(0)
        assert bucket.waiting == 2
        first.cancel()
        await second  # the token the cancelled call would have had goes to the next one
        assert first.cancelled()
        # one token spent at once and one by the second call: the bucket owes nothing more
        bucket._refill()
        assert bucket.tokens > -0.5
        assert bucket.waiting == 0

    asyncio.run(go())


def test_a_call_cancelled_after_its_token_was_granted_gives_it_back() -> None:
    async def go() -> None:
        bucket = PriorityTokenBucket(qps=0.001, burst=1)  # no refill worth counting
        await bucket.take()
        waiter = asyncio.ensure_future(bucket.take(3))
        await asyncio.sleep(0)
        assert bucket.waiting == 1
        # the token comes (as the timer would grant it), then the call is cancelled before
        # it could run on
        bucket.tokens = 1.0
        bucket._grant(asyncio.get_running_loop())
        assert bucket.tokens == pytest.approx(0.0, abs=0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert bucket.tokens == pytest.approx(1.0, abs=0.01)

    asyncio.run(go())
