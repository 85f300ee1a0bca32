"""Base of the classes that own a C handle."""


class Handle:
    """Owns one libturnfleet handle (a SWIG proxy whose destructor frees it).

    ``close()`` drops the proxy, which frees the handle at once unless a call
    that uses it is still running in another thread (the call holds its own
    reference, so the handle is freed when that call returns). Closing twice is
    harmless; using a closed handle raises ValueError, as files do. ``with``
    closes on exit.
    """

    __slots__ = ("_h", "__weakref__")

    def __init__(self, h):
        self._h = h

    @property
    def _handle(self):
        h = self._h
        if h is None:
            raise ValueError(f"operation on a closed {type(self).__name__}")
        return h

    @property
    def closed(self):
        """True once close() was called."""
        return self._h is None

    def close(self):
        """Release the C handle now (else it goes when the object does)."""
        self._h = None

    def __enter__(self):
        self._handle  # a closed handle cannot be entered
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def handle_of(obj, cls, what):
    """The C handle of @p obj, which must be a @p cls (TypeError otherwise)."""
    if not isinstance(obj, cls):
        raise TypeError(f"{what} must be a turnfleet.{cls.__name__}, not {type(obj).__name__}")
    return obj._handle
