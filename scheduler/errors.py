"""Errors shared across layers. ``scheduler.kube`` raises subclasses of ``ApiCallError``
so that the layers above it can handle API failures without importing ``kubernetes``."""

from __future__ import annotations

__all__ = ["ApiCallError"]


class ApiCallError(Exception):
    """An API call failed. ``status``: HTTP status, 0 when there was no response."""

    status = 0

    @property
    def retryable(self) -> bool:
        return False
