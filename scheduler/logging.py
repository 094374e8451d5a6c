"""structlog set-up: JSON lines when stderr is not a TTY, readable console output otherwise.

Verbosity follows kube-scheduler's -v: 0-3 info, 4+ debug (per-node detail); the lines
kube-scheduler writes at V(2), one per scheduling attempt (``pod_bound``,
``pod_unschedulable``), need -v 2 (``v(2)``), as its "Successfully bound pod to node" and
"Unable to schedule pod; no fit; waiting" do. Records of the
standard library's loggers (kopf's watcher reporting a dropped connection or a 410 Gone
re-list, aiohttp, the kubernetes client) go through the same renderer, so every line of
the process is one structured record; kopf's and aiohttp's chatter below WARNING is kept
out unless -v 4+.
"""

from __future__ import annotations

import logging as _stdlib_logging
import sys

import orjson
import structlog

__all__ = ["configure_logging", "v", "verbosity"]

_verbosity = 0


def v(level: int) -> bool:
    """Whether lines of klog's ``V(level)`` are written (``-v`` is ``level`` or more)."""
    return _verbosity >= level


def verbosity() -> int:
    """The ``-v`` the process was configured with."""
    return _verbosity


def configure_logging(verbosity: int = 0, *, json_logs: bool | None = None) -> None:
    global _verbosity
    _verbosity = verbosity
    if json_logs is None:
        json_logs = not sys.stderr.isatty()
    level = _stdlib_logging.DEBUG if verbosity >= 4 else _stdlib_logging.INFO
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_logs
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    # Our own records skip the standard library: rendered by orjson and written to stderr in
    # one write per line (structlog's BytesLogger, with a lock per file). Going through a
    # logging.Handler and json cost ~6% of the scheduler's CPU at one line per bound pod.
    # Records of other libraries' loggers (kopf, aiohttp) still take the handler below.
    ours: list[structlog.typing.Processor] = [
        *shared,
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    if json_logs:
        structlog.configure(
            processors=[*ours, structlog.processors.JSONRenderer(serializer=orjson.dumps)],
            wrapper_class=structlog.make_filtering_bound_logger(level),
            logger_factory=structlog.BytesLoggerFactory(sys.stderr.buffer),
            cache_logger_on_first_use=True,
        )
    else:
        structlog.configure(
            processors=[*ours, renderer],
            wrapper_class=structlog.make_filtering_bound_logger(level),
            logger_factory=structlog.PrintLoggerFactory(sys.stderr),
            cache_logger_on_first_use=True,
        )
    handler = _stdlib_logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = _stdlib_logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_stdlib_logging.WARNING if verbosity < 4 else _stdlib_logging.INFO)
    _stdlib_logging.getLogger("py-scheduler").setLevel(level)
