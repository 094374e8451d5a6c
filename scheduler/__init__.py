"""py-scheduler: a secondary Kubernetes scheduler in Python with kube-scheduler's priority
and preemption semantics. See README.md and docs/."""

from importlib.metadata import PackageNotFoundError, version

try:
    # The one place the version is written is pyproject.toml; the Makefile and the image
    # read it from there too.
    __version__ = version("py-scheduler")
except PackageNotFoundError:  # pragma: no cover - running from a source tree not installed
    __version__ = "0+unknown"
