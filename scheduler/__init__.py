"""py-scheduler: a secondary Kubernetes scheduler in Python with kube-scheduler's priority
and preemption semantics. See README.md and docs/."""

__version__ = "0.1.0"
