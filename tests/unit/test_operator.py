"""The operator's in-cluster login: the API server from the service environment, as the
official client's in-cluster config reads it (no cluster DNS needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler import operator


@pytest.mark.parametrize(
    ("host", "server"),
    [
        pytest.param("10.96.0.1", "https://10.96.0.1:443", id="IPv4"),
        pytest.param("fd00::1", "https://[fd00::1]:443", id="IPv6"),
    ],
)
def test_in_cluster_login_reads_the_service_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, server: str
) -> None:
    (tmp_path / "token").write_text("tok\n")
    (tmp_path / "namespace").write_text("kube-system")
    monkeypatch.setattr(operator, "SA_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    info = operator._in_cluster_login()
    assert info is not None
    assert (info.server, info.token, info.default_namespace) == (server, "tok", "kube-system")
    assert info.ca_path == str(tmp_path / "ca.crt")


def test_outside_a_cluster_there_is_no_in_cluster_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operator, "SA_DIR", tmp_path)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert operator._in_cluster_login() is None
