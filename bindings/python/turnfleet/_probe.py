"""The TURN probe: a real Allocate against a relay."""

import json
import logging
import math
import os
import socket
from dataclasses import dataclass, field
from typing import Dict, Optional

from . import core as _c
from ._errors import Error, InvalidArgument, NotFound, ProtocolError, error_class
from ._handle import Handle, locked

#: probe stages, in order
STAGES = tuple(_c.tf_probe_stage_name(i) for i in range(_c.TF_PROBE_STAGE_COUNT))

_FAMILIES = {
    None: 0,
    0: 0,
    4: _c.TF_AF_INET,
    6: _c.TF_AF_INET6,
    "ipv4": _c.TF_AF_INET,
    "ipv6": _c.TF_AF_INET6,
    socket.AF_INET: _c.TF_AF_INET,
    socket.AF_INET6: _c.TF_AF_INET6,
}
# logging level -> the library's threshold, and back
_TF_LEVELS = ((logging.ERROR, _c.TF_LOG_ERROR), (logging.WARNING, _c.TF_LOG_WARN), (logging.INFO, _c.TF_LOG_INFO))
_PY_LEVELS = {
    _c.TF_LOG_DEBUG: logging.DEBUG,
    _c.TF_LOG_INFO: logging.INFO,
    _c.TF_LOG_WARN: logging.WARNING,
    _c.TF_LOG_ERROR: logging.ERROR,
}


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of one probe: the fields of ``turnfleet-probe --json``, in snake_case,
    plus ``status`` and ``exit_code``."""

    uri: str
    ok: bool  # every stage passed
    stage: str  # "done", or the stage that failed (see STAGES)
    error_code: int  # the TURN error code (401, 403, 486, 508, ...), 0 when none
    error_reason: str  # the relay's reason phrase, for diagnostics only
    relayed_address: Optional[str]
    relayed_port: Optional[int]
    mapped_address: Optional[str]
    lifetime: int  # seconds granted
    rtt_ms: Dict[str, float]  # stage name -> milliseconds, for the stages that ran
    draining: bool  # 403 on Allocate: the relay is draining, not broken
    message: str  # what happened ("" on success)
    status: int = 0  # tf_err: 0; TF_ETIMEOUT / TF_ENET (no answer); TF_EAUTH, TF_EPROTO, TF_ERROR (wrong answer)
    exit_code: int = 0  # turnfleet-probe's exit status: 0 ok, 1 answered wrongly, 3 unreachable or timed out
    json: str = field(default="", repr=False, compare=False)  # the library's JSON text

    @property
    def status_name(self):
        """``"TF_OK"``, ``"TF_ETIMEOUT"``, ..."""
        return _c.tf_error_name(self.status)

    def error(self):
        """The exception this outcome would be (an instance of the class for ``status``), or None when ok."""
        if self.ok:
            return None
        e = error_class(self.status)(self.message or _c.tf_strerror(self.status), self.status)
        e.result = self
        return e

    def raise_for_status(self):
        """Raise :meth:`error` unless the probe succeeded; returns self."""
        e = self.error()
        if e is not None:
            raise e
        return self

    def to_dict(self):
        """The ``turnfleet-probe --json`` object; ProtocolError when the library's text is not JSON."""
        try:
            return json.loads(self.json)
        except ValueError as e:
            raise ProtocolError(f"the probe's JSON cannot be decoded: {e}", _c.TF_EPROTO) from None


def _result(h):
    """A ProbeResult from the result's accessors: whatever bytes the relay sent
    (a reason phrase is escaped, never decoded as JSON), nothing here can fail
    but the library itself."""
    relayed = _address_or_none(_c.tf_probe_result_relayed, h)
    mapped = _address_or_none(_c.tf_probe_result_mapped, h)
    rtt = {}
    for i, name in enumerate(STAGES):
        ms = _c.tf_probe_result_rtt_ms(h, i)
        if ms >= 0:
            rtt[name] = round(ms, 3)
    try:
        text = _c.tf_probe_result_to_json(h)
    except Error:
        text = ""
    return ProbeResult(
        uri=_c.tf_probe_result_uri(h),
        ok=bool(_c.tf_probe_result_ok(h)),
        stage=_c.tf_probe_stage_name(_c.tf_probe_result_stage(h)),
        error_code=_c.tf_probe_result_error_code(h),
        error_reason=_c.tf_probe_result_error_reason(h) or "",
        relayed_address=relayed[0] if relayed else None,
        relayed_port=relayed[1] if relayed else None,
        mapped_address=mapped[0] if mapped else None,
        lifetime=_c.tf_probe_result_lifetime(h),
        rtt_ms=rtt,
        draining=bool(_c.tf_probe_result_draining(h)),
        message=_c.tf_probe_result_message(h) or "",
        status=_c.tf_probe_result_status(h),
        exit_code=_c.tf_probe_result_exit_code(h),
        json=text,
    )


def _address_or_none(accessor, h):
    try:
        return tuple(accessor(h))
    except NotFound:
        return None


def _unusable(uri, exc):
    """The result standing for a probe whose outcome could not be read."""
    status = getattr(exc, "code", _c.TF_ERROR)
    message = f"the probe's result could not be read: {exc}"
    return ProbeResult(
        uri=str(uri), ok=False, stage=STAGES[0], error_code=0, error_reason="", relayed_address=None,
        relayed_port=None, mapped_address=None, lifetime=0, rtt_ms={}, draining=False, message=message,
        status=status, exit_code=1,
    )


def _port_range(r):
    if r is None:
        return 0, 0
    if isinstance(r, str):
        return _c.tf_port_range_parse(r)
    start, end = r
    return int(start), int(end)


def _log_adapter(log, log_level):
    """(callable(level, message) or None, library threshold)."""
    if log is None:
        return None, _c.TF_LOG_INFO
    if isinstance(log, logging.Logger):
        logger = log

        def log(level, message):
            logger.log(_PY_LEVELS.get(level, logging.INFO), message)

        if log_level is None:
            log_level = logger.getEffectiveLevel()
    elif not callable(log):
        raise TypeError("log must be a logging.Logger or a callable(level, message)")
    if log_level is None:
        log_level = logging.INFO
    threshold = _c.TF_LOG_DEBUG
    for py, tf in _TF_LEVELS:
        if log_level >= py:
            threshold = tf
            break
    return log, threshold


def _options(
    uri,
    secret,
    expect_address=None,
    expect_port_range=None,
    family=None,
    peer_check=False,
    timeout=2.0,
    user=None,
    ttl=600,
    separator=":",
    rto=0.5,
    ca_file=None,
    insecure=False,
    now=None,
    lifetime=None,
    release=True,
    log=None,
    log_level=None,
):
    """The argument list of the tf_py_probe_* helpers after (out), from probe() keywords."""
    if secret is None:
        raise TypeError("a shared secret is required")
    try:
        fam = _FAMILIES[family.lower() if isinstance(family, str) else family]
    except KeyError:
        raise InvalidArgument(f"family must be None, 4, 6, 'ipv4' or 'ipv6', not {family!r}", _c.TF_EINVALID) from None
    start, end = _port_range(expect_port_range)
    if separator is None or separator == ":":
        sep = 0
    elif isinstance(separator, str) and len(separator) == 1:
        sep = ord(separator)
    else:
        raise InvalidArgument("separator must be one character", _c.TF_EINVALID)
    cb, threshold = _log_adapter(log, log_level)
    return [
        uri,
        secret,
        user,
        int(ttl),
        sep,
        fam,
        expect_address,
        start,
        end,
        1 if peer_check else 0,
        math.ceil(float(timeout) * 1000.0),  # the library rejects 0 and less
        math.ceil(float(rto) * 1000.0),
        None if ca_file is None else os.fsdecode(ca_file),
        1 if insecure else 0,
        0 if now is None else int(now),
        0 if lifetime is None else int(lifetime),
        1 if release else 0,
        cb,
        threshold,
    ]


def probe(
    uri,
    secret,
    expect_address=None,
    expect_port_range=None,
    family=None,
    peer_check=False,
    timeout=2.0,
    *,
    user=None,
    ttl=600,
    separator=":",
    rto=0.5,
    ca_file=None,
    insecure=False,
    now=None,
    lifetime=None,
    release=True,
    log=None,
    log_level=None,
) -> ProbeResult:
    """Prove a relay with a real TURN Allocate (``tf_probe_run``); blocks, with the GIL released.

    ``uri``: ``turn:HOST[:PORT][?transport=udp|tcp]`` or ``turns:HOST[:PORT]``.
    ``secret``: the shared TURN REST secret (never logged). ``expect_address`` and
    ``expect_port_range`` (``(start, end)`` or ``"start-end"``) check the relayed
    address; ``family`` (None, 4, 6, "ipv4", "ipv6") asks for one; ``peer_check``
    sends data through the relay and back. ``timeout`` bounds the whole probe, in
    seconds. ``log``: a logging.Logger or a callable(level, message) that receives
    the probe's log (never secrets). TLS: ``ca_file`` or ``insecure``.

    Returns a :class:`ProbeResult` also when the relay failed the probe (``ok`` is
    False; ``raise_for_status()`` turns it into an exception). Raises
    InvalidArgument for bad arguments.
    """
    args = _options(
        uri, secret, expect_address, expect_port_range, family, peer_check, timeout, user, ttl, separator, rto,
        ca_file, insecure, now, lifetime, release, log, log_level,
    )
    return _result(_c.tf_py_probe_run(*args))


def probe_many(targets, secret=None, concurrency=16, **common):
    """Run many probes at once on one event loop (``tf_probe_set``), with the GIL released.

    ``targets``: URIs, or dicts of :func:`probe` keywords (``uri`` and any of
    ``secret``, ``expect_address``, ...) that override ``common``. At most
    ``concurrency`` probes run at a time. Returns one result per target, in
    target order, always: a result that cannot be read stands as a failed
    ProbeResult whose message says why, and never hides the others. Raises
    (a turnfleet.Error) only for bad arguments, before any probe runs.
    """
    s = _c.tf_probe_set_new(int(concurrency))
    keep = []  # log callables: the set holds bare pointers to them
    uris = []
    try:
        for t in targets:
            kw = dict(common)
            if isinstance(t, dict):
                kw.update(t)
            else:
                kw["uri"] = t
            kw.setdefault("secret", secret)
            args = _options(**kw)
            keep.append(args[-2])
            _c.tf_py_probe_set_add(s, *args)
            uris.append(kw.get("uri"))
        failure = None
        try:
            _c.tf_py_probe_set_run(s)
        except Error as e:  # the loop itself failed: still report what each probe got
            failure = e
        results = []
        for i in range(len(uris)):
            # results are borrowed from the set: copy them while it lives
            try:
                r = _c.tf_probe_set_result(s, i) if i < _c.tf_probe_set_count(s) else None
                results.append(_result(r) if r is not None else _unusable(uris[i], failure or NotFound("no result")))
            except Error as e:
                results.append(_unusable(uris[i], e))
        return results
    finally:
        del s  # the set goes before the callables it points to
        del keep


class Allocation(Handle):
    """One allocation kept open (``tf_allocation``): ``turnfleet-probe --hold``.

    ``close()`` (or the end of ``with``) releases it if not yet released and
    closes its socket. One dropped without ``close()`` is released when it is
    collected, with a ResourceWarning (as an unclosed file).
    """

    def __init__(self, h, result):
        super().__init__(h)
        self.result = result  # the Allocate's ProbeResult

    def __del__(self):
        # dropped without close(): released all the same (Refresh 0, as close() does), with a
        # ResourceWarning, as an unclosed file gives one
        if getattr(self, "_h", None) is None:
            return
        try:
            import warnings

            warnings.warn(f"unclosed {self!r}: released when collected", ResourceWarning, stacklevel=2)
        except Exception:  # interpreter shutdown: no warnings left, the release still happens
            pass
        self.close()

    @property
    @locked
    def relayed(self):
        """(address, port) of the relayed transport address."""
        return tuple(_c.tf_allocation_relayed(self._handle))

    @property
    @locked
    def lifetime(self):
        """Seconds granted by the last Allocate or Refresh."""
        return _c.tf_allocation_lifetime(self._handle)

    @locked
    def refresh(self):
        """Refresh with the allocation's lifetime (a 438 is retried)."""
        _c.tf_allocation_refresh(self._handle)

    @locked
    def release(self):
        """Release now (Refresh with lifetime 0; a 437 counts as released)."""
        _c.tf_allocation_release(self._handle)

    @locked
    def __repr__(self):
        if self.closed:
            return "<turnfleet.Allocation closed>"
        a, p = self.relayed
        return f"<turnfleet.Allocation {a}:{p} lifetime {self.lifetime}>"


def allocate(
    uri,
    secret,
    expect_address=None,
    expect_port_range=None,
    family=None,
    timeout=2.0,
    *,
    user=None,
    ttl=600,
    separator=":",
    rto=0.5,
    ca_file=None,
    insecure=False,
    now=None,
    lifetime=None,
) -> Allocation:
    """Allocate and keep the allocation open (``tf_allocation_new``).

    If the relay refuses, raises the exception for the outcome (AuthError, Timeout,
    GenericError for a TURN error code, ...) with the :class:`ProbeResult` as ``.result``.
    """
    args = _options(
        uri, secret, expect_address, expect_port_range, family, False, timeout, user, ttl, separator, rto,
        ca_file, insecure, now, lifetime,
    )
    del args[16]  # release: the allocation stays
    del args[9]  # peer_check
    args[-2] = None  # no log callback: the allocation would outlive it
    r, h = _c.tf_py_allocation_new(*args)
    result = _result(r)
    if h is None:
        raise result.error()
    return Allocation(h, result)
