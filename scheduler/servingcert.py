"""The TLS side of the secure port: a given serving certificate, or a self-signed one.

As kube-scheduler's secure port: when no certificate is configured, the process makes its own
at start-up (valid for ``localhost``, the host name, the loopback addresses and the bind
address) and serves with it. Prometheus and the kubelet's probes accept such a certificate
(``insecure_skip_verify``; probes never verify); whoever needs verification mounts a real one
(``secureServing.certFile``/``keyFile``, e.g. from cert-manager). The generated key never
touches a persistent disk: it is written to a private temporary directory only for as long as
``ssl`` needs a file to load it from.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
import tempfile
from pathlib import Path

__all__ = ["CertError", "self_signed", "server_context"]


class CertError(ValueError):
    """The configured certificate or key cannot be used: names the file and the reason."""


def _names(
    bind_address: str,
) -> tuple[list[str], list[ipaddress.IPv4Address | ipaddress.IPv6Address]]:
    dns = ["localhost"]
    host = socket.gethostname()
    if host and host not in dns:
        dns.append(host)
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    try:
        addr = ipaddress.ip_address(bind_address)
    except ValueError:
        if bind_address and bind_address not in dns:
            dns.append(bind_address)
    else:
        if not addr.is_unspecified and addr not in ips:
            ips.append(addr)
    return dns, ips


def self_signed(bind_address: str, *, days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed serving certificate and its private key (PEM), for the host's names."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    dns, ips = _names(bind_address)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{dns[-1]}@py-scheduler")])
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns]
    sans += [x509.IPAddress(ip) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # kube-scheduler's default minimum
    return ctx


def server_context(
    *,
    cert_file: str | None,
    key_file: str | None,
    bind_address: str,
    client_ca_file: str | None = None,
) -> tuple[ssl.SSLContext, str]:
    """The serving context and where its certificate came from ("self-signed" or the file).
    With ``client_ca_file``, a client may present a certificate, which must then be signed
    by one of those CAs for the handshake to succeed (Go's VerifyClientCertIfGiven, as
    kube-scheduler's secure port with --client-ca-file)."""
    ctx = _context()
    if client_ca_file is not None:
        if not Path(client_ca_file).is_file():
            raise CertError(f"secureServing.clientCAFile: {client_ca_file}: no such file")
        try:
            ctx.load_verify_locations(cafile=client_ca_file)
        except (ssl.SSLError, OSError) as e:
            raise CertError(
                f"secureServing.clientCAFile: {client_ca_file}: cannot load: {e}"
            ) from e
        ctx.verify_mode = ssl.CERT_OPTIONAL
    if cert_file and key_file:
        for what, path in (("certFile", cert_file), ("keyFile", key_file)):
            if not Path(path).is_file():
                raise CertError(f"secureServing.{what}: {path}: no such file")
        try:
            ctx.load_cert_chain(cert_file, key_file)
        except (ssl.SSLError, OSError) as e:
            raise CertError(
                f"secureServing.certFile/keyFile: {cert_file}, {key_file}: cannot load: {e}"
            ) from e
        return ctx, cert_file
    cert_pem, key_pem = self_signed(bind_address)
    with tempfile.TemporaryDirectory(prefix="py-scheduler-tls-") as tmp:
        cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_path.write_bytes(cert_pem)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        ctx.load_cert_chain(str(cert_path), str(key_path))
    return ctx, "self-signed"
