"""The health/metrics port: a busy address is one clear error naming it."""

from __future__ import annotations

import asyncio
import socket

import pytest
from prometheus_client import CollectorRegistry

from scheduler.server import HealthServer, ServeError


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
