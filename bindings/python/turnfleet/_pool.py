"""TURNPool specs, node inventories and existing fleets."""

import json
import os
from dataclasses import dataclass

from . import core as _c
from ._handle import Handle, handle_of, holding, locked

_AF = {None: _c.TF_AF_INET, 4: _c.TF_AF_INET, 6: _c.TF_AF_INET6, "ipv4": _c.TF_AF_INET, "ipv6": _c.TF_AF_INET6}


def _parse(plain, limited, text, max_bytes, max_values, *fmt):
    """A parse with the default limits, or with those given (0 or None keeps one)."""
    if max_bytes is None and max_values is None:
        return plain(text, *fmt)
    data = text.encode() if isinstance(text, str) else text
    return limited(data, *fmt, int(max_bytes or 0), int(max_values or 0))


@dataclass(frozen=True)
class Listener:
    """One ``spec.listeners[]`` entry."""

    name: str
    protocol: str  # "udp", "tcp", "tls", "dtls"
    port: int


class Pool(Handle):
    """A parsed TURNPool with its defaults applied (``tf_pool``).

    Parsing fails only for malformed text (:class:`turnfleet.ProtocolError`);
    wrong values are problems that :meth:`validate` lists, all at once.
    """

    @classmethod
    def parse(cls, text, *, max_bytes=None, max_values=None):
        """Parse YAML or JSON (JSON when it starts with ``{``); str or bytes-like.
        ``max_bytes`` / ``max_values`` raise the input limits (16 MiB, one million values)."""
        return cls(_parse(_c.tf_pool_parse, _c.tf_py_pool_parse_with, text, max_bytes, max_values, _c.TF_FORMAT_AUTO))

    @classmethod
    def from_yaml(cls, text, *, max_bytes=None, max_values=None):
        """Parse a TURNPool (a whole object or just its spec) from YAML text."""
        return cls(_parse(_c.tf_pool_parse, _c.tf_py_pool_parse_with, text, max_bytes, max_values, _c.TF_FORMAT_YAML))

    @classmethod
    def from_json(cls, text, *, max_bytes=None, max_values=None):
        """Parse a TURNPool (a whole object or just its spec) from JSON text."""
        return cls(_parse(_c.tf_pool_parse, _c.tf_py_pool_parse_with, text, max_bytes, max_values, _c.TF_FORMAT_JSON))

    @classmethod
    def load(cls, path, *, max_bytes=None, max_values=None):
        """Read and parse a pool file (YAML or JSON)."""
        with open(path, "rb") as f:
            return cls.parse(f.read(), max_bytes=max_bytes, max_values=max_values)

    @locked
    def validate(self):
        """Every problem, in document order, as a list of ``(field path, message)``; [] when valid."""
        problems = _c.tf_py_pool_validate(self._handle)
        return [
            (_c.tf_problems_path(problems, i), _c.tf_problems_message(problems, i))
            for i in range(_c.tf_problems_count(problems))
        ]

    @property
    def valid(self):
        """True when :meth:`validate` finds no problem."""
        return not self.validate()

    @locked
    def to_json(self):
        """The pool with every default applied, as canonical JSON text (a whole TURNPool)."""
        return _c.tf_pool_to_json(self._handle)

    @property
    @locked
    def name(self):
        """``metadata.name`` ("" when unset). Settable, for a spec given alone."""
        return _c.tf_pool_name(self._handle)

    @name.setter
    @locked
    def name(self, value):
        _c.tf_pool_set_name(self._handle, value)

    @locked
    def set_name(self, name):
        """Set ``metadata.name`` (validated by :meth:`validate`)."""
        _c.tf_pool_set_name(self._handle, name)

    @property
    @locked
    def namespace(self):
        return _c.tf_pool_namespace(self._handle)

    @property
    @locked
    def replicas(self):
        return _c.tf_pool_replicas(self._handle)

    @property
    @locked
    def mode(self):
        """``"HostNetwork"``, ``"ExternalIPPool"``, ``"PodIP"`` or ``"PartitionedIP"``."""
        return _c.tf_mode_name(_c.tf_pool_mode(self._handle))

    @property
    @locked
    def family(self):
        """``"IPv4"``, ``"IPv6"`` or ``"DualStack"``."""
        return _c.tf_family_name(_c.tf_pool_family(self._handle))

    @property
    @locked
    def relay_port_range(self):
        """``(start, end)``, inclusive."""
        return _c.tf_pool_relay_port_range(self._handle)

    @property
    @locked
    def relays_per_node(self):
        return _c.tf_pool_relays_per_node(self._handle)

    @property
    @locked
    def listeners(self):
        """The listeners, as a list of :class:`Listener`."""
        h = self._handle
        return [
            Listener(
                _c.tf_pool_listener_name(h, i),
                _c.tf_protocol_name(_c.tf_pool_listener_protocol(h, i)),
                _c.tf_pool_listener_port(h, i),
            )
            for i in range(_c.tf_pool_listener_count(h))
        ]

    @property
    @locked
    def realm(self):
        return _c.tf_pool_realm(self._handle)

    @property
    @locked
    def coturn_version(self):
        return _c.tf_pool_coturn_version(self._handle)

    @property
    @locked
    def drain_timeout(self):
        """``spec.drainTimeout`` in seconds (float)."""
        return _c.tf_pool_drain_timeout_ms(self._handle) / 1000.0

    @locked
    def __repr__(self):
        if self.closed:
            return "<turnfleet.Pool closed>"
        return f"<turnfleet.Pool {self.namespace}/{self.name or '?'} {self.mode} {self.family}>"


class Nodes(Handle):
    """A node inventory from ``kubectl get nodes -o json`` (``tf_nodes``), nodes sorted by name."""

    @classmethod
    def from_json(cls, text, *, max_bytes=None, max_values=None):
        """Parse a NodeList (str or bytes-like); ``max_bytes`` / ``max_values`` raise the input limits."""
        return cls(_parse(_c.tf_nodes_parse, _c.tf_py_nodes_parse_with, text, max_bytes, max_values))

    @classmethod
    def load(cls, path, *, max_bytes=None, max_values=None):
        with open(path, "rb") as f:
            return cls.from_json(f.read(), max_bytes=max_bytes, max_values=max_values)

    @locked
    def __len__(self):
        return _c.tf_nodes_count(self._handle)

    @property
    @locked
    def names(self):
        """Node names, sorted."""
        h = self._handle
        return [_c.tf_nodes_name(h, i) for i in range(_c.tf_nodes_count(h))]

    def _index(self, node):
        if isinstance(node, int):
            if not 0 <= node < len(self):
                raise IndexError(f"node index {node} out of range")
            return node
        try:
            return self.names.index(node)
        except ValueError:
            from ._errors import NotFound

            raise NotFound(f"no node named {node!r}", _c.TF_ENOTFOUND) from None

    def eligible(self, pool):
        """Names of the nodes that may carry relays of ``pool`` (selector, schedulable, Ready)."""
        with holding(self, pool):
            h, p = self._handle, handle_of(pool, Pool, "pool")
            return [_c.tf_nodes_name(h, i) for i in range(_c.tf_nodes_count(h)) if _c.tf_nodes_eligible(h, i, p)]

    @locked
    def host_address(self, node, family=4):
        """The relay address a node offers (annotation, else ExternalIP, else InternalIP).

        ``node`` is a name or an index; ``family`` 4/6 or "ipv4"/"ipv6". Raises NotFound when it has none.
        """
        return _c.tf_nodes_host_address(self._handle, self._index(node), _AF[family])

    @locked
    def __repr__(self):
        return "<turnfleet.Nodes closed>" if self.closed else f"<turnfleet.Nodes {len(self)} nodes>"


class Existing(Handle):
    """Relays that exist already (``tf_existing``): this pool's keep their names; other pools' are claims."""

    def __init__(self, h=None):
        super().__init__(h if h is not None else _c.tf_existing_new())

    @classmethod
    def from_json(cls, text, *, max_bytes=None, max_values=None):
        """Parse an array of relay records, or an object with ``relays`` (``turnfleet plan -o json``)."""
        return cls(_parse(_c.tf_existing_parse, _c.tf_py_existing_parse_with, text, max_bytes, max_values))

    @classmethod
    def from_records(cls, records):
        """Build from dicts ``{"pool", "name", "identity", "allocations", "listenerPorts"}``
        (also accepted: ``listener_ports``); only ``identity`` is required."""
        fleet = cls()
        for r in records:
            fleet.add(
                r["identity"],
                name=r.get("name"),
                pool=r.get("pool"),
                allocations=r.get("allocations", -1),
                listener_ports=r.get("listenerPorts", r.get("listener_ports")),
            )
        return fleet

    @locked
    def add(self, identity, name=None, pool=None, allocations=-1, listener_ports=None):
        """Add one relay record. ``pool`` None means the pool being planned (then ``name`` is required)."""
        _c.tf_existing_add(
            self._handle, pool, name, identity, -1 if allocations is None else allocations, listener_ports
        )

    @locked
    def __len__(self):
        return _c.tf_existing_count(self._handle)

    @locked
    def __repr__(self):
        return "<turnfleet.Existing closed>" if self.closed else f"<turnfleet.Existing {len(self)} relays>"


def _fleet_for(existing):
    """(existing-relays handle or None, Existing to close or None) for the ``existing=`` argument of plan()."""
    from ._plan import Plan

    if existing is None:
        return None, None
    if isinstance(existing, Existing):
        return existing._handle, None
    if isinstance(existing, Plan):
        f = Existing.from_json(existing.to_json())
        return f._handle, f
    if isinstance(existing, (str, bytes, bytearray, memoryview)):
        f = Existing.from_json(existing)
        return f._handle, f
    if isinstance(existing, os.PathLike):
        with open(existing, "rb") as fh:
            f = Existing.from_json(fh.read())
        return f._handle, f
    if isinstance(existing, dict):
        f = Existing.from_json(json.dumps(existing))
        return f._handle, f
    f = Existing.from_records(existing)
    return f._handle, f
