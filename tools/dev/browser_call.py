"""Headless Chromium calls through a pool, configured only by turnfleet-issuer: serves the page
tests/issuer/call.html, which fetches /ice from the issuer and, for each relay of the answer, carries a
data-channel message between two RTCPeerConnections with iceTransportPolicy "relay" through that relay
alone. Used by `make demo` and the issuer tests. Chromium runs in its own process group and is stopped by
its id.

usage: browser_call.py --issuer URL --pool POOL --user ID --token-file F --page ADDR:PORT [--expect-relays N]
Prints each call (which relay, the relayed candidates) and exits 0 when every call's message arrived over
relayed candidates on its relay, 1 otherwise.
"""
import argparse
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


def wait_for(what, cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


CHROMIUM = os.environ.get("TF_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "issuer", "call.html")


class PageServer:
    """Serves call.html and collects the page's POST /result."""

    def __init__(self, addr_port):
        self.results = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with open(PAGE, "rb") as f:
                    body = f.read()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                outer.results.append(json.loads(self.rfile.read(n)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        host, port = addr_port.rsplit(":", 1)
        self.httpd = http.server.ThreadingHTTPServer((host, int(port)), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_chromium(url, profile, until, timeout):
    """Run headless Chromium on @p url until @p until() holds; stop it (its own process group) by its id."""
    if not os.access(CHROMIUM, os.X_OK):
        raise AssertionError("chromium is not installed (tools/dev/install-deps.sh installs it): " + CHROMIUM)
    log = open(os.path.join(profile, "chromium.log"), "w+")
    p = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--no-default-browser-check", "--user-data-dir=" + os.path.join(profile, "profile"),
                          "--allow-loopback-in-peer-connection", url],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def done():
            if p.poll() is not None:
                raise AssertionError("chromium exited with %s" % p.returncode)
            return until()
        return wait_for("the page's result", done, timeout)
    except AssertionError:
        log.flush()
        log.seek(0)
        print(log.read()[-3000:], file=sys.stderr)
        raise
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        try:
            os.killpg(p.pid, signal.SIGKILL)  # any helper left in its group
        except ProcessLookupError:
            pass
        log.close()



def page_url(page, issuer, pool, user, token):
    q = urllib.parse.urlencode({"issuer": issuer, "pool": pool, "user": user, "token": token})
    return "http://%s/call.html?%s" % (page, q)


def check(result, expect_relays):
    """The problems of a page's result (empty when every call went through its relay)."""
    if not result.get("ok"):
        return ["the page failed: %r" % result]
    problems, hosts = [], set()
    for c in result["calls"]:
        host = urllib.parse.urlsplit(c["urls"][0].replace("turn:", "turn://", 1)).hostname
        hosts.add(host)
        if c["received"] != c["sent"]:
            problems.append("%s: the message did not arrive" % host)
        for side in ("local", "remote"):
            cand = c.get(side) or {}
            if cand.get("type") != "relay" or cand.get("address") != host:
                problems.append("%s: the %s candidate is %r, not relayed on it" % (host, side, cand))
    if expect_relays and len(hosts) != expect_relays:
        problems.append("calls through %d relays, not %d" % (len(hosts), expect_relays))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--issuer", required=True)
    ap.add_argument("--pool", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--page", required=True, help="ADDR:PORT to serve the page on (its origin must be a --cors-origin)")
    ap.add_argument("--expect-relays", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=90)
    a = ap.parse_args()
    with open(a.token_file) as f:
        token = f.readline().strip()
    page = PageServer(a.page)
    tmp = tempfile.mkdtemp(prefix="browser-call-")
    try:
        result = run_chromium(page_url(a.page, a.issuer, a.pool, a.user, token), tmp, lambda: page.results,
                              a.timeout)[0]
    finally:
        page.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for c in result.get("calls", []):
        print("  %s: %r arrived; relayed candidates %s:%s <-> %s:%s" % (
            c["urls"][0], c["received"], c["local"]["address"], c["local"]["port"], c["remote"]["address"],
            c["remote"]["port"]))
    problems = check(result, a.expect_relays)
    for p in problems:
        print("browser-call: " + p, file=sys.stderr)
    if not problems:
        print("  %s, relay-only: every message crossed its relay" % result.get("userAgent", "").split(")")[-1].strip())
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
