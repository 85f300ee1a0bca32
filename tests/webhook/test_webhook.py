#!/usr/bin/env python3
"""turnfleet-webhook end to end on the Kubernetes API stand-in with real kubectl.

    test_webhook.py TURNFLEET_WEBHOOK

The webhook serves 127.0.0.250:16710 with certificates this test makes with
openssl, reads TURNPools and Nodes through a kubeconfig, and is registered as a
Validating and a Mutating webhook (url + caBundle, failurePolicy Fail). Checked:
a bad pool is denied with its field path, defaults are patched in, warnings
reach kubectl, a cross-pool address conflict and a scale past --max-replicas are
denied; 1000 malformed reviews, oversize and slow bodies leave it answering;
a rotated certificate is served without a restart; SIGTERM ends it with 0."""
import base64
import http.client
import json
import re
import os
import random
import shutil
import socket
import ssl
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

ADDR, PORT = harness.API_ADDR, 16710
DATA = os.path.join(harness.SOURCE, "tests", "data", "admission")
VALIDATE, MUTATE = "validate.turnfleet.hzmi.dev", "mutate.turnfleet.hzmi.dev"


def webhook_configs(ca_crt):
    rules = [{"apiGroups": ["turnfleet.hzmi.dev"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["turnpools", "turnpools/scale"]}]

    def hook(name, path):
        return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "timeoutSeconds": 5, "rules": rules,
                "clientConfig": {"url": "https://%s:%d%s" % (ADDR, PORT, path), "caBundle": harness.b64file(ca_crt)}}
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
             "metadata": {"name": "turnfleet"}, "webhooks": [hook(VALIDATE, "/validate")]},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
             "metadata": {"name": "turnfleet"}, "webhooks": [hook(MUTATE, "/mutate")]}]


class Webhook:
    def __init__(self, binary, tmp, cert, key, kubeconfig):
        self.log_path = os.path.join(tmp, "webhook.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "--listen", "%s:%d" % (ADDR, PORT), "--cert", cert, "--key", key,
                                      "--kubeconfig", kubeconfig, "--max-replicas", "6", "--timeout", "2"],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def text(self):
        with open(self.log_path) as f:
            return f.read()


def tls_context(ca):
    ctx = ssl.create_default_context(cafile=ca)
    return ctx


def post(ctx, path, body, headers=None, conn=None):
    c = conn or http.client.HTTPSConnection(ADDR, PORT, context=ctx, timeout=10)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, body, h)
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    return r.status, data


def get(ctx, path):
    c = http.client.HTTPSConnection(ADDR, PORT, context=ctx, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


def served_cert():
    """DER of the certificate the webhook presents now (no verification)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((ADDR, PORT), timeout=5) as s:
        with ctx.wrap_socket(s) as t:
            return t.getpeercert(binary_form=True)


def pem_der(path):
    return ssl.PEM_cert_to_DER_cert(open(path).read())


expect = harness.expect


def malformed_reviews():
    """1000 bodies the webhook must answer 400 (and survive): garbage, cut reviews, wrong shapes."""
    good = open(os.path.join(DATA, "01-create-valid.review.json"), "rb").read()
    rnd = random.Random(14)
    out = [b"", b"{", b"[]", b"null", b"\x00\xff\xfe", b'{"apiVersion":"admission.k8s.io/v1"}',
           b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1}}',
           b'{"a":' * 100 + b'1' + b'}' * 100, b'{"apiVersion":"admission.k8s.io/v1","apiVersion":"x"}']
    while len(out) < 1000:
        k = rnd.randrange(3)
        if k == 0:
            out.append(good[:rnd.randrange(1, len(good) - 1)])
        elif k == 1:
            out.append(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200))))
        else:
            b = bytearray(good)
            for _ in range(rnd.randrange(1, 8)):
                b[rnd.randrange(len(b))] = rnd.choice(b'{}[]":,\x00\xc3')
            out.append(bytes(b))
    return out


def corpus_refused(cluster):
    """Apply every invalid pool of the corpus as it is written (its namespaces made first)."""
    import glob
    import yaml
    d = os.path.join(harness.SOURCE, "tests", "data", "invalid")
    files = sorted(f for f in glob.glob(os.path.join(d, "pool-*")) if not f.endswith(".expected"))
    namespaces = set()
    for f in files:
        try:
            doc = yaml.safe_load(open(f))
            ns = doc.get("metadata", {}).get("namespace")
            if isinstance(ns, str) and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", ns):
                namespaces.add(ns)
        except Exception:  # noqa: BLE001 - a syntax case: kubectl refuses it below
            pass
    for ns in sorted(namespaces - {"default"}):
        cluster.kubectl("create", "namespace", ns, check=False)
    out = {"named": 0, "other": 0, "normalized": 0, "failures": []}
    for f in files:
        want = open(os.path.splitext(f)[0] + ".expected").read().splitlines()[0]
        name = os.path.basename(f)
        try:
            doc = yaml.safe_load(open(f, "rb"))
        except Exception:  # noqa: BLE001
            doc = None
        sendable = isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion")
        # what the parser says of the file's bytes (syntax, duplicate keys, encoding: "line L, column C ...") is
        # kubectl's to refuse or to re-encode: the API server only ever sees the JSON kubectl makes of it
        file_level = want.startswith("line ")
        path = want.split(":")[0] if sendable and not file_level and re.match(r"(spec\.|metadata\.name:)", want) else None
        r = cluster.kubectl("apply", "-f", f, check=False)  # kubectl reads it: some entries are not UTF-8
        if r.returncode == 0:
            cluster.kubectl("delete", "-f", f, check=False)
            if file_level:
                out["normalized"] += 1
            else:
                out["failures"].append("%s: accepted (%s)" % (name, r.stdout.strip()))
            continue
        # a map key: the parser writes spec.nodeSelector[k], the API server spec.nodeSelector.k
        alt = re.sub(r"\[([^\]0-9][^\]]*)\]", r".\1", path) if path else None
        if path and path not in r.stderr and alt not in r.stderr:
            out["failures"].append("%s: refused without naming %s: %s" % (name, path, r.stderr.strip()))
        else:
            out["named" if path else "other"] += 1
    return out


def main():
    binary = os.path.abspath(sys.argv[1])
    tmp = harness.tmpdir("tf-webhook-")
    ca = harness.make_ca(tmp)
    key, crt = harness.make_cert(tmp, ca, "webhook", ["IP:" + ADDR])
    cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
    shutil.copy(crt, cert_path)
    shutil.copy(key, key_path)
    cluster = harness.Cluster(tmp)
    wh = None
    ok = False
    try:
        cluster.apply(open(os.path.join(harness.SOURCE, "deploy", "crd", "turnpools.yaml")).read())
        harness.wait_for("the CRD served", lambda: cluster.kubectl("get", "tp", check=False).returncode == 0)
        wh = Webhook(binary, tmp, cert_path, key_path, cluster.kubeconfig)
        ctx = tls_context(ca[1])

        def ready():
            try:
                return get(ctx, "/readyz")[0] == 200
            except OSError:
                return wh.proc.poll() is not None
        harness.wait_for("the webhook ready (caches synced)", ready, 30)
        expect(wh.proc.poll() is None, "the webhook runs", wh.text())
        for cfg in webhook_configs(ca[1]):
            cluster.apply(cfg)

        # a bad pool the CRD's schema lets through is denied with the parser's field path
        bad = dict(relayPortRange={"start": 3000, "end": 4000}, listeners=[{"name": "turn", "protocol": "udp", "port": 3478}])
        p = cluster.apply(harness.pool("bad", **bad), check=False)
        expect(p.returncode != 0 and ('admission webhook "%s" denied the request: spec.listeners[0].port: '
                                      '3478 is inside spec.relayPortRange 3000-4000' % VALIDATE) in p.stderr,
               "a bad pool is denied with its field path", p.stderr)

        # the invalid-pool corpus (what `turnfleet validate` refuses, tests/data/invalid/pool-*): every entry is
        # refused by kubectl, the CRD's schema and CEL rules or this webhook, never stored; where the parser names a
        # field (spec.*, metadata.name), the refusal names the same one
        refused_by = corpus_refused(cluster)
        expect(not refused_by["failures"] and refused_by["named"] >= 40,
               "the invalid-pool corpus: %d refused naming the parser's field path, %d refused without one (syntax, "
               "apiVersion, kind, namespace, no object), %d only the file's bytes are wrong and kubectl re-encodes them"
               % (refused_by["named"], refused_by["other"], refused_by["normalized"]), "\n".join(refused_by["failures"]))

        # a good pool gets its defaults patched in by the mutating webhook
        cluster.apply(harness.pool("demo", replicas=2))
        demo = json.loads(cluster.kubectl("get", "tp", "demo", "-o", "json").stdout)
        spec = demo["spec"]
        expect(spec.get("nodeSelector") == {"turnfleet.hzmi.dev/relay-node": "true"} and
               spec.get("drainTimeout") == "600s" and spec["auth"]["secretRef"].get("key") == "secret" and
               "image" in spec.get("dataplane", {}) and len(spec.get("listeners", [])) == 2,
               "the mutating webhook patched the defaults in", json.dumps(spec))
        expect(spec["relayPortRange"] == {"start": 50000, "end": 50099} and spec["replicas"] == 2,
               "fields the user gave are left as given", json.dumps(spec))

        # warnings reach kubectl
        p = cluster.apply(harness.pool("part", replicas=2, relayPortRange={"start": 52000, "end": 52099},
                                       addressing={"mode": "PartitionedIP", "partitionedIP": {"relaysPerNode": 2}},
                                       listeners=[{"name": "turn", "protocol": "udp", "port": 443}]), check=False)
        expect(p.returncode == 0 and "Warning: spec.addressing.partitionedIP.relaysPerNode: PartitionedIP adds no "
               "capacity" in p.stderr and "Warning: spec.listeners[0].port: 443 is below 1024" in p.stderr,
               "warnings reach kubectl", p.stderr)

        # a node at the API server's own address, known to the webhook only from the `kubernetes` Endpoints, with
        # the API server's port in the pool's range: warned in the planner's words, naming the node
        cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n-api", "labels": {
            "apiguard": "true", "node-restriction.kubernetes.io/turnfleet-development": "true"},
            "annotations": {"turnfleet.hzmi.dev/relay-address": harness.API_ADDR}}})
        guard = harness.pool("apiguard", replicas=1, nodeSelector={"apiguard": "true"},
                             relayPortRange={"start": harness.API_PORT - 5, "end": harness.API_PORT + 5})
        want = ("node n-api: %s is refused: the Kubernetes API server listens on port %d there"
                % (harness.API_ADDR, harness.API_PORT))
        harness.wait_for("the webhook's cache to hold node n-api", lambda: want in cluster.kubectl(
            "apply", "--dry-run=server", "-f", "-", input=json.dumps(guard), check=False).stderr, 20, 0.2)
        cluster.kubectl("delete", "node", "n-api")

        # a cross-pool conflict: same nodes, same relay range and listener port as demo
        clash = harness.pool("clash", replicas=1)

        def denied_dry_run():
            q = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(clash), check=False)
            return q.returncode != 0 and "address conflict" in q.stderr
        harness.wait_for("the webhook's cache to hold demo (a dry run denied)", denied_dry_run, 20, 0.2)
        p = cluster.apply(clash, check=False)
        expect(p.returncode != 0 and ('admission webhook "%s" denied the request: spec.relayPortRange: address '
                                      'conflict with another pool' % VALIDATE) in p.stderr and
               "in use by pool demo.default" in p.stderr, "a cross-pool address conflict is denied", p.stderr)
        expect(cluster.kubectl("get", "tp", "clash", check=False).returncode != 0, "the conflicting pool was not stored")

        # /scale: past --max-replicas denied, within it allowed with the placement warning
        p = cluster.kubectl("scale", "tp", "demo", "--replicas=7", check=False)
        expect(p.returncode != 0 and ('admission webhook "%s" denied the request: spec.replicas: 7 is above this '
                                      "cluster's maximum of 6" % VALIDATE) in p.stderr,
               "kubectl scale past --max-replicas is denied", p.stderr)
        p = cluster.kubectl("scale", "tp", "demo", "--replicas=5", check=False)
        expect(p.returncode == 0 and "Warning: spec.replicas: 3 of 5 replicas placed: 3 relay identities on 3 of 3 nodes" in p.stderr,
               "kubectl scale within the cap is allowed with the placement warning", p.stderr + p.stdout)

        # 1000 malformed reviews over keep-alive connections: 400 each, and it keeps answering
        bodies = malformed_reviews()
        conn = http.client.HTTPSConnection(ADDR, PORT, context=ctx, timeout=10)
        codes, bad_answers = {}, []
        for i, b in enumerate(bodies):
            path = "/validate" if i % 2 else "/mutate"
            try:
                st, out = post(ctx, path, b, conn=conn)
            except (http.client.HTTPException, OSError):
                conn.close()
                conn = http.client.HTTPSConnection(ADDR, PORT, context=ctx, timeout=10)
                st, out = post(ctx, path, b, conn=conn)
            codes[st] = codes.get(st, 0) + 1
            if st == 200:  # a flipped byte inside a string still decodes: then a real answer
                r = json.loads(out)["response"]
                try:
                    uid = json.loads(b)["request"]["uid"]
                except ValueError:
                    uid = None  # Python's reader refuses it: then the webhook should have too
                if r["uid"] != uid or not isinstance(r["allowed"], bool):
                    bad_answers.append(b)
            elif st != 400 or not out:
                bad_answers.append(out)
        conn.close()
        expect(not bad_answers and codes.get(400, 0) >= 900 and set(codes) <= {200, 400},
               "1000 malformed reviews: 400 with the reason, or a proper answer where they still decode",
               "%s %r" % (codes, bad_answers[:2]))

        # oversize: by Content-Length at once, and chunked (no length) after reading past the cap
        def raw(head, pieces):
            """Send a request head and body pieces (stopping when the server hangs up); the status line."""
            t = ctx.wrap_socket(socket.create_connection((ADDR, PORT), timeout=10), server_hostname=ADDR)
            try:
                t.sendall(head)
                for piece in pieces:
                    t.sendall(piece)
            except OSError:
                pass
            try:
                data = t.recv(200)
            except OSError:
                data = b""
            t.close()
            return data.split(b"\r\n", 1)[0]
        line = raw(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 4194304\r\n\r\n", [b"x" * 65536] * 64)
        expect(line == b"HTTP/1.1 413 Content Too Large" or line.startswith(b"HTTP/1.1 413"),
               "an oversize body (Content-Length) gets 413", repr(line))
        chunk = b"10000\r\n" + b"y" * 65536 + b"\r\n"
        line = raw(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n", [chunk] * 64 + [b"0\r\n\r\n"])
        expect(line.startswith(b"HTTP/1.1 413"), "an oversize chunked body gets 413", repr(line))

        # slow clients: a body trickling past the budget, and one that stops half way, are cut
        def slow(pause, pieces):
            s = ctx.wrap_socket(socket.create_connection((ADDR, PORT), timeout=10), server_hostname=ADDR)
            s.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n")
            t0 = time.monotonic()
            try:
                for _ in range(pieces):
                    s.sendall(b"{" * 10)
                    time.sleep(pause)
                s.settimeout(10)
                data = s.recv(100)
            except OSError:
                data = b""
            s.close()
            return data, time.monotonic() - t0
        data, took = slow(1.5, 4)   # each piece within the idle timeout, the whole past the body budget
        expect(not data.startswith(b"HTTP/1.1 200"), "a trickling body is cut", repr(data[:60]))
        data, took = slow(0, 1)      # stops sending: cut by the idle timeout
        expect(data == b"" or not data.startswith(b"HTTP/1.1 200"), "a stalled body is cut", repr(data[:60]))
        expect(wh.proc.poll() is None and get(ctx, "/healthz")[0] == 200, "the webhook still answers /healthz")
        review = open(os.path.join(DATA, "01-create-valid.review.json"), "rb").read()
        st, body = post(ctx, "/validate", review)
        expect(st == 200 and json.loads(body)["response"]["allowed"] is True, "and still judges reviews")

        # rotation: a new CA and certificate; the key is written after the certificate, so for a
        # moment the two do not match and the old pair must stay in use
        ca2 = harness.make_ca(tmp, "rotated-ca")
        key2, crt2 = harness.make_cert(tmp, ca2, "webhook2", ["IP:" + ADDR])
        before = served_cert()
        expect(before == pem_der(cert_path), "the first certificate is served")
        shutil.copy(crt2, cert_path + ".new")
        os.replace(cert_path + ".new", cert_path)
        time.sleep(1.5)
        expect(served_cert() == before, "a certificate without its key keeps the old pair in use")
        shutil.copy(key2, key_path + ".new")
        os.replace(key_path + ".new", key_path)
        harness.wait_for("the rotated certificate served", lambda: served_cert() == pem_der(crt2), 10, 0.2)
        print("ok - the rotated certificate is served without a restart")
        for cfg in webhook_configs(ca2[1]):
            # replace, not apply: the stand-in's strategic merge does not know `webhooks` merges by name
            cluster.kubectl("replace", "-f", "-", input=json.dumps(cfg))
        p = cluster.apply(harness.pool("bad2", **bad), check=False)
        expect(('admission webhook "%s" denied the request: spec.listeners[0].port' % VALIDATE) in p.stderr,
               "the API server reaches the webhook through the new CA", p.stderr)

        log = wh.text()
        for secretish in ("webhook.turnfleet.test", "demo-secret", "50099"):
            expect(secretish not in log, "the log carries no object contents (%s)" % secretish)
        expect(harness.stop_process(wh.proc) == 0, "SIGTERM stops it with exit 0", wh.text()[-2000:])
        ok = True
    finally:
        if wh:
            harness.stop_process(wh.proc)
            if not ok:
                sys.stderr.write("--- webhook log ---\n" + wh.text()[-5000:])
        harness.finish(tmp, ok, cluster)


if __name__ == "__main__":
    main()
