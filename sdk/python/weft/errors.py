"""The errors weft's API answers, as exceptions.

Every error weftd answers is ``{"error": {"code", "message"[, "details"]}}``
(docs/openapi.yaml); :class:`ApiError` carries each part, and a subclass per status says which
kind it is, so callers can ``except weft.NotFound``.
"""
from typing import Dict, List, Optional

__all__ = ["WeftError", "ApiError", "BadRequest", "Unauthorized", "Forbidden", "NotFound",
           "Conflict", "TooManyRequests", "InsufficientStorage", "ConnectionFailed"]


class WeftError(Exception):
    """Anything the client raises on its own account."""


class ConnectionFailed(WeftError):
    """weftd could not be reached (refused, reset, timed out, or TLS failed)."""


class ApiError(WeftError):
    """An answer of weftd that is not a success.

    Attributes:
        status: the HTTP status (400, 404, ...).
        code: weftd's error code (e.g. ``"invalid_manifest"``), "" when the body had none.
        message: weftd's sentence.
        details: for a bad manifest or body, one ``{"field": ..., "problem": ...}`` per problem.
        retry_after: seconds to wait before trying again (429), when weftd said.
    """

    def __init__(self, status: int, code: str, message: str,
                 details: Optional[List[Dict[str, str]]] = None,
                 retry_after: Optional[float] = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details or [])
        self.retry_after = retry_after
        super().__init__(self._describe())

    @property
    def field(self) -> Optional[str]:
        """The first field a 400 names (e.g. ``"training.learning_rate"``), or None."""
        return self.details[0].get("field") if self.details else None

    @property
    def fields(self) -> List[str]:
        """Every field the details name, in order."""
        return [d.get("field", "") for d in self.details]

    def _describe(self) -> str:
        text = "HTTP %d" % self.status
        if self.code:
            text += " " + self.code
        if self.message:
            text += ": " + self.message
        for d in self.details:
            text += "\n  %s: %s" % (d.get("field", ""), d.get("problem", ""))
        return text


class BadRequest(ApiError):
    """400: the request (a manifest, a body, a parameter) is invalid; see ``details``."""


class Unauthorized(ApiError):
    """401: the token is missing, unknown or revoked."""


class Forbidden(ApiError):
    """403: the token may not do this (a tenant on an admin route, the admin on a tenant's)."""


class NotFound(ApiError):
    """404: no such job or resource — another tenant's looks exactly the same."""


class Conflict(ApiError):
    """409: the job is in the wrong state for the action, a name is taken, or a limit is met."""


class TooManyRequests(ApiError):
    """429: over the tenant's request rate or stream count; ``retry_after`` says when to retry."""


class InsufficientStorage(ApiError):
    """507: the disk or the store is full, or the tenant is at its disk quota."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
              429: TooManyRequests, 507: InsufficientStorage}


def error_for(status: int, code: str, message: str, details: Optional[List[Dict[str, str]]],
              retry_after: Optional[float]) -> ApiError:
    """The exception for an answer of `status` (ApiError itself for a status without a class)."""
    return _BY_STATUS.get(status, ApiError)(status, code, message, details, retry_after)
