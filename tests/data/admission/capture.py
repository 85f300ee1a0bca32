#!/usr/bin/env python3
"""Capture real AdmissionReview requests from the Kubernetes API stand-in into
this directory (tests/data/admission/*.review.json), for check_admission and the
admission fuzz corpus. Run as root inside the test network namespace:

    python3 tests/data/admission/capture.py

A throwaway HTTPS endpoint (Python's ssl) on 127.0.0.250:16719 records each
review and allows it; kubectl then creates, updates and scales pools. The
reviews are written as the stand-in sent them (uids included)."""
import http.server
import json
import os
import shutil
import ssl
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "webhook"))
import harness  # noqa: E402

ADDR, PORT = "127.0.0.250", 16719
CAPTURED = []


class Capture(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        review = json.loads(body)
        CAPTURED.append(review)
        out = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": review["request"]["uid"], "allowed": True}}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def main():
    tmp = harness.tmpdir("tf-capture-")
    ca = harness.make_ca(tmp)
    key, crt = harness.make_cert(tmp, ca, "capture", ["IP:" + ADDR])
    srv = http.server.HTTPServer((ADDR, PORT), Capture)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    cluster = harness.Cluster(tmp)
    try:
        cluster.apply(open(os.path.join(harness.SOURCE, "deploy", "crd", "turnpools.yaml")).read())
        harness.wait_for("the CRD served", lambda: cluster.kubectl("get", "tp", check=False).returncode == 0)
        cfg = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "capture"},
               "webhooks": [{"name": "capture.turnfleet.hzmi.dev", "admissionReviewVersions": ["v1"],
                             "sideEffects": "None", "failurePolicy": "Fail",
                             "clientConfig": {"url": "https://%s:%d/validate" % (ADDR, PORT),
                                              "caBundle": harness.b64file(ca[1])},
                             "rules": [{"apiGroups": ["turnfleet.hzmi.dev"], "apiVersions": ["v1alpha1"],
                                        "operations": ["CREATE", "UPDATE"],
                                        "resources": ["turnpools", "turnpools/scale"]}]}]}
        cluster.apply(cfg)
        steps = [
            ("create-valid", lambda: cluster.apply(harness.pool("demo"))),
            ("update-replicas", lambda: cluster.apply(harness.pool("demo", replicas=3))),
            ("scale", lambda: cluster.kubectl("scale", "tp", "demo", "--replicas=5")),
            ("create-bad-range", lambda: cluster.apply(harness.pool("bad", relayPortRange={"start": 50100, "end": 50000}))),
            ("create-partitioned-low-port", lambda: cluster.apply(harness.pool(
                "part", replicas=2, addressing={"mode": "PartitionedIP", "partitionedIP": {"relaysPerNode": 2}},
                listeners=[{"name": "turn", "protocol": "udp", "port": 443}]))),
            ("create-conflict", lambda: cluster.apply(harness.pool("clash", replicas=1))),
        ]
        for i, (name, step) in enumerate(steps, 1):
            before = len(CAPTURED)
            step()
            if len(CAPTURED) != before + 1:
                raise AssertionError("%s: %d reviews captured, wanted 1" % (name, len(CAPTURED) - before))
            path = os.path.join(HERE, "%02d-%s.review.json" % (i, name))
            with open(path, "w") as f:
                json.dump(CAPTURED[-1], f, indent=1, sort_keys=True)
                f.write("\n")
            print(path)
    finally:
        cluster.stop()
        srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
