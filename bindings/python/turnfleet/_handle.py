"""Base of the classes that own a C handle, and the lock that guards it."""

import contextlib
import functools
import threading


class Handle:
    """Owns one libturnfleet handle (a SWIG proxy whose destructor frees it).

    A handle must not be used by two threads at once (the C library's rule),
    so each object has a lock that every call using its handle holds: calls
    from many threads on one object run one after the other, never together.
    ``close()`` takes the lock too, so it waits for a call in progress, then
    drops the proxy (which frees the handle). Closing twice is harmless; using
    a closed handle raises InvalidArgument (a ValueError, as files raise). ``with`` closes on exit.
    """

    __slots__ = ("_h", "_lock", "__weakref__")

    def __init__(self, h):
        self._h = h
        self._lock = threading.RLock()

    @property
    def _handle(self):
        h = self._h
        if h is None:
            from . import core as _c
            from ._errors import InvalidArgument

            raise InvalidArgument(f"operation on a closed {type(self).__name__}", _c.TF_EINVALID)
        return h

    @property
    def closed(self):
        """True once close() was called."""
        return self._h is None

    def close(self):
        """Release the C handle now (else it goes when the object does)."""
        with self._lock:
            self._h = None

    def __enter__(self):
        self._handle  # a closed handle cannot be entered
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def locked(fn):
    """Run the method with its object's lock held (for every method that uses ``self._handle``)."""

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        with self._lock:
            return fn(self, *args, **kwargs)

    return call


@contextlib.contextmanager
def holding(*objs):
    """Hold the locks of several handle objects (None and repeats allowed), in one
    global order, so two threads that lock the same objects cannot deadlock."""
    with contextlib.ExitStack() as stack:
        seen = set()
        for o in sorted((o for o in objs if isinstance(o, Handle)), key=id):
            if id(o) not in seen:
                seen.add(id(o))
                stack.enter_context(o._lock)
        yield


def handle_of(obj, cls, what):
    """The C handle of @p obj, which must be a @p cls (TypeError otherwise).
    Use it under :func:`holding` (or the object's lock)."""
    if not isinstance(obj, cls):
        raise TypeError(f"{what} must be a turnfleet.{cls.__name__}, not {type(obj).__name__}")
    return obj._handle
