"""TURN REST API credentials (coturn ``use-auth-secret``) and secret files."""

import os
import time

from . import core as _c
from ._errors import InvalidArgument


def _sep(separator):
    if separator is None:
        return 0
    if isinstance(separator, str):
        if len(separator) != 1 or ord(separator) > 127:
            raise InvalidArgument("separator must be one ASCII character", _c.TF_EINVALID)
        return ord(separator)
    return int(separator)


def mint_credentials(secret, user, ttl, now=None, separator=":"):
    """A credential valid for ``ttl`` seconds from ``now`` (Unix time; None: the clock).

    Returns ``(username, password)``: username ``<expiry>:<user>`` and password
    base64(HMAC-SHA1(secret, username)). An empty ``user`` gives the bare expiry.
    """
    if now is None:
        now = time.time()
    expiry = int(now) + int(ttl)
    username, password = _c.tf_cred_mint(secret, user, expiry, _sep(separator))
    return username, password


def credential_password(secret, username):
    """The password for an existing REST username."""
    return _c.tf_cred_password(secret, username)


def verify_credentials(secret, username, password, now=None, separator=":"):
    """Check a credential as coturn would; returns None when it is valid.

    Raises AuthError for a wrong password or an expired username (the message
    says which) and InvalidArgument for a username without an expiry.
    """
    if now is None:
        now = time.time()
    _c.tf_cred_verify(secret, username, password, int(now), _sep(separator))


def read_secret(path):
    """A shared secret from a file: its one line without the line ending.

    Raises InputOutputError when the file cannot be read, InvalidArgument when it
    is empty or holds more than one line (the message never quotes it).
    """
    return _c.tf_py_cred_secret_read(os.fsdecode(path))
