#!/usr/bin/env python3
"""A minimal TURN reference client (Python standard library only), used by
bench/probe as the baseline: N sequential cycles of unauthenticated Allocate
(401 challenge), authenticated Allocate and Refresh(lifetime 0), each on a new
UDP socket, with TURN REST credentials.

usage: ref_client.py HOST PORT SECRET_FILE COUNT
prints: a JSON object {"allocations": n, "failures": {code: n}, "elapsedS": s}
"""
import base64
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time

COOKIE = 0x2112A442
ALLOCATE, REFRESH = 0x003, 0x004


def msg_type(method, cls):
    return (method & 0x000F) | ((method & 0x0070) << 1) | ((method & 0x0F80) << 2) | ((cls & 1) << 4) | ((cls & 2) << 7)


def attr(t, v):
    return struct.pack("!HH", t, len(v)) + v + b"\0" * ((4 - len(v) % 4) % 4)


def build(method, attrs, key=None):
    tid = os.urandom(12)
    body = b"".join(attr(t, v) for t, v in attrs)
    if key is not None:
        head = struct.pack("!HHI", msg_type(method, 0), len(body) + 24, COOKIE) + tid
        mi = hmac.new(key, head + body, hashlib.sha1).digest()
        body += attr(0x0008, mi)
    return tid, struct.pack("!HHI", msg_type(method, 0), len(body), COOKIE) + tid + body


def parse(data, tid):
    if len(data) < 20:
        raise ValueError("short response")
    t, length, cookie = struct.unpack("!HHI", data[:8])
    if cookie != COOKIE or data[8:20] != tid or 20 + length != len(data):
        raise ValueError("not our response")
    attrs, off = {}, 20
    while off + 4 <= len(data):
        at, al = struct.unpack("!HH", data[off:off + 4])
        attrs.setdefault(at, data[off + 4:off + 4 + al])
        off += 4 + al + ((4 - al % 4) % 4)
    code = 0
    if 0x0009 in attrs:
        e = attrs[0x0009]
        code = (e[2] & 7) * 100 + e[3]
    return code, attrs


def transact(sock, addr, method, attrs, key=None):
    tid, raw = build(method, attrs, key)
    for attempt in range(7):
        sock.sendto(raw, addr)
        sock.settimeout(0.5 * (2 ** attempt))
        try:
            while True:
                data, _ = sock.recvfrom(4096)
                try:
                    return parse(data, tid)
                except ValueError:
                    continue
        except socket.timeout:
            continue
    raise TimeoutError("no response")


def cycle(host, port, secret, user="ref-client"):
    # 437: the kernel handed out a source port whose previous allocation coturn
    # still remembers (about 1 s after Refresh(0)); start again on a new socket,
    # keeping the refused one open so that the next socket gets another port.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    refused = []
    try:
        for _ in range(5):
            sock = socket.socket(family, socket.SOCK_DGRAM)
            code = cycle_on(sock, (host, port), secret, user)
            if code != 437:
                sock.close()
                return code
            refused.append(sock)
        return code
    finally:
        for sock in refused:
            sock.close()


def cycle_on(sock, addr, secret, user):
    transport = [(0x0019, struct.pack("!B3x", 17))]
    code, attrs = transact(sock, addr, ALLOCATE, transport)
    if code != 401:
        return code
    realm, nonce = attrs[0x0014], attrs[0x0015]
    username = f"{int(time.time()) + 600}:{user}".encode()
    password = base64.b64encode(hmac.new(secret, username, hashlib.sha1).digest())
    key = hashlib.md5(username + b":" + realm + b":" + password).digest()
    auth = [(0x0006, username), (0x0014, realm), (0x0015, nonce)]
    code, _ = transact(sock, addr, ALLOCATE, transport + auth, key)
    if code != 0:
        return code
    code, _ = transact(sock, addr, REFRESH, [(0x000D, struct.pack("!I", 0))] + auth, key)
    return code


def main():
    host, port, secret_file, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    with open(secret_file, "rb") as f:
        secret = f.read().rstrip(b"\r\n")
    failures = {}
    start = time.monotonic()
    for _ in range(count):
        try:
            code = cycle(host, port, secret)
        except TimeoutError:
            code = "timeout"
        if code != 0:
            failures[str(code)] = failures.get(str(code), 0) + 1
    elapsed = time.monotonic() - start
    print(json.dumps({"allocations": count - sum(failures.values()), "failures": failures, "elapsedS": round(elapsed, 3)}))


if __name__ == "__main__":
    main()
