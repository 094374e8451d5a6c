"""The health/metrics port: a busy address is one clear error naming it; the secure port
serves TLS and puts a guard in front of every request."""

from __future__ import annotations

import asyncio
import http.client
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from scheduler.server import HealthServer, ServeError
from scheduler.servingcert import CertError, self_signed, server_context


def test_a_busy_port_is_an_error_naming_the_address() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = HealthServer(
            host="127.0.0.1",
            port=port,
            healthy=lambda: True,
            ready=lambda: True,
            registry=CollectorRegistry(),
        )
        with pytest.raises(ServeError) as e:
            asyncio.run(server.start())
    assert f"cannot serve health and metrics on 127.0.0.1:{port}" in str(e.value)
    assert "in use" in str(e.value)


def _get(
    url: str, token: str | None = None, cert: tuple[Path, Path] | None = None
) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(*cert)
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    try:
        with opener.open(request, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _secure_server(tls: ssl.SSLContext, guard: Any) -> HealthServer:
    return HealthServer(
        host="127.0.0.1",
        port=0,
        healthy=lambda: True,
        ready=lambda: True,
        registry=CollectorRegistry(),
        tls=tls,
        guard=guard,
    )


def test_the_secure_port_serves_tls_and_asks_the_guard_for_every_request() -> None:
    """A self-signed certificate for the loopback names; the guard decides (here: only the
    token "ok" may read /metrics; health is always allowed, as DelegatedAuth does)."""
    seen: list[tuple[str, str, str | None]] = []

    async def guard(
        method: str, path: str, authorization: str | None, cert: object
    ) -> tuple[int, str]:
        assert cert is None  # no client CA configured: no certificate is asked for
        seen.append((method, path, authorization))
        if path == "/healthz" or authorization == "Bearer ok":
            return 200, ""
        return (401, "Unauthorized") if authorization is None else (403, "forbidden: no")

    tls, source = server_context(cert_file=None, key_file=None, bind_address="127.0.0.1")
    assert source == "self-signed"

    async def main() -> list[tuple[int, str]]:
        server = _secure_server(tls, guard)
        port = await server.start()
        assert server.scheme == "https"
        base = f"https://127.0.0.1:{port}"
        try:
            return [
                await asyncio.to_thread(_get, f"{base}/healthz"),
                await asyncio.to_thread(_get, f"{base}/metrics"),
                await asyncio.to_thread(_get, f"{base}/metrics", "nope"),
                await asyncio.to_thread(_get, f"{base}/metrics", "ok"),
            ]
        finally:
            await server.stop()

    health, anonymous, denied, allowed = asyncio.run(main())
    assert health == (200, "ok")
    assert anonymous == (401, "Unauthorized\n")
    assert denied == (403, "forbidden: no\n")
    assert allowed[0] == 200  # an empty registry: an empty exposition
    assert [s[1] for s in seen] == ["/healthz", "/metrics", "/metrics", "/metrics"]


def test_the_self_signed_certificate_names_the_loopback_and_the_bind_address() -> None:
    from cryptography import x509

    cert_pem, key_pem = self_signed("10.1.2.3")
    cert = x509.load_pem_x509_certificate(cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert {"127.0.0.1", "::1", "10.1.2.3"} <= ips
    assert b"PRIVATE KEY" in key_pem


def test_a_missing_or_unloadable_certificate_names_the_field_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(CertError, match=r"secureServing.certFile: /nope/tls.crt: no such file"):
        server_context(cert_file="/nope/tls.crt", key_file="/nope/tls.key", bind_address="")
    bad = tmp_path / "tls.crt"
    bad.write_text("not a certificate")
    with pytest.raises(CertError, match=r"secureServing.certFile/keyFile: .*cannot load"):
        server_context(cert_file=str(bad), key_file=str(bad), bind_address="")


def test_metrics_are_refreshed_right_before_each_scrape() -> None:
    """Gauges read from live state (the queue's sizes) are set by ``before_scrape`` on every
    request of /metrics, so a scrape never reads a value older than itself."""
    from prometheus_client import Gauge

    registry = CollectorRegistry()
    gauge = Gauge("queue_size", "a size read when scraped", registry=registry)
    size = [3]

    async def main() -> list[tuple[int, str]]:
        server = HealthServer(
            host="127.0.0.1",
            port=0,
            healthy=lambda: True,
            ready=lambda: True,
            registry=registry,
            before_scrape=lambda: gauge.set(size[0]),
        )
        port = await server.start()
        try:
            first = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
            size[0] = 0
            second = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
            return [first, second]
        finally:
            await server.stop()

    first, second = asyncio.run(main())
    assert "queue_size 3.0" in first[1]
    assert "queue_size 0.0" in second[1]


def _issue(
    subject: list[tuple[object, str]], issuer_key: object = None, issuer: object = None
) -> tuple[bytes, bytes, object, object]:
    """A certificate (PEM) and its key (PEM) for ``subject``: self-signed as a CA when no
    issuer is given, else a client certificate signed by it. Also the key and the subject
    name, to sign with."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid, value) for oid, value in subject])  # type: ignore[arg-type]
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer if issuer is not None else name)  # type: ignore[arg-type]
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False
        )
    cert = builder.sign(issuer_key or key, hashes.SHA256())  # type: ignore[arg-type]
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem, key, name


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_client_certificate_signed_by_the_client_ca_reaches_the_guard(
    tmp_path: Path, loop: str
) -> None:
    """secureServing.clientCAFile: a client certificate is asked for, not required; one
    signed by the CA reaches the guard as (common name, organizations), a request without
    one reaches it with None, and one signed by another CA fails the TLS handshake."""
    from cryptography.x509.oid import NameOID

    ca_pem, _, ca_key, ca_name = _issue([(NameOID.COMMON_NAME, "test-ca")])
    (tmp_path / "ca.crt").write_bytes(ca_pem)
    alice = _issue(
        [
            (NameOID.ORGANIZATION_NAME, "devs"),
            (NameOID.ORGANIZATION_NAME, "ops"),
            (NameOID.COMMON_NAME, "alice"),
        ],
        ca_key,
        ca_name,
    )
    _, _, other_key, other_name = _issue([(NameOID.COMMON_NAME, "other-ca")])
    mallory = _issue([(NameOID.COMMON_NAME, "mallory")], other_key, other_name)
    for who, (cert, key, _, _) in (("alice", alice), ("mallory", mallory)):
        (tmp_path / f"{who}.crt").write_bytes(cert)
        (tmp_path / f"{who}.key").write_bytes(key)

    seen: list[object] = []

    async def guard(
        method: str, path: str, authorization: str | None, cert: object
    ) -> tuple[int, str]:
        seen.append(cert)
        return 200, ""

    tls, _ = server_context(
        cert_file=None,
        key_file=None,
        bind_address="127.0.0.1",
        client_ca_file=str(tmp_path / "ca.crt"),
    )

    def get(url: str, who: str | None) -> int:
        cert = (tmp_path / f"{who}.crt", tmp_path / f"{who}.key") if who else None
        return _get(url, cert=cert)[0]

    async def main() -> list[object]:
        server = _secure_server(tls, guard)
        port = await server.start()
        url = f"https://127.0.0.1:{port}/metrics"
        try:
            statuses: list[object] = [
                await asyncio.to_thread(get, url, "alice"),
                await asyncio.to_thread(get, url, None),
            ]
            try:
                await asyncio.to_thread(get, url, "mallory")
            except (OSError, http.client.HTTPException) as e:  # TLS 1.3: a closed connection
                statuses.append(type(e).__name__)
            return statuses
        finally:
            await server.stop()

    if loop == "uvloop":  # the live scheduler's loop (scheduler.operator)
        import uvloop

        statuses = uvloop.run(main())
    else:
        statuses = asyncio.run(main())
    assert statuses[:2] == [200, 200] and isinstance(statuses[2], str), statuses
    assert seen == [("alice", ("devs", "ops")), None]  # mallory never got past TLS


def test_an_unreadable_client_ca_names_the_field_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(CertError, match=r"secureServing.clientCAFile: /nope/ca.crt: no such file"):
        server_context(
            cert_file=None, key_file=None, bind_address="", client_ca_file="/nope/ca.crt"
        )
    bad = tmp_path / "ca.crt"
    bad.write_text("not a certificate")
    with pytest.raises(CertError, match=r"secureServing.clientCAFile: .*ca.crt: cannot load"):
        server_context(cert_file=None, key_file=None, bind_address="", client_ca_file=str(bad))
