"""coturn ``turnserver.conf`` rendering."""

import os

from . import core as _c
from ._handle import handle_of, holding

#: feature bits of :func:`coturn_features`
GRACEFUL_SIGTERM = _c.TF_COTURN_GRACEFUL_SIGTERM
ALLOCATIONS_BY_TYPE = _c.TF_COTURN_ALLOCATIONS_BY_TYPE
DRAIN = _c.TF_COTURN_DRAIN
PROMETHEUS_ADDRESS = _c.TF_COTURN_PROMETHEUS_ADDRESS
DTLS_OPT_IN = _c.TF_COTURN_DTLS_OPT_IN
CLI_OPT_IN = _c.TF_COTURN_CLI_OPT_IN
BUILD_PROMETHEUS = _c.TF_COTURN_BUILD_PROMETHEUS


def _path(p):
    return None if p is None else os.fsdecode(p)


def render_coturn(
    pool,
    plan,
    relay_name,
    secret,
    coturn_version="4.6.1",
    *,
    previous_secret=None,
    state_dir=None,
    log_file=None,
    cli_port=0,
    cli_password=None,
    prometheus_port=0,
    cert_file=None,
    key_file=None,
    allow_loopback_peers=False,
    prometheus=False,
):
    """The ``turnserver.conf`` of one relay of ``plan`` (``tf_coturn_render``), as text.

    The text holds the shared secret(s): write it 0600 and never log it.
    ``secret`` is the current shared secret (or a sequence of secrets, current
    first); ``previous_secret`` adds the one being rotated out. ``relay_name`` is
    a name from the plan or a :class:`Relay`. ``coturn_version`` is the coturn
    the config is for (default "4.6.1", Debian 12's); None renders for the pool's
    ``spec.dataplane.coturnVersion``. Paths must be
    absolute. ``allow_loopback_peers`` is for tests on loopback only.
    ``prometheus`` renders coturn's own exporter (coturn >= 4.6.3 built with it:
    Debian's builds are not, see :func:`coturn_build_features`).
    Raises NotFound for an unknown relay, InvalidArgument naming a bad option.
    """
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if previous_secret is not None:
        secrets.append(previous_secret)
    from ._plan import Plan
    from ._pool import Pool

    name = getattr(relay_name, "name", relay_name)
    with holding(pool, plan):
        return _c.tf_py_coturn_render(
            handle_of(pool, Pool, "pool"),
            handle_of(plan, Plan, "plan"),
            name,
            secrets,
            coturn_version,
            _path(state_dir),
            _path(log_file),
            cli_port,
            cli_password,
            prometheus_port,
            _path(cert_file),
            _path(key_file),
            1 if allow_loopback_peers else 0,
            1 if prometheus else 0,
        )


def coturn_build_features(help_text):
    """What a turnserver build has (BUILD_PROMETHEUS), from its ``turnserver -h`` text."""
    return _c.tf_coturn_build_features(help_text)


def coturn_version(text):
    """Parse a coturn version ("4.6.1", "4.18.0-r0") to ``(major, minor, patch)``."""
    v = _c.tf_coturn_version_parse(text)
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def coturn_features(version):
    """Feature bits (GRACEFUL_SIGTERM, DRAIN, ...) of a version: text or ``(major, minor, patch)``."""
    if isinstance(version, str):
        version = coturn_version(version)
    major, minor, patch = version
    return _c.tf_coturn_features((major << 16) | (minor << 8) | patch)


def config_hash(text):
    """The config hash: lowercase hex SHA-256 of a rendered config."""
    return _c.tf_coturn_config_hash(text)
