"""Exceptions: one class per ``tf_err`` code, each also a fitting built-in.

The SWIG layer raises them for every failed call (``_make`` below is what it
calls), with the library's message for the calling thread.
"""

import re

__all__ = [
    "Error",
    "GenericError",
    "InvalidArgument",
    "NotFound",
    "Timeout",
    "AuthError",
    "ProtocolError",
    "IntegrityError",
    "BufferTooSmall",
    "OutOfMemory",
    "NetworkError",
    "CallbackError",
    "InputOutputError",
    "ResourceExhausted",
]

# "REASON_CODE at byte N: why" (STUN decoder and validator, turn: URI parser),
# possibly after the field it was found in ("uri: BAD_PORT at byte 13: ...")
_REASON = re.compile(r"^(?:[\w.\[\]]+: )?([A-Z][A-Z0-9_]*) at byte (\d+): ")


class Error(Exception):
    """A libturnfleet call failed.

    Attributes:
        code: the ``tf_err`` code (negative, e.g. -2 for ``TF_EINVALID``).
        name: its symbolic name (``"TF_EINVALID"``).
        message: the library's message: the field path or byte offset and why.
        reason_code: for messages of the form ``"REASON_CODE at byte N: why"``
            (STUN, ``turn:`` URIs) the reason code, else None.
        offset: the byte offset N of such a message, else None.
    """

    code = -1

    def __init__(self, message, code=None):
        if code is not None:
            self.code = code
        self.message = message
        m = _REASON.match(message)
        self.reason_code = m.group(1) if m else None
        self.offset = int(m.group(2)) if m else None
        # one argument only: OSError subclasses would read two as (errno, strerror)
        super().__init__(message)

    @property
    def name(self):
        from . import core

        return core.tf_error_name(self.code)

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (type(self), (self.message, self.code))


class GenericError(Error):
    """TF_ERROR (-1): a generic failure."""

    code = -1


class InvalidArgument(Error, ValueError):
    """TF_EINVALID (-2): an invalid argument or input (the message names the field)."""

    code = -2


class NotFound(Error, LookupError):
    """TF_ENOTFOUND (-3): no such relay, attribute, item."""

    code = -3


class Timeout(Error, TimeoutError):
    """TF_ETIMEOUT (-4): nothing answered in time."""

    code = -4


class AuthError(Error):
    """TF_EAUTH (-5): authentication failed (wrong or expired credential, bad MESSAGE-INTEGRITY)."""

    code = -5


class ProtocolError(Error, ValueError):
    """TF_EPROTO (-6): malformed data (STUN, JSON, YAML); see ``reason_code`` and ``offset``."""

    code = -6


class IntegrityError(ProtocolError, AuthError):
    """A STUN response whose MESSAGE-INTEGRITY is wrong or missing (code TF_EAUTH, -5).

    Raised by :func:`turnfleet.stun.validate_response` so that every defect of a
    response is a :class:`ProtocolError`, while it is still an :class:`AuthError`.
    """

    code = -5


class BufferTooSmall(Error, BufferError):
    """TF_EBUFS (-7): a buffer or a message limit is too small."""

    code = -7


class OutOfMemory(Error, MemoryError):
    """TF_ENOMEM (-8)."""

    code = -8


class NetworkError(Error, ConnectionError):
    """TF_ENET (-9): unreachable, refused, connection closed."""

    code = -9


class CallbackError(Error, RuntimeError):
    """TF_EUSER (-10): a callback asked to stop."""

    code = -10


class InputOutputError(Error, OSError):
    """TF_EIO (-11): a file could not be read or written."""

    code = -11


class ResourceExhausted(Error, OSError):
    """TF_ERESOURCE (-12): this machine ran out of file descriptors, buffers or ports."""

    code = -12


class ConflictError(Error):
    """TF_ECONFLICT (-13): the object changed since it was read, or exists already (HTTP 409)."""

    code = -13


class ExpiredError(Error):
    """TF_EEXPIRED (-14): a resource version is too old (HTTP 410): list again."""

    code = -14


class UnavailableError(Error, ConnectionError):
    """TF_EUNAVAILABLE (-15): the server is busy or unavailable (429, 5xx): retry later."""

    code = -15


class RefusedError(Error):
    """TF_EREFUSED (-16): the client refused a write itself (not leading, or over its budget): nothing was sent."""

    code = -16


_BY_CODE = {
    cls.code: cls
    for cls in (
        GenericError,
        InvalidArgument,
        NotFound,
        Timeout,
        AuthError,
        ProtocolError,
        BufferTooSmall,
        OutOfMemory,
        NetworkError,
        CallbackError,
        InputOutputError,
        ResourceExhausted,
        ConflictError,
        ExpiredError,
        UnavailableError,
        RefusedError,
    )
}


def error_class(code):
    """The exception class for a ``tf_err`` code (:class:`Error` for codes this version does not know)."""
    return _BY_CODE.get(code, Error)


def _make(code, message):
    """Called by the SWIG layer: the exception instance for a failed call."""
    return error_class(code)(message, code)
