"""The planner and the capacity maths."""

from dataclasses import dataclass
from typing import List, Optional, Tuple

from . import core as _c
from ._handle import Handle, handle_of, holding, locked
from ._pool import Listener, Nodes, Pool, _fleet_for


@dataclass(frozen=True)
class Relay:
    """One planned relay (a plain copy of ``tf_relay``)."""

    name: str  # <pool>-relay-xxxxx
    identity: str  # "ADDR[,ADDR]/START-END"
    node: str
    addresses: List[str]  # IPv4 first
    port_range: Tuple[int, int]  # (start, end), inclusive
    ports_total: int  # addresses x ports in its range
    listeners: List[Listener]  # the pool's listeners, on this relay's ports
    slice: int  # PartitionedIP slice index, else 0


@dataclass(frozen=True)
class Condition:
    """A plan condition: ``Placed`` or ``AddressConflict``."""

    type: str
    status: str  # "True" / "False"
    reason: str
    message: str


def _relay(r, listeners):
    return Relay(
        name=_c.tf_relay_name(r),
        identity=_c.tf_relay_identity(r),
        node=_c.tf_relay_node(r),
        addresses=[_c.tf_relay_address(r, i) for i in range(_c.tf_relay_address_count(r))],
        port_range=_c.tf_relay_port_range(r),
        ports_total=_c.tf_relay_ports_total(r),
        listeners=[Listener(l.name, l.protocol, _c.tf_relay_listener_port(r, i)) for i, l in enumerate(listeners)],
        slice=_c.tf_relay_slice(r),
    )


class Plan(Handle):
    """A computed plan (``tf_plan``): immutable. Its relays and conditions are plain
    Python objects, read once, and stay readable after ``close()``."""

    def __init__(self, h, listeners):
        super().__init__(h)
        self.pool_name = _c.tf_plan_pool_name(h)
        self.placeable = _c.tf_plan_placeable_count(h)
        # tf_plan_relay() is borrowed from the plan: copy while h is held here
        self.relays = [_relay(_c.tf_plan_relay(h, i), listeners) for i in range(_c.tf_plan_relay_count(h))]
        self.conditions = [Condition(*_c.tf_plan_condition(h, i)) for i in range(_c.tf_plan_condition_count(h))]

    def find(self, name) -> Optional[Relay]:
        """The relay named ``name``, or None."""
        for r in self.relays:
            if r.name == name:
                return r
        return None

    def condition(self, type) -> Optional[Condition]:
        """The condition of that type (``"Placed"``, ``"AddressConflict"``), or None."""
        for c in self.conditions:
            if c.type == type:
                return c
        return None

    @locked
    def to_json(self):
        """The plan as the ``turnfleet plan -o json`` text (``tf_plan_to_json``)."""
        return _c.tf_plan_to_json(self._handle)

    def __len__(self):
        return len(self.relays)

    def __iter__(self):
        return iter(self.relays)

    def __repr__(self):
        return f"<turnfleet.Plan {self.pool_name}: {len(self.relays)} relays, {self.placeable} placeable>"


def plan(pool, nodes, existing=None):
    """Plan the relays of ``pool`` on ``nodes`` (``tf_plan_new``).

    ``existing``: the relays that exist already, so that they keep their names and
    other pools' addresses are not reused: a :class:`Existing`, a previous :class:`Plan`,
    fleet JSON (str/bytes, or a path-like), a dict, or an iterable of record dicts.
    A plan that cannot place every replica is still a plan: see its conditions.
    Raises InvalidArgument for an invalid pool (the first problem in the message).
    """
    fleet, owned = _fleet_for(existing)
    try:
        with holding(pool, nodes, owned if owned is not None else existing):
            ph, nh = handle_of(pool, Pool, "pool"), handle_of(nodes, Nodes, "nodes")
            h = _c.tf_plan_new(ph, nh, fleet)
    finally:
        if owned is not None:
            owned.close()
    return Plan(h, pool.listeners)


class Capacity(Handle):
    """A capacity report (``tf_capacity``): immutable; its numbers stay readable after ``close()``."""

    def __init__(self, h):
        super().__init__(h)
        self.allocations = _c.tf_capacity_allocations(h)
        self.full_scale_allocations = _c.tf_capacity_full_scale_allocations(h)
        self.addresses_needed = _c.tf_capacity_addresses_needed(h)
        self.nodes_for_bandwidth = _c.tf_capacity_nodes_for_bandwidth(h)

    @locked
    def to_json(self):
        """The report as the ``turnfleet capacity -o json`` text (``tf_capacity_to_json``)."""
        return _c.tf_capacity_to_json(self._handle)

    def __repr__(self):
        return f"<turnfleet.Capacity {self.allocations} allocations, {self.full_scale_allocations} at full scale>"


def capacity(pool, nodes, target_allocations=None, headroom=0.2, session_kbps=None, node_mbps=None, existing=None):
    """The ports ``pool`` owns, and sizing advice (``tf_capacity_new``).

    ``nodes`` is a :class:`Nodes` (the pool is planned on it, with ``existing``) or a
    :class:`Plan` already made. ``target_allocations`` adds sizing at ``headroom``
    (0 <= h < 1); ``session_kbps`` with ``node_mbps`` adds the bandwidth bound.
    """
    if isinstance(nodes, Plan):
        if existing is not None:
            raise TypeError("existing= applies when planning: pass Nodes, not a Plan")
        p, made = nodes, None
    elif isinstance(nodes, Nodes):
        p = made = plan(pool, nodes, existing)
    else:
        raise TypeError(f"nodes must be Nodes or Plan, not {type(nodes).__name__}")
    try:
        with holding(pool, p):
            h = _c.tf_py_capacity_new(
                handle_of(pool, Pool, "pool"),
                p._handle,
                int(target_allocations or 0),
                float(headroom),
                float(session_kbps or 0.0),
                float(node_mbps or 0.0),
            )
    finally:
        if made is not None:
            made.close()
    return Capacity(h)


def relay_name(pool_name, identity):
    """The stable relay name for an identity: ``<pool>-relay-`` + 5 characters of its FNV-1a hash."""
    return _c.tf_relay_name_for(pool_name, identity)
