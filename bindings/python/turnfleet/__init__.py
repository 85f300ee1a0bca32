"""Turnfleet: run coturn as a fleet of TURN relays (Python bindings of libturnfleet).

    import turnfleet
    pool = turnfleet.Pool.from_yaml(open("pool.yaml").read())
    nodes = turnfleet.Nodes.from_json(open("nodes.json").read())
    plan = turnfleet.plan(pool, nodes)
    for relay in plan.relays:
        print(relay.name, relay.addresses, relay.port_range)

Failures raise :class:`turnfleet.Error` subclasses (which are also the fitting
built-in exceptions: InvalidArgument is a ValueError, Timeout a TimeoutError...).
Objects that own a C handle (Pool, Nodes, Existing, Plan, Capacity, Allocation,
Metrics, Observed, Reconcile, IssuerPool) have ``close()`` and work with ``with``, and a
lock: calls from many threads on one object run one at a time, so no sequence
of calls can crash; results are plain Python objects.
Blocking calls (probes) release the GIL. API: bindings/python/README.md.
"""

from . import core as _core_proxy  # noqa: F401  (loads the extension turnfleet._core)
from . import stun
from ._coturn import coturn_build_features, coturn_features, coturn_version, config_hash, render_coturn
from ._cred import credential_password, mint_credentials, read_secret, verify_credentials
from ._errors import (
    AuthError,
    BufferTooSmall,
    CallbackError,
    ConflictError,
    Error,
    ExpiredError,
    GenericError,
    InputOutputError,
    IntegrityError,
    InvalidArgument,
    NetworkError,
    NotFound,
    OutOfMemory,
    ProtocolError,
    ResourceExhausted,
    Timeout,
    UnavailableError,
    RefusedError,
    error_class,
)
from ._issuer import IssuerAnswer, IssuerPool
from ._metrics import Metrics, Sample, parse_metrics
from ._plan import Capacity, Condition, Plan, Relay, capacity, plan, relay_name
from ._pool import Existing, Listener, Nodes, Pool
from ._probe import STAGES, Allocation, ProbeResult, allocate, probe, probe_many
from ._reconcile import Action, Observed, Reconcile, ReconcileCondition, RelayState, reconcile
from ._uri import TurnUri, format_uri, parse_uri
from .core import tf_error_name as error_name
from .core import tf_strerror as strerror

#: the libturnfleet loaded at run time ("0.2.0")
__version__ = _core_proxy.tf_version_string()
#: the libturnfleet these bindings were built against
BUILD_VERSION = _core_proxy.TF_VERSION_STRING


def version():
    """The run-time library version as ``(major, minor, patch)``."""
    return tuple(_core_proxy.tf_version())


def canonical_address(text):
    """An IPv4 or IPv6 address in canonical form (``"2001:db8:0::7"`` -> ``"2001:db8::7"``)."""
    return _core_proxy.tf_addr_parse(text)


def parse_port_range(text):
    """``"START-END"`` -> ``(start, end)`` (inclusive, 1-65535, start <= end)."""
    return _core_proxy.tf_port_range_parse(text)


# The ABI may change with each 0.x minor: refuse a library of another one.
if version()[:2] != tuple(int(x) for x in BUILD_VERSION.split(".")[:2]):
    raise ImportError(f"turnfleet: built for libturnfleet {BUILD_VERSION}, loaded {__version__}")

__all__ = [
    "Action",
    "AuthError",
    "Allocation",
    "BufferTooSmall",
    "BUILD_VERSION",
    "CallbackError",
    "Capacity",
    "Condition",
    "ConflictError",
    "Error",
    "Existing",
    "ExpiredError",
    "GenericError",
    "InputOutputError",
    "IntegrityError",
    "InvalidArgument",
    "IssuerAnswer",
    "IssuerPool",
    "UnavailableError",
    "RefusedError",
    "Listener",
    "Metrics",
    "NetworkError",
    "Nodes",
    "NotFound",
    "Observed",
    "OutOfMemory",
    "Plan",
    "Pool",
    "ProbeResult",
    "ProtocolError",
    "Reconcile",
    "ReconcileCondition",
    "Relay",
    "RelayState",
    "ResourceExhausted",
    "Sample",
    "STAGES",
    "Timeout",
    "TurnUri",
    "allocate",
    "canonical_address",
    "capacity",
    "config_hash",
    "coturn_build_features",
    "coturn_features",
    "coturn_version",
    "credential_password",
    "error_class",
    "error_name",
    "format_uri",
    "mint_credentials",
    "parse_metrics",
    "parse_port_range",
    "parse_uri",
    "plan",
    "probe",
    "probe_many",
    "reconcile",
    "read_secret",
    "relay_name",
    "render_coturn",
    "stun",
    "verify_credentials",
    "version",
    "__version__",
]
