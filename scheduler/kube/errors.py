"""Our small error hierarchy for API calls; client exceptions are translated at the seam
(``client.py``) and chained with ``raise ... from``."""

from __future__ import annotations

from scheduler.errors import ApiCallError

__all__ = [
    "ApiError",
    "Conflict",
    "Forbidden",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unreachable",
    "error_for_status",
]


class ApiError(ApiCallError):
    """An API call failed. ``status`` is the HTTP status (0: no response)."""

    status = 0

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status

    @property
    def retryable(self) -> bool:
        return False


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class Forbidden(ApiError):
    status = 403


class TooManyRequests(ApiError):
    status = 429

    @property
    def retryable(self) -> bool:
        return True


class ServerError(ApiError):
    status = 500

    @property
    def retryable(self) -> bool:
        return True


class Unreachable(ApiError):
    """No HTTP response at all: connection refused, timeout, TLS failure."""

    @property
    def retryable(self) -> bool:
        return True


def error_for_status(status: int, message: str) -> ApiError:
    if status == 404:
        return NotFound(message)
    if status == 409:
        return Conflict(message)
    if status in (401, 403):
        return Forbidden(message, status=status)
    if status == 429:
        return TooManyRequests(message)
    if status >= 500:
        return ServerError(message, status=status)
    return ApiError(message, status=status)
