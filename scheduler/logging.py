"""structlog set-up: JSON lines when stderr is not a TTY, readable console output otherwise.
Verbosity follows kube-scheduler's -v: 0-1 info, 2-3 adds per-pod detail, 4+ debug
(per-node detail)."""

from __future__ import annotations

import logging as _stdlib_logging
import sys

import structlog

__all__ = ["configure_logging"]


def configure_logging(verbosity: int = 0, *, json_logs: bool | None = None) -> None:
    if json_logs is None:
        json_logs = not sys.stderr.isatty()
    level = _stdlib_logging.DEBUG if verbosity >= 4 else _stdlib_logging.INFO
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_logs
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # kopf and the client log through the standard library: keep them quiet but visible.
    _stdlib_logging.basicConfig(
        level=_stdlib_logging.WARNING if verbosity < 4 else _stdlib_logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
