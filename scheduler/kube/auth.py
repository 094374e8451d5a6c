"""Delegated authentication and authorization for the secure port, as kube-scheduler's.

A request is authenticated as upstream's delegating authenticator does it, in its order: a
client certificate that the TLS handshake verified against ``secureServing.clientCAFile``
(kube-scheduler's --client-ca-file) names the user by its subject's common name, in the
groups of its organizations (a certificate without a common name authenticates nobody);
otherwise the bearer token is checked with a TokenReview (authentication.k8s.io/v1).
Every authenticated user is also in ``system:authenticated``. The user is then checked with
a SubjectAccessReview (authorization.k8s.io/v1) for the request's non-resource path and verb
(GET and HEAD are ``get``). A request with neither is ``system:anonymous`` in
``system:unauthenticated``, authorized like any other user (denied unless RBAC grants it),
as upstream's delegating authenticator with anonymous access does. Front-proxy
(requestheader) authentication is not implemented.
/healthz, /livez and /readyz are always allowed (upstream's ``--authorization-always-allow-paths``
default), so that probes need no credentials.

Both answers are cached for 10 seconds (upstream's webhook cache TTLs for tokens and for
allowed and denied decisions), so a scraper costs the API server two reviews per token and
path every 10 seconds at most. The cache is bounded; its keys are SHA-256 digests, never
tokens.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from scheduler.kube.client import KubeClient
from scheduler.kube.errors import ApiError

__all__ = ["ALWAYS_ALLOW_PATHS", "Decision", "DelegatedAuth", "UserInfo"]

log = structlog.get_logger("py-scheduler")

ALWAYS_ALLOW_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
CACHE_TTL = 10.0
CACHE_SIZE = 1024
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """An HTTP status for the request (200 = go on) and the message sent back otherwise."""

    status: int
    message: str = ""


_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch"}


class _TTLCache:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> Any:
        hit = self._items.get(key)
        if hit is None:
            return None
        expires, value = hit
        if expires <= self._clock():
            del self._items[key]
            return None
        return value

    def put(self, key: str, value: Any) -> None:
        self._items[key] = (self._clock() + CACHE_TTL, value)
        self._items.move_to_end(key)
        while len(self._items) > CACHE_SIZE:
            self._items.popitem(last=False)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


class DelegatedAuth:
    def __init__(self, client: KubeClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self._tokens = _TTLCache(clock)
        self._decisions = _TTLCache(clock)

    async def check(
        self,
        method: str,
        path: str,
        authorization: str | None,
        client_cert: tuple[str, tuple[str, ...]] | None = None,
    ) -> Decision:
        """Authenticate then authorize one request. ``client_cert``: the (common name,
        organizations) of a client certificate the TLS handshake verified, if any."""
        if path in ALWAYS_ALLOW_PATHS:
            return Decision(200)
        user: UserInfo | None
        if client_cert is not None and client_cert[0]:
            cn, orgs = client_cert
            groups = orgs if AUTHENTICATED in orgs else (*orgs, AUTHENTICATED)
            user = UserInfo(cn, groups=groups)
        else:
            token = None
            if authorization:
                scheme, _, value = authorization.partition(" ")
                if scheme.lower() != "bearer" or not value.strip():
                    return Decision(401, "Unauthorized")
                token = value.strip()
            if token is None:
                user = UserInfo(ANONYMOUS, groups=(UNAUTHENTICATED,))
            else:
                user = await self.authenticate(token)
        if user is None:
            return Decision(401, "Unauthorized")
        verb = _VERBS.get(method.upper(), method.lower())
        try:
            allowed, reason = await self.authorize(user, verb, path)
        except ApiError as e:
            log.warning("authorization_failed", path=path, user=user.name, error=str(e))
            return Decision(500, "Internal Server Error: authorization is unavailable")
        if allowed:
            return Decision(200)
        message = f'forbidden: User "{user.name}" cannot {verb} path "{path}"'
        return Decision(403, f"{message}: {reason}" if reason else message)

    async def authenticate(self, token: str) -> UserInfo | None:
        key = _digest(token)
        cached = self._tokens.get(key)
        if cached is not None:
            return cached if isinstance(cached, UserInfo) else None
        try:
            review = await self.client.request(
                "POST",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                body={
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenReview",
                    "spec": {"token": token},
                },
            )
        except ApiError as e:
            # Not cached: the next request asks again once the API server answers.
            log.warning("authentication_failed", error=str(e))
            return None
        status = review.get("status") or {}
        user: UserInfo | bool = False
        if status.get("authenticated"):
            info = status.get("user") or {}
            user = UserInfo(
                name=str(info.get("username", "")),
                uid=str(info.get("uid", "")),
                groups=tuple(info.get("groups") or ()),
                extra={k: list(v) for k, v in (info.get("extra") or {}).items()},
            )
        self._tokens.put(key, user)
        return user if isinstance(user, UserInfo) else None

    async def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        key = _digest(
            user.name, user.uid, ",".join(user.groups), repr(sorted(user.extra.items())), verb, path
        )
        cached = self._decisions.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        review = await self.client.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
        )
        status = review.get("status") or {}
        decision = (bool(status.get("allowed")), str(status.get("reason") or ""))
        self._decisions.put(key, decision)
        return decision
