"""STUN/TURN messages (RFC 8489, RFC 8656), sans I/O.

Every function takes any bytes-like object (bytes, bytearray, memoryview, ...)
and returns plain Python values: a decoded message is a :class:`StunMessage`.
Decoding untrusted bytes never reads past them; a defect raises
:class:`turnfleet.ProtocolError` whose ``reason_code`` and ``offset`` say what
and where (``"LENGTH_MISMATCH"`` at byte 2).
"""

from dataclasses import dataclass
from typing import Optional, Tuple

from . import core as _c
from ._errors import AuthError, Error, IntegrityError, InvalidArgument, NotFound

MAX_MESSAGE = _c.tf_stun_max_message()
TID_SIZE = _c.TF_STUN_TID_SIZE
KEY_SIZE = _c.TF_STUN_KEY_SIZE

# methods
BINDING = _c.TF_STUN_BINDING
ALLOCATE = _c.TF_STUN_ALLOCATE
REFRESH = _c.TF_STUN_REFRESH
SEND = _c.TF_STUN_SEND
DATA = _c.TF_STUN_DATA
CREATE_PERMISSION = _c.TF_STUN_CREATE_PERMISSION
CHANNEL_BIND = _c.TF_STUN_CHANNEL_BIND

# classes
REQUEST = _c.TF_STUN_REQUEST
INDICATION = _c.TF_STUN_INDICATION
SUCCESS = _c.TF_STUN_SUCCESS
ERROR = _c.TF_STUN_ERROR

METHOD_NAMES = {
    BINDING: "Binding",
    ALLOCATE: "Allocate",
    REFRESH: "Refresh",
    SEND: "Send",
    DATA: "Data",
    CREATE_PERMISSION: "CreatePermission",
    CHANNEL_BIND: "ChannelBind",
}
CLASS_NAMES = {REQUEST: "request", INDICATION: "indication", SUCCESS: "success", ERROR: "error"}

# attribute types: MAPPED_ADDRESS = 0x0001, ..., and their names ("MAPPED-ADDRESS")
ATTRIBUTE_NAMES = {}
for _k in dir(_c):
    if _k.startswith("TF_STUN_ATTR_"):
        _name = _k[len("TF_STUN_ATTR_"):]
        globals()[_name] = getattr(_c, _k)
        ATTRIBUTE_NAMES[getattr(_c, _k)] = _name.replace("_", "-")
del _k, _name

_ADDRESS_TYPES = {
    _c.TF_STUN_ATTR_MAPPED_ADDRESS,
    _c.TF_STUN_ATTR_XOR_PEER_ADDRESS,
    _c.TF_STUN_ATTR_XOR_RELAYED_ADDRESS,
    _c.TF_STUN_ATTR_XOR_MAPPED_ADDRESS,
    _c.TF_STUN_ATTR_ALTERNATE_SERVER,
}


@dataclass(frozen=True)
class StunAttribute:
    """One attribute, in message order."""

    type: int
    value: bytes  # without padding
    address: Optional[Tuple[str, int]] = None  # (address, port) for address attributes, XOR decoded

    @property
    def name(self):
        """``"XOR-RELAYED-ADDRESS"``, or ``"0x802B"`` for a type this module does not name."""
        return ATTRIBUTE_NAMES.get(self.type, f"0x{self.type:04X}")


@dataclass(frozen=True)
class StunMessage:
    """A decoded STUN message (a plain copy: no C handle behind it)."""

    method: int
    cls: int  # REQUEST, INDICATION, SUCCESS or ERROR ("class" is a keyword)
    transaction_id: bytes  # 12 bytes
    attributes: Tuple[StunAttribute, ...]
    error: Optional[Tuple[int, str]]  # ERROR-CODE as (code, reason), else None
    data: bytes  # the whole message

    @property
    def method_name(self):
        return METHOD_NAMES.get(self.method, f"0x{self.method:03X}")

    @property
    def class_name(self):
        return CLASS_NAMES[self.cls]

    def find(self, type) -> Optional[StunAttribute]:
        """The first attribute of ``type``, or None."""
        for a in self.attributes:
            if a.type == type:
                return a
        return None

    def get(self, type) -> Optional[bytes]:
        """The value of the first attribute of ``type``, or None."""
        a = self.find(type)
        return None if a is None else a.value

    def address(self, type) -> Optional[Tuple[str, int]]:
        """(address, port) of the first attribute of ``type`` (XOR-RELAYED-ADDRESS, ...), or None."""
        a = self.find(type)
        return None if a is None else a.address

    def text(self, type) -> Optional[str]:
        """A text attribute (REALM, NONCE, SOFTWARE, USERNAME) as str, or None."""
        v = self.get(type)
        return None if v is None else v.rstrip(b"\0").decode("utf-8", "replace")

    def u32(self, type) -> Optional[int]:
        """A 32-bit attribute (LIFETIME, ...), or None."""
        v = self.get(type)
        return None if v is None or len(v) != 4 else int.from_bytes(v, "big")


def _message(h):
    attrs = []
    seen = {}
    for i in range(_c.tf_stun_msg_attr_count(h)):
        t, value = _c.tf_stun_msg_attr(h, i)
        addr = None
        if t in _ADDRESS_TYPES:
            n = seen.get(t, 0)
            seen[t] = n + 1
            try:
                addr = tuple(_c.tf_stun_msg_address(h, t, n))
            except Error:
                addr = None  # an address attribute with a bad family: bytes only
        attrs.append(StunAttribute(t, value, addr))
    try:
        code, reason = _c.tf_stun_msg_error(h)
        error = (code, reason)
    except NotFound:
        error = None
    return StunMessage(
        method=_c.tf_stun_msg_method(h),
        cls=_c.tf_stun_msg_class(h),
        transaction_id=_c.tf_py_stun_msg_tid(h),
        attributes=tuple(attrs),
        error=error,
        data=_c.tf_py_stun_msg_bytes(h),
    )


def _method(method):
    if isinstance(method, str):
        for k, v in METHOD_NAMES.items():
            if v.lower() == method.lower().replace("-", "").replace("_", ""):
                return k
        raise InvalidArgument(f"unknown STUN method {method!r}", _c.TF_EINVALID)
    return int(method)


def _class(cls):
    if isinstance(cls, str):
        for k, v in CLASS_NAMES.items():
            if v == cls.lower():
                return k
        raise InvalidArgument(f"unknown STUN class {cls!r}", _c.TF_EINVALID)
    return int(cls)


def decode(data) -> StunMessage:
    """Decode one message (exactly ``len(data)`` bytes, as one datagram): structure only,
    FINGERPRINT when present; MESSAGE-INTEGRITY is not checked (see :func:`check_integrity`)."""
    return _message(_c.tf_stun_decode(data))


def validate_response(data, transaction_id, method, key=None) -> StunMessage:
    """Decode and validate a response to a request this side sent.

    Checks structure, class (success or error), ``method`` (a number or a name such
    as ``"Allocate"``), ``transaction_id`` (12 bytes), the required attributes and,
    with ``key`` (the 16-byte long-term key of an authenticated request), the
    MESSAGE-INTEGRITY. Returns the decoded message; every defect raises
    :class:`turnfleet.ProtocolError` naming it (``reason_code``): a wrong or missing
    MESSAGE-INTEGRITY raises :class:`turnfleet.IntegrityError`, which is also an
    AuthError.
    """
    try:
        h = _c.tf_stun_validate_response(data, transaction_id, _method(method), key)
    except AuthError as e:
        if isinstance(e, IntegrityError):
            raise
        raise IntegrityError(e.message, e.code) from None
    return _message(h)


def check_integrity(data, key):
    """Check the MESSAGE-INTEGRITY of raw message bytes with ``key`` (constant time).

    Returns None when it is valid; raises AuthError on a mismatch, NotFound when
    there is none, ProtocolError for malformed bytes.
    """
    _c.tf_stun_check_integrity(data, key)


def long_term_key(username, realm, password) -> bytes:
    """The long-term credential key MD5(username ":" realm ":" password), 16 bytes."""
    return _c.tf_stun_long_term_key(username, realm, password)


def encode(method, cls=REQUEST, attributes=(), transaction_id=None, key=None, fingerprint=False) -> bytes:
    """Build a message.

    ``attributes``: (type, value) pairs in order, where value is bytes-like, an int
    (a 32-bit attribute) or an (address, port) tuple (an XOR address attribute).
    ``transaction_id`` None draws a fresh one. ``key`` appends MESSAGE-INTEGRITY,
    ``fingerprint`` FINGERPRINT.
    """
    h = _c.tf_stun_msg_new(_method(method), _class(cls), transaction_id)
    for t, value in attributes:
        if isinstance(value, int):
            _c.tf_stun_msg_add_u32(h, t, value)
        elif isinstance(value, tuple):
            _c.tf_stun_msg_add_xor_address(h, t, value[0], value[1])
        else:
            _c.tf_stun_msg_add(h, t, value)
    if key is not None:
        _c.tf_stun_msg_add_integrity(h, key)
    if fingerprint:
        _c.tf_stun_msg_add_fingerprint(h)
    return _c.tf_py_stun_msg_bytes(h)


def frame_length(data) -> int:
    """On a stream (TCP/TLS): the length of the frame (STUN or ChannelData) at the start of ``data``.

    Raises BufferTooSmall with fewer than 4 bytes, ProtocolError when it is neither.
    """
    return _c.tf_stun_frame_length(data)


def channel_data_encode(channel, data, pad=False) -> bytes:
    """A ChannelData frame (``pad`` to 4 bytes, as TCP and TLS need)."""
    return _c.tf_stun_channel_data_encode(channel, data, 1 if pad else 0)


def channel_data_decode(data) -> Tuple[int, bytes]:
    """``(channel, payload)`` of a ChannelData frame."""
    channel, payload = _c.tf_stun_channel_data_decode(data)
    return channel, payload
