"""TURN credentials for WebRTC clients (``issuer.h``): a pool's published relays and status → the
relays a user gets and a credential for them, as an RTCConfiguration fragment or the TURN REST form."""

import json
import time
from dataclasses import dataclass

from . import core as _c
from ._handle import Handle, locked

_FORMS = {"ice": _c.TF_ISSUER_FORM_ICE, "rest": _c.TF_ISSUER_FORM_REST}


@dataclass(frozen=True)
class IssuerAnswer:
    """One answer: ``relays`` (names, least loaded first), ``ttl`` (seconds), ``json`` (the answer
    in the form asked, as text: it holds the credential) and ``document`` (the same, parsed)."""

    relays: tuple
    ttl: int
    json: str

    @property
    def document(self):
        return json.loads(self.json)


class IssuerPool(Handle):
    """A pool as an issuer sees it (``tf_issuer_pool``), from the turn-uris ``iceServers.json`` (one
    RTCIceServer per published relay) and the pool status (``turnfleet up``'s status.json, a
    TURNPool's ``status`` or a whole TURNPool), each as str or bytes-like."""

    __slots__ = ()

    def __init__(self, ice_servers, status):
        super().__init__(_c.tf_issuer_pool_new(ice_servers, status))

    @property
    @locked
    def eligible(self):
        """Relays that may be handed out: published, ready, not draining, not full."""
        return _c.tf_issuer_pool_eligible(self._handle)

    @locked
    def answer(self, secret, user, transport=None, family=None, ttl=0, max_relays=0, form="ice", now=None,
               ttl_default=0, ttl_min=0, ttl_max=0, pressure=0.0):
        """Choose relays for ``user`` and mint the credential with ``secret``.

        ``transport``: "udp,tcp,tls" style (None: udp, tcp and tls); ``family``: "ipv4", "ipv6" or None;
        ``ttl`` seconds (0: ``ttl_default``); ``max_relays``, ``ttl_default``, ``ttl_min``, ``ttl_max``,
        ``pressure``: 0 for the library's defaults; ``form``: "ice" or "rest"; ``now``: Unix seconds
        (None: the clock). Raises InvalidArgument naming the field, NotFound when no relay fits.
        """
        if form not in _FORMS:
            from ._errors import InvalidArgument

            raise InvalidArgument(f"form must be 'ice' or 'rest', not {form!r}", _c.TF_EINVALID)
        if now is None:
            now = time.time()
        a = _c.tf_py_issuer_answer_new(self._handle, secret, user, transport, family, int(ttl), int(max_relays),
                                       int(ttl_default), int(ttl_min), int(ttl_max), float(pressure), int(now))
        relays = tuple(_c.tf_issuer_answer_relay_name(a, i) for i in range(_c.tf_issuer_answer_relay_count(a)))
        return IssuerAnswer(relays=relays, ttl=_c.tf_issuer_answer_ttl(a), json=_c.tf_issuer_answer_json(a, _FORMS[form]))
