"""py-scheduler: a secondary Kubernetes scheduler in Python with kube-scheduler's priority
and preemption semantics. See README.md and docs/."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata on first use: importlib.metadata
    (with email, zipfile, ...) costs tens of milliseconds at start-up, which ``simulate``
    and ``version``-less commands need not pay."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        # The one place the version is written is pyproject.toml; the Makefile and the
        # image read it from there too.
        found = version("py-scheduler")
    except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
