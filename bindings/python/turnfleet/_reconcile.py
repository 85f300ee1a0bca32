"""The controller core (``reconcile.h``): observations in, actions and status out."""

import os
from dataclasses import dataclass
from typing import List, Optional

from . import core as _c
from ._handle import Handle, handle_of, holding, locked
from ._metrics import Metrics
from ._pool import Nodes, Pool

#: relay flags (``tf_reconcile_relay_flags``)
PLANNED = _c.TF_RELAY_PLANNED
RUNNING = _c.TF_RELAY_RUNNING
READY = _c.TF_RELAY_READY
DRAINING = _c.TF_RELAY_DRAINING
PUBLISHED = _c.TF_RELAY_PUBLISHED
WAITING = _c.TF_RELAY_WAITING
UNCOUNTED = _c.TF_RELAY_UNCOUNTED


class Observed(Handle):
    """What a runtime observed for one reconcile (``tf_observed``): the pool's
    relays, other pools' claims and the previous status."""

    def __init__(self, h=None):
        super().__init__(h if h is not None else _c.tf_observed_new())

    @locked
    def add_relay(
        self,
        name,
        identity,
        *,
        config_hash=None,
        cli_port=0,
        running=False,
        started_ms=0,
        exited_ms=0,
        restarts=0,
        draining=False,
        draining_since_ms=0,
        allocations=None,
        probe_ms=0,
        probe_ok=False,
        probe_error_code=0,
        probe_message=None,
        saw_508=False,
        failures=None,
        uris=(),
    ):
        """Add one of the pool's relays (``tf_observed_add_relay``); ``allocations``
        None means unknown; ``failures``: {TURN code: count} seen on Allocate."""
        _c.tf_py_observed_add_relay(
            self._handle, name, identity, config_hash, int(cli_port), int(bool(running)), int(started_ms),
            int(exited_ms), int(restarts), int(bool(draining)), int(draining_since_ms),
            -1 if allocations is None else int(allocations), int(probe_ms), int(bool(probe_ok)),
            int(probe_error_code), probe_message, int(bool(saw_508)), failures, list(uris),
        )

    @locked
    def add_claim(self, pool, identity, listener_ports=None):
        """Add a relay of another pool: its addresses and ports are not used (``AddressConflict``)."""
        _c.tf_observed_add_claim(self._handle, pool, identity, listener_ports)

    @locked
    def set_status(self, text):
        """The status written after the previous reconcile (str or bytes-like)."""
        _c.tf_observed_set_status(self._handle, text)


@dataclass(frozen=True)
class Action:
    """One action, in the order a runtime must carry them out."""

    action: str  # "start", "drain", "stop", "restart"
    relay: str  # the relay's name
    reason: str


@dataclass(frozen=True)
class RelayState:
    """One relay of a reconcile's result."""

    name: str
    flags: int  # PLANNED | RUNNING | READY | DRAINING | PUBLISHED | WAITING | UNCOUNTED
    config: Optional[str]  # the rendered turnserver.conf (holds the secret), None when not planned
    config_hash: Optional[str]
    cli_port: int
    metrics_port: int
    uris: List[str]

    @property
    def planned(self):
        return bool(self.flags & PLANNED)

    @property
    def ready(self):
        return bool(self.flags & READY)

    @property
    def draining(self):
        return bool(self.flags & DRAINING)

    @property
    def published(self):
        return bool(self.flags & PUBLISHED)


@dataclass(frozen=True)
class ReconcileCondition:
    """A status condition (Ready, ProbeSucceeded, CapacityPressure, AddressConflict, ReachableFromVantage)."""

    type: str
    status: str  # "True" / "False" / "Unknown"
    reason: str
    message: str
    last_transition_time: str  # RFC 3339


class Reconcile(Handle):
    """The outcome of one reconcile (``tf_reconcile``): immutable. Actions,
    relays, URIs and conditions are plain Python objects, read once."""

    def __init__(self, h):
        super().__init__(h)
        relays = []
        for i in range(_c.tf_reconcile_relay_count(h)):
            relays.append(
                RelayState(
                    name=_c.tf_reconcile_relay_name(h, i),
                    flags=_c.tf_reconcile_relay_flags(h, i),
                    config=_c.tf_reconcile_relay_config(h, i),
                    config_hash=_c.tf_reconcile_relay_config_hash(h, i),
                    cli_port=_c.tf_reconcile_relay_cli_port(h, i),
                    metrics_port=_c.tf_reconcile_relay_metrics_port(h, i),
                    uris=[_c.tf_reconcile_relay_uri(h, i, j) for j in range(_c.tf_reconcile_relay_uri_count(h, i))],
                )
            )
        self.relays = relays
        self.actions = []
        for i in range(_c.tf_reconcile_action_count(h)):
            action, relay, reason = _c.tf_reconcile_action(h, i)
            self.actions.append(Action(_c.tf_action_name(action), relays[relay].name, reason or ""))
        self.uris = [_c.tf_reconcile_uri(h, i) for i in range(_c.tf_reconcile_uri_count(h))]
        self.conditions = [
            ReconcileCondition(*_c.tf_reconcile_condition(h, i)) for i in range(_c.tf_reconcile_condition_count(h))
        ]
        self.next_ms = _c.tf_reconcile_next_ms(h)

    def relay(self, name) -> Optional[RelayState]:
        """The relay named ``name``, or None."""
        for r in self.relays:
            if r.name == name:
                return r
        return None

    @locked
    def status_json(self):
        """The TURNPool ``status`` as JSON text (feed it back with :meth:`Observed.set_status`)."""
        return _c.tf_reconcile_status_json(self._handle)

    @locked
    def to_json(self):
        """The whole result as JSON text (actions, relays without configs, status)."""
        return _c.tf_reconcile_to_json(self._handle)

    @locked
    def ice_servers_json(self):
        """The RTCIceServer array of the published relays (no credentials), as JSON text."""
        return _c.tf_reconcile_ice_servers_json(self._handle)

    @locked
    def metrics(self, metrics=None):
        """The turnfleet_* samples of this result, added to ``metrics`` (a new :class:`Metrics` by default)."""
        m = metrics if metrics is not None else Metrics()
        with holding(m):
            _c.tf_reconcile_metrics(handle_of(m, Metrics, "metrics"), self._handle)
        return m

    def __repr__(self):
        return f"<turnfleet.Reconcile {len(self.relays)} relays, {len(self.actions)} actions>"


def reconcile(
    pool,
    nodes,
    observed=None,
    now_ms=0,
    secret=None,
    *,
    previous_secret=None,
    coturn_version=None,
    state_dir=None,
    log_file=None,
    log_dir=None,
    cli_port=0,
    cli_password=None,
    pressure_threshold=None,
    backoff_initial_ms=None,
    backoff_max_ms=None,
    allow_loopback_peers=False,
) -> Reconcile:
    """Reconcile once (``tf_reconcile_new``): a pure function of its inputs and ``now_ms``.

    ``secret`` (str, or a sequence, current first) is rendered into each relay's
    config; paths must be absolute. Raises InvalidArgument for an invalid pool or
    bad options (naming the field, never a secret).
    """
    if secret is None:
        raise TypeError("a shared secret is required")
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if previous_secret is not None:
        secrets.append(previous_secret)
    path = lambda p: None if p is None else os.fsdecode(p)  # noqa: E731
    with holding(pool, nodes, observed):
        h = _c.tf_py_reconcile_new(
            handle_of(pool, Pool, "pool"),
            handle_of(nodes, Nodes, "nodes"),
            None if observed is None else handle_of(observed, Observed, "observed"),
            int(now_ms),
            secrets,
            coturn_version,
            path(state_dir),
            path(log_file),
            int(cli_port),
            cli_password,
            path(log_dir),
            float(pressure_threshold or 0.0),
            int(backoff_initial_ms or 0),
            int(backoff_max_ms or 0),
            1 if allow_loopback_peers else 0,
        )
    return Reconcile(h)
