"""Delegated authentication and authorization of the secure port (TokenReview, then
SubjectAccessReview), as kube-scheduler's: always-allowed health paths, anonymous requests
authorized as system:anonymous, 10-second caches, clear statuses when the API server fails."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from scheduler.kube.auth import DelegatedAuth
from scheduler.kube.errors import Unreachable


class Reviews:
    """Answers reviews like an API server: tokens -> users, (user, path) -> allowed."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, Any]] = {
            "good": {"username": "system:serviceaccount:mon:prom", "uid": "u1", "groups": ["g"]}
        }
        self.allowed: set[tuple[str, str, str]] = {
            ("system:serviceaccount:mon:prom", "get", "/metrics")
        }
        self.calls: list[tuple[str, Any]] = []
        self.down = False

    async def request(
        self, method: str, path: str, *, body: Any = None, **_: Any
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        self.calls.append((path.rsplit("/", 1)[-1], body))
        if self.down:
            raise Unreachable(f"cannot reach the API server ({method} {path})")
        spec: Mapping[str, Any] = body["spec"]
        if path.endswith("/tokenreviews"):
            user = self.users.get(spec["token"])
            if user is None:
                return {"status": {"authenticated": False, "error": "invalid bearer token"}}
            return {"status": {"authenticated": True, "user": user}}
        attrs = spec["nonResourceAttributes"]
        ok = (spec["user"], attrs["verb"], attrs["path"]) in self.allowed
        return {"status": {"allowed": ok, "reason": "" if ok else "no RBAC policy matched"}}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _auth() -> tuple[DelegatedAuth, Reviews, Clock]:
    api, clock = Reviews(), Clock()
    return DelegatedAuth(api, clock=clock), api, clock  # type: ignore[arg-type]


def test_health_paths_are_always_allowed_without_any_review() -> None:
    auth, api, _ = _auth()
    for path in ("/healthz", "/livez", "/readyz"):
        assert asyncio.run(auth.check("GET", path, None)).status == 200
        assert asyncio.run(auth.check("GET", path, "Bearer nonsense")).status == 200
    assert api.calls == []


def test_a_token_allowed_get_on_metrics_is_let_through_and_both_answers_are_cached() -> None:
    auth, api, clock = _auth()
    assert asyncio.run(auth.check("GET", "/metrics", "Bearer good")).status == 200
    assert [c[0] for c in api.calls] == ["tokenreviews", "subjectaccessreviews"]
    sar = api.calls[1][1]["spec"]
    assert sar == {
        "user": "system:serviceaccount:mon:prom",
        "uid": "u1",
        "groups": ["g"],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    assert asyncio.run(auth.check("HEAD", "/metrics", "Bearer good")).status == 200
    assert len(api.calls) == 2  # both cached (HEAD is get)
    clock.now += 10.5  # upstream's 10 s TTLs
    assert asyncio.run(auth.check("GET", "/metrics", "Bearer good")).status == 200
    assert len(api.calls) == 4


def test_an_invalid_token_is_401_and_a_malformed_header_is_401_without_a_review() -> None:
    auth, api, _ = _auth()
    d = asyncio.run(auth.check("GET", "/metrics", "Bearer bad"))
    assert (d.status, d.message) == (401, "Unauthorized")
    assert [c[0] for c in api.calls] == ["tokenreviews"]
    assert asyncio.run(auth.check("GET", "/metrics", "Bearer bad")).status == 401
    assert len(api.calls) == 1  # the failure is cached too
    assert asyncio.run(auth.check("GET", "/metrics", "Basic dXNlcjpwdw==")).status == 401
    assert asyncio.run(auth.check("GET", "/metrics", "Bearer ")).status == 401
    assert len(api.calls) == 1


def test_anonymous_is_authorized_as_system_anonymous_and_denied_with_the_path() -> None:
    auth, api, _ = _auth()
    d = asyncio.run(auth.check("GET", "/metrics", None))
    assert d.status == 403
    assert d.message == (
        'forbidden: User "system:anonymous" cannot get path "/metrics": no RBAC policy matched'
    )
    assert [c[0] for c in api.calls] == ["subjectaccessreviews"]
    assert api.calls[0][1]["spec"]["groups"] == ["system:unauthenticated"]
    api.allowed.add(("system:anonymous", "get", "/metrics"))  # RBAC may grant it, as upstream
    auth2 = DelegatedAuth(api)  # type: ignore[arg-type]
    assert asyncio.run(auth2.check("GET", "/metrics", None)).status == 200


def test_an_authenticated_user_without_rbac_is_403() -> None:
    auth, api, _ = _auth()
    api.users["other"] = {"username": "alice", "groups": ["system:authenticated"]}
    d = asyncio.run(auth.check("GET", "/metrics", "Bearer other"))
    assert d.status == 403 and 'User "alice" cannot get path "/metrics"' in d.message


def test_an_unreachable_api_server_refuses_and_caches_nothing() -> None:
    auth, api, _ = _auth()
    api.down = True
    assert asyncio.run(auth.check("GET", "/metrics", "Bearer good")).status == 401
    d = asyncio.run(auth.check("GET", "/metrics", None))
    assert d.status == 500 and "authorization is unavailable" in d.message
    api.down = False
    assert asyncio.run(auth.check("GET", "/metrics", "Bearer good")).status == 200


def test_a_verified_client_certificate_names_the_user_before_any_token() -> None:
    """As upstream's union authenticator: the x509 authenticator (common name, organizations
    as groups, plus system:authenticated) goes before the token one, so no TokenReview is
    made; a certificate without a common name leaves the request to the token."""
    auth, api, _ = _auth()
    api.allowed.add(("alice", "get", "/metrics"))
    cert = ("alice", ("devs", "ops"))
    assert asyncio.run(auth.check("GET", "/metrics", "Bearer good", cert)).status == 200
    assert [c[0] for c in api.calls] == ["subjectaccessreviews"]
    assert api.calls[0][1]["spec"] == {
        "user": "alice",
        "groups": ["devs", "ops", "system:authenticated"],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    denied = asyncio.run(auth.check("GET", "/debug", None, ("alice", ())))
    assert denied.status == 403
    assert denied.message == (
        'forbidden: User "alice" cannot get path "/debug": no RBAC policy matched'
    )
    api.calls.clear()
    assert asyncio.run(auth.check("GET", "/metrics", "Bearer good", ("", ("devs",)))).status == 200
    assert [c[0] for c in api.calls] == ["tokenreviews", "subjectaccessreviews"]
