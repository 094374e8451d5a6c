"""What an API call needs besides credentials: the rate limiter, the TLS context, the
request target, and the reading of a reply (status -> our errors, body -> JSON).

Kept apart from ``scheduler.kube.client`` (which owns the official client's configuration
loaders and aiohttp) so that a process that only writes, the event writer of
``scheduler.kube.eventsink``, can make calls without importing ``kubernetes`` (about 30 MiB
of generated modules). Imports: the standard library, orjson and our errors only.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from scheduler.kube.errors import ApiError, error_for_status

__all__ = [
    "PriorityTokenBucket",
    "TokenBucket",
    "detail",
    "ignore_reply",
    "read_reply",
    "target",
    "tls_context",
    "token_bucket",
    "unreachable_message",
]


class TokenBucket:
    """client-go's token bucket rate limiter: ``qps`` tokens a second, ``burst`` at most.
    ``delay()`` takes a token and says how long to wait for it. O(1)."""

    def __init__(self, qps: float, burst: int) -> None:
        self.rate = qps
        self.capacity = float(max(burst, 1))
        self.tokens = self.capacity
        self.stamp = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def delay(self) -> float:
        self._refill()
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def give_back(self) -> None:
        """Return the token of a call that was cancelled before it was sent."""
        self.tokens = min(self.capacity, self.tokens + 1.0)

    async def take(self, priority: int | None = None) -> None:
        """Take a token, waiting for it if need be (a call cancelled meanwhile gives it
        back). Waiting calls go in the order they came, whatever their ``priority``."""
        wait = self.delay()
        if wait > 0:
            try:
                await asyncio.sleep(wait)
            except asyncio.CancelledError:
                self.give_back()
                raise


# The rank of a call about no pod (a listing, a watch) under "Priority": before any pod's
# (pod priorities are 32-bit integers).
_NO_POD_RANK = -(2**40)


class PriorityTokenBucket(TokenBucket):
    """The same budget as ``TokenBucket`` (``qps`` tokens a second, ``burst`` at most), with
    another order for the calls that wait. client-go's limiter, like ``TokenBucket``, gives
    each waiting call the next free slot as it asks, so calls leave in the order they came;
    here a call that cannot go at once queues, and each token, when it comes, goes to the
    queued call about the pod of the highest priority (the earliest of equals; a call about
    no pod before any pod's). ``apiCallOrder: Priority``: a high-priority pod's Binding does
    not wait behind the Bindings of a burst of lower pods assumed before it. O(log n) per
    queued call; a cancelled call leaves the queue without a token."""

    def __init__(self, qps: float, burst: int) -> None:
        super().__init__(qps, burst)
        self._queue: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    def _drop_cancelled(self) -> None:
        while self._queue and self._queue[0][2].done():
            heapq.heappop(self._queue)

    async def take(self, priority: int | None = None) -> None:
        self._refill()
        self._drop_cancelled()
        if not self._queue and self.tokens >= 1.0:
            self.tokens -= 1.0
            return
        loop = asyncio.get_running_loop()
        granted: asyncio.Future[None] = loop.create_future()
        rank = _NO_POD_RANK if priority is None else -priority
        heapq.heappush(self._queue, (rank, next(self._seq), granted))
        self._arm(loop)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.give_back()  # granted, then cancelled before it could send
            raise

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake up when the next token is due, if something waits and no wake-up is set."""
        if self._timer is None and self._queue:
            wait = max(0.0, (1.0 - self.tokens) / self.rate)
            self._timer = loop.call_later(wait, self._grant, loop)

    def _grant(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._refill()
        while self._queue and self.tokens >= 1.0 - 1e-9:
            _, _, granted = heapq.heappop(self._queue)
            if granted.done():
                continue  # cancelled while it waited: no token taken
            self.tokens -= 1.0
            granted.set_result(None)
        self._drop_cancelled()
        self._arm(loop)

    @property
    def waiting(self) -> int:
        """Calls queued for a token (cancelled ones included until they are passed)."""
        return len(self._queue)


def token_bucket(qps: float, burst: int, *, by_priority: bool = False) -> TokenBucket:
    """The limiter of a client: its waiting calls by pod priority, or as they came."""
    return PriorityTokenBucket(qps, burst) if by_priority else TokenBucket(qps, burst)


def tls_context(
    *,
    ca_file: str | None,
    ca_data: str | bytes | None,
    cert_file: str | None,
    key_file: str | None,
    verify: bool,
) -> ssl.SSLContext:
    """The TLS settings of a client configuration, as ``kubernetes.aio``'s REST client
    reads them (its ``ssl_ca_cert``, ``ca_cert_data``: PEM text or DER bytes,
    ``cert_file``, ``key_file``, ``verify_ssl``)."""
    ctx = ssl.create_default_context(cafile=ca_file, cadata=ca_data)
    if cert_file:
        ctx.load_cert_chain(cert_file, keyfile=key_file)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def target(path: str, query: Mapping[str, Any] | None) -> str:
    """The request target: ``path``, then ``?`` and the encoded query when there is one."""
    return path + "?" + urllib.parse.urlencode(query) if query else path


def ignore_reply(data: bytes) -> dict[str, Any]:
    """``loads`` for a call whose reply nobody reads (an Event created, a Binding's Status, a
    victim deleted, a status patched): a success's body is not decoded. Errors still are
    (``detail``)."""
    return {}


def detail(data: bytes) -> str:
    """The ``message`` of an error reply (a Status), else its text."""
    text = data.decode(errors="replace")
    with contextlib.suppress(ValueError, AttributeError):
        return str(orjson.loads(data).get("message", text))
    return text


def read_reply(
    method: str, path: str, status: int, data: bytes, loads: Callable[[bytes], Any]
) -> dict[str, Any]:
    """A reply: an error status raised as our error (NotFound, Conflict, ...), else the body
    decoded by ``loads`` (``{}`` when empty; a list is wrapped as ``items``)."""
    if status >= 300:
        raise error_for_status(status, f"{method} {path}: {status}: {detail(data)}")
    if not data:
        return {}
    try:
        out = loads(data)
    except ValueError as e:
        raise ApiError(f"{method} {path}: response is not JSON") from e
    return out if isinstance(out, dict) else {"items": out}


def unreachable_message(host: str, method: str, path: str, err: object) -> str:
    text = str(getattr(err, "reason", None) or err) or type(err).__name__
    if "Errno" in text:  # "... [Errno 111] Connect call failed ..." -> the tail
        text = text.split("]", 1)[-1].strip().rstrip("'\")")
    return f"cannot reach the API server at {host} ({method} {path}): {text}"
