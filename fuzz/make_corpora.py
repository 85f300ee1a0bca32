#!/usr/bin/env python3
"""Regenerate the seed corpora of the fuzz targets from tests/data/vectors.

Usage: python3 fuzz/make_corpora.py   (from anywhere; standard library only)

fuzz/corpora/stun_decode/: every STUN message and ChannelData frame of the vector
files (RFC 5769, the coturn 4.6.1 captures, each message of a captured stream, the
malformed responses). fuzz/corpora/uri_parse/: every URI of turn_uris.jsonl plus a
few more shapes. fuzz/corpora/metrics_parse/: the coturn scrapes of tests/data/metrics
and a few malformed shapes. fuzz/corpora/coturn_cli/: the captured coturn 4.6.1 CLI
session of tests/data/coturn and telnet negotiation shapes. pool_yaml/, pool_json/:
the pools of tests/data/pools, examples/pools and tests/data/invalid. nodes_parse/: the
NodeLists of tests/data and examples. fleet_parse/: relay records and plan outputs.
status_parse/: previous statuses. secret_read/, addresses_parse/, coturn_version/,
port_range/: a few good and bad shapes each. fuzz/corpora/kube_config/,
kube_watch/, kube_status/: kubeconfig files (data and file forms, refused exec and
auth-provider users, malformed ones), watch streams (the first byte picks the chunk
size: every event type, CRLF, a line cut short, an oversized line) and Status bodies
(the first byte picks the HTTP code and a Retry-After header). fuzz/corpora/admission_review/:
the reviews captured from the stand-in (tests/data/admission) and malformed envelopes;
vantage_condition/: <pool>-vantage ConfigMaps (the first byte picks "now"); issuer_pool/: an
iceServers.json and a pool status split by a NUL byte (good pools, partitioned relays, draining,
unready and full relays, malformed documents). Files are named by the
SHA-1 of their content, so re-running only adds files; crash reproducers added by
hand (same naming) are kept.
"""
import hashlib
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, '..', 'tests', 'data', 'vectors')

EXTRA_METRICS = [
    b'turn_total_allocations 3\n', b'# TYPE a gauge\na{b="c\\"d",e="\\n"} -Inf 123\n',
    b'a{b="c"} 1\na{b="c"} 2\n', b'a{b="unterminated} 1\n', b'a 1e999\r\n', b'# HELP a x\\ny\n# TYPE a counter\n',
    b'a{} NaN\n', b'x_bucket{le="+Inf"} 1\n# TYPE x histogram\n',
]

EXTRA_CLI = [
    b'\xff\xfb\x01\xff\xfb\x03\xff\xfd\x1f\xff\xfa\x1f\x00\x50\x00\x18\xff\xf0Enter password: ',
    b'  total-current-allocs: 3\r\n> ', b'total-current-allocs: 1\xff\xf9' b'2\r\n', b'total-current-allocs: x\n',
    b'total-current-allocs: 99999999999999999999\n', b'\xff', b'\xff\xfa', b'total-current-allocs: 4',
]

EXTRA_URIS = [
    'turn:host:0', 'turn:host?transport=', 'stun:host', 'turn', 'turn:[]', 'turn:[::1]:',
    'turns:[2001:db8::7]:5349?transport=tcp', 'turn:ho%2Dst:1?transport=sctp', 'TURNS:[::ffff:192.0.2.1]',
    'turn:203.0.113.07', 'turn:a:99999999999999999999',
]


def load(name):
    with open(os.path.join(VECTORS, name), encoding='utf-8') as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith('#'):
                yield json.loads(line)


def split_stream(buf):
    """STUN messages back to back (a captured TCP stream)."""
    off, out = 0, []
    while off + 4 <= len(buf):
        n = 20 + struct.unpack('!H', buf[off + 2:off + 4])[0]
        out.append(buf[off:off + n])
        off += n
    return out


def write(directory, blobs):
    os.makedirs(directory, exist_ok=True)
    added = 0
    for b in blobs:
        path = os.path.join(directory, hashlib.sha1(b).hexdigest())
        if not os.path.exists(path):
            with open(path, 'wb') as f:
                f.write(b)
            added += 1
    return added


EXTRA_POOL_JSON = [
    b'{"metadata": {"name": "s\\u0000a"}}', b'{"a": 1, "a": 2}', b'{"a": {"b": 1, "\\u0062": 2}}',
    b'{"spec": {"auth": {"realm": "\xff"}}}', b'[' * 70 + b']' * 70, b'{"spec": {"replicas": 1e999}}',
]
EXTRA_POOL_YAML = [
    b'a: 1\na: 2\n', b'metadata: {name: "s\\0a"}\n', b'a: &x 1\nb: *x\n', b'a: 1\n---\nb: 2\n',
    b'spec: {listeners: [{name: a, name: b}]}\n', b'\xc0\xae: 1\n', b'- ' * 70 + b'1\n',
]
EXTRA_FLEET = [
    b'[]', b'{"pool": "f", "relays": []}',
    b'[{"pool": "f", "name": "f-relay-bcdfg", "identity": "192.0.2.1/50000-50099", "allocations": 3}]',
    b'[{"pool": "o", "identity": "192.0.2.2/50000-50049", "listenerPorts": [3478, 5349]}]',
    b'[{"pool": "f", "name": "f-relay-bcdfg", "identity": "192.0.2.1,2001:db8::1/50000-50099"}]',
    b'[{"identity": "x/1-2"}]', b'{"relays": [{"name": "a", "identity": "192.0.2.1/2-1"}]}',
]
EXTRA_STATUS = [
    b'{}', b'{"conditions": []}',
    b'{"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"}]}',
    b'{"kind": "TURNPool", "status": {"conditions": [{"type": "Ready", "status": "False",'
    b' "lastTransitionTime": "2024-01-02T03:04:05.123+01:00"}]}}',
    b'{"conditions": [{"type": "A", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"},'
    b' {"type": "A", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"}]}',
]
EXTRA_SECRET = [b'secret', b'secret\n', b'secret\r\n', b'', b'\n', b'a\nb\n', b'a\x00b', b'x' * 4097, b'x' * 4096 + b'\n']
EXTRA_ADDRESSES = [
    b'127.0.0.11-13', b'127.0.0.11,127.0.0.12', b'fd00::1-3', b'127.0.0.11-13,127.0.0.20,fd00::1-3', b'127.0.0.0-255',
    b'10.0.0.5-4', b'::-ffff', b' 127.0.0.1', b',', b'127.0.0.1-', b'fd00::1-x',
]
EXTRA_VERSIONS = [b'4.6.1', b'4.18.0', b'4.18.0-r0', b'4.6.3-alpine', b'255.255.255', b'256.0.0', b'4.6', b'4.6.1-',
                  b'04.06.01', b'4.6.1 ', b'4.6.1-a+b~c_d.e']
EXTRA_REVIEWS = [
    b'{}', b'[]', b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "operation": "CREATE",'
    b' "resource": {"group": "turnfleet.hzmi.dev", "resource": "turnpools"}, "object": {"spec": {"replicas": 1e999}}}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "operation": "UPDATE",'
    b' "subResource": "scale", "resource": {"group": "turnfleet.hzmi.dev", "resource": "turnpools"},'
    b' "name": "other", "namespace": "default", "object": {"spec": {"replicas": 9}}}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "uid": "v"}}',
]
def _issuer(ice, status):
    return json.dumps(ice).encode() + b'\x00' + (status if isinstance(status, bytes) else json.dumps(status).encode())


def _relay(name, addr, ready=True, draining=False, used=0, total=100, state="Ready"):
    return {"name": name, "relayAddress": addr, "ready": ready, "draining": draining, "portsInUse": used,
            "portsTotal": total, "state": state}


_ICE2 = [{"urls": ["turn:192.0.2.1:3478?transport=udp", "turn:192.0.2.1:3478?transport=tcp"]},
         {"urls": ["turns:[2001:db8::2]:5349?transport=tcp", "turn:192.0.2.2:3478"]}]
EXTRA_ISSUER = [
    _issuer(_ICE2, {"relays": [_relay("p-relay-a", "192.0.2.1"), _relay("p-relay-b", "192.0.2.2,2001:db8::2", used=None)]}),
    _issuer(_ICE2, {"status": {"relays": [_relay("p-relay-a", "192.0.2.1", draining=True),
                                          _relay("p-relay-b", "192.0.2.2,2001:db8::2", ready=False)]}}),
    _issuer([{"urls": ["turn:192.0.2.9:3479"]}, {"urls": ["turn:192.0.2.9:3480"]}],
            {"relays": [_relay("p-relay-a", "192.0.2.9", used=100), _relay("p-relay-b", "192.0.2.9", state="Full"),
                        _relay("p-relay-c", "192.0.2.9", used=95)]}),
    _issuer([{"urls": ["turn:relay.example.com"]}], {"kind": "TURNPool"}),
    _issuer([{"urls": "turn:192.0.2.1"}], {"relays": []}),
    _issuer([{"urls": ["http://x"]}], {"relays": [1]}),
    _issuer([], {"relays": [{"name": "a", "relayAddress": "x", "ready": True, "portsTotal": 1}]}),
    _issuer(_ICE2, b'{"relays":[{"name":"a","name":"b"}]}'),
    b'[{"urls":["turn:192.0.2.1"]}', b'\x00{', b'[]\x00[]',
]


def _vantage(time, results):
    import json
    return b'\x80' + json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p-vantage"},
                                  "data": {"runner": "r", "time": time, "results.json": results}}).encode()


EXTRA_VANTAGE = [
    b'\x80{}', b'\x80{"data": {}}', b'\x00' + b'{"data": {"runner": "r", "time": "2025-12-01T11:00:00Z", "results.json": "[]"}}',
    _vantage("2025-12-01T11:59:00Z", '[{"uri": "turn:192.0.2.1:3478", "ok": true}]'),
    _vantage("2025-12-01T11:59:00.123+01:00", '[{"uri": "turn:192.0.2.1:3478", "ok": false, "stage": "allocate",'
             ' "errorCode": 401, "errorReason": "Unauthorized"}, {"uri": "turn:192.0.2.2", "ok": true}]'),
    _vantage("2025-13-01T11:59:00Z", '[]'), _vantage("2025-12-01T11:59:00Z", '[{"ok": 1}]'),
    _vantage("2025-12-01T11:59:00Z", '[1,'),
]
EXTRA_RANGES = [b'49152-65535', b'1-1', b'0-10', b'10-1', b'1-65536', b'049152-49200', b'-', b'1-', b'65535-65535',
                b'100000-1']


def files_under(*dirs, suffixes=('.yaml', '.json')):
    out = []
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(suffixes):
                with open(os.path.join(d, name), 'rb') as f:
                    out.append((name, f.read()))
    return out


KUBECONFIG_HEAD = (b'apiVersion: v1\nkind: Config\ncurrent-context: a\n'
                   b'contexts:\n- name: a\n  context: {cluster: c, user: u, namespace: turn}\n')
EXTRA_KUBECONFIG = [
    KUBECONFIG_HEAD + b"clusters:\n- name: c\n  cluster: {server: 'https://10.0.0.1:6443', certificate-authority-data: "
    b"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==, tls-server-name: kubernetes.default}\n"
    b"users:\n- name: u\n  user: {token: abc}\n",
    KUBECONFIG_HEAD + b"clusters:\n- name: c\n  cluster: {server: 'https://h:1', insecure-skip-tls-verify: true}\n"
    b"users:\n- name: u\n  user: {tokenFile: tok, client-certificate-data: QUJD, client-key-data: REVG}\n",
    KUBECONFIG_HEAD + b"clusters:\n- name: c\n  cluster: {server: 'https://h:1', certificate-authority: ca.pem}\n"
    b"users:\n- name: u\n  user: {client-certificate: c.pem, client-key: k.pem}\n",
    KUBECONFIG_HEAD + b"clusters:\n- name: c\n  cluster: {server: 'https://h:1'}\n"
    b"users:\n- name: u\n  user: {exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}}\n",
    KUBECONFIG_HEAD + b"clusters:\n- name: c\n  cluster: {server: 'https://h:1'}\nusers:\n- name: u\n  user: {auth-provider: {name: gcp}}\n",
    b'{"current-context":"a","contexts":[{"name":"a","context":{"cluster":"c"}}],"clusters":[{"name":"c","cluster":{"server":"http://x"}}]}',
    b'current-context: zz\n', b'- a\n- b\n', b'contexts: {a: 1}\ncurrent-context: a\n', b'key: [unclosed\n',
]
EXTRA_WATCH = [
    b'\x07{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","resourceVersion":"10"}}}\n'
    b'{"type":"MODIFIED","object":{"metadata":{"name":"p","resourceVersion":"11"}}}\r\n\n'
    b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12"}}}\n',
    b'\x00{"type":"DELETED","object":{"metadata":{"name":"p","resourceVersion":"13"}}}\n{"type":"ERROR","object":'
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)",'
    b'"reason":"Expired","code":410}}\n',
    b'\x03{"type":"ADDED","object":{"metadata":{"name":"half', b'\x01not json\n{"type":"X","object":{}}\n{"type":"ADDED"}\n',
    b'\x3c' + b'{"type":"ADDED","object":{"a":"' + b'x' * 5000 + b'"}}\n',
]
EXTRA_KUBE_STATUS = [
    b'\x07{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"bad","reason":"Invalid",'
    b'"details":{"causes":[{"reason":"FieldValueInvalid","message":"must be > 0","field":"spec.replicas"}]},"code":422}',
    b'\x18{"kind":"Status","status":"Failure","reason":"TooManyRequests","details":{"retryAfterSeconds":2},"code":429}',
    b'\x04{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled",'
    b'"reason":"Conflict","details":{"name":"edge","group":"turnfleet.hzmi.dev","kind":"turnpools"},"code":409}',
    b'\x19 7\r\n', b'\x0a<html>bad gateway</html>', b'\x05{"kind":"Status","code":99999,"details":{"causes":[1,{}]}}',
    b'\x1bWed, 21 Oct 2015 07:28:00 GMT',
]


def main():
    stun = []
    for v in load('rfc5769.jsonl'):
        stun.append(bytes.fromhex(v['hex']))
    for v in load('coturn_4.6.1_exchanges.jsonl'):
        for side in ('request', 'response'):
            h = v.get(side + '_hex')
            if not h:
                continue
            buf = bytes.fromhex(h)
            stun.append(buf)
            if v.get(side + '_kind') == 'stun-stream':
                stun.extend(split_stream(buf))
    for v in load('stun_malformed.jsonl'):
        stun.append(bytes.fromhex(v['hex']))
    uris = [v['uri'].encode('utf-8') for v in load('turn_uris.jsonl')]
    uris += [u.encode('utf-8') for u in EXTRA_URIS]
    data = os.path.join(HERE, '..', 'tests', 'data')
    metrics = list(EXTRA_METRICS)
    for name in sorted(os.listdir(os.path.join(data, 'metrics'))):
        with open(os.path.join(data, 'metrics', name), 'rb') as f:
            metrics.append(f.read())
    cli = list(EXTRA_CLI)
    with open(os.path.join(data, 'coturn', 'cli-pc-4.6.1.session'), 'rb') as f:
        cli.append(f.read())
    a = write(os.path.join(HERE, 'corpora', 'stun_decode'), set(stun))
    b = write(os.path.join(HERE, 'corpora', 'uri_parse'), set(uris))
    c = write(os.path.join(HERE, 'corpora', 'metrics_parse'), set(metrics))
    d = write(os.path.join(HERE, 'corpora', 'coturn_cli'), set(cli))
    kube = [(name, set(seeds)) for name, seeds in
            (('kube_config', EXTRA_KUBECONFIG), ('kube_watch', EXTRA_WATCH), ('kube_status', EXTRA_KUBE_STATUS))]
    for name, seeds in kube:
        print('%s: %d seeds (%d new)' % (name, len(seeds), write(os.path.join(HERE, 'corpora', name), seeds)))
    print('stun_decode: %d seeds (%d new); uri_parse: %d seeds (%d new); metrics_parse: %d seeds (%d new); '
          'coturn_cli: %d seeds (%d new)' % (len(set(stun)), a, len(set(uris)), b, len(set(metrics)), c,
                                            len(set(cli)), d))
    root = os.path.join(HERE, '..')
    pool_dirs = [os.path.join(data, 'pools'), os.path.join(root, 'examples', 'pools'), os.path.join(data, 'invalid')]
    pools = files_under(*pool_dirs)
    pool_yaml = [b for n, b in pools if n.endswith('.yaml') and not n.startswith('nodes-')] + EXTRA_POOL_YAML
    pool_json = [b for n, b in pools if n.endswith('.json') and not n.startswith('nodes-')] + EXTRA_POOL_JSON
    nodes = [b for n, b in files_under(os.path.join(data, 'nodes'), os.path.join(root, 'examples', 'nodes'),
                                       os.path.join(data, 'invalid'), suffixes=('.json',))
             if not n.startswith('pool-')]
    extra = {
        'pool_yaml': pool_yaml, 'pool_json': pool_json, 'nodes_parse': nodes, 'fleet_parse': EXTRA_FLEET,
        'status_parse': EXTRA_STATUS, 'secret_read': EXTRA_SECRET, 'addresses_parse': EXTRA_ADDRESSES,
        'coturn_version': EXTRA_VERSIONS, 'port_range': EXTRA_RANGES,
        'admission_review': [b for _, b in files_under(os.path.join(data, 'admission'), suffixes=('.review.json',))]
        + EXTRA_REVIEWS,
        'vantage_condition': EXTRA_VANTAGE,
        'issuer_pool': EXTRA_ISSUER,
    }
    for name, blobs in extra.items():
        added = write(os.path.join(HERE, 'corpora', name), set(blobs))
        print('%s: %d seeds (%d new)' % (name, len(set(blobs)), added))


if __name__ == '__main__':
    main()
