"""weft's Python client: submit training jobs to a weftd, follow them, fetch their models.

See weft.client for the walk-through; docs/python.md for the reference.
"""
from .client import SETTLED_STATES, Client, Event, Job, apply_overrides
from .errors import (ApiError, BadRequest, Conflict, ConnectionFailed, Forbidden,
                     InsufficientStorage, NotFound, TooManyRequests, Unauthorized, WeftError)

__all__ = ["Client", "Job", "Event", "SETTLED_STATES", "apply_overrides", "WeftError",
           "ApiError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
           "TooManyRequests", "InsufficientStorage", "ConnectionFailed"]
__version__ = "0.1.0"
