"""RFC 7065 ``turn:`` / ``turns:`` URIs."""

from dataclasses import dataclass

from . import core as _c

_HOST_TYPES = {_c.TF_URI_HOST_IPV4: "ipv4", _c.TF_URI_HOST_IPV6: "ipv6", _c.TF_URI_HOST_NAME: "name"}
_MODES = {
    _c.TF_URI_MODE_UDP: "udp",
    _c.TF_URI_MODE_TCP: "tcp",
    _c.TF_URI_MODE_TLS: "tls",
    _c.TF_URI_MODE_DTLS: "dtls",
    _c.TF_URI_MODE_UNSUPPORTED: "unsupported",
}


@dataclass(frozen=True)
class TurnUri:
    """A parsed ``turn:`` URI."""

    scheme: str  # "turn" or "turns"
    host: str  # as written, without brackets
    port: int  # explicit, else 3478 (turn) / 5349 (turns)
    transport: str  # explicit, else "udp" (turn) / "tcp" (turns)
    secure: bool  # turns:
    host_type: str  # "ipv4", "ipv6" or "name"
    port_explicit: bool
    transport_explicit: bool
    mode: str  # what to open: "udp", "tcp", "tls", "dtls" (not probed) or "unsupported"


def parse_uri(text):
    """Parse a ``turn:``/``turns:`` URI; InvalidArgument with ``reason_code`` (``BAD_PORT``, ...) and ``offset``."""
    u = _c.tf_uri_parse(text)
    return TurnUri(
        scheme=_c.tf_uri_scheme(u),
        host=_c.tf_uri_host(u),
        port=_c.tf_uri_port(u),
        transport=_c.tf_uri_transport(u),
        secure=bool(_c.tf_uri_secure(u)),
        host_type=_HOST_TYPES.get(_c.tf_uri_host_kind(u), "name"),
        port_explicit=bool(_c.tf_uri_port_explicit(u)),
        transport_explicit=bool(_c.tf_uri_transport_explicit(u)),
        mode=_MODES.get(_c.tf_uri_open_mode(u), "unsupported"),
    )


def format_uri(address, port, transport="udp", secure=False):
    """``turn:203.0.113.7:3478?transport=udp`` for an IP address (IPv6 bracketed)."""
    return _c.tf_uri_format(1 if secure else 0, address, port, transport)
