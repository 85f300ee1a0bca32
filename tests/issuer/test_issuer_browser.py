"""Headless Chromium against turnfleet-issuer: the page asks the issuer for an RTCConfiguration (a CORS
request with a bearer token), then two RTCPeerConnections with iceTransportPolicy "relay", configured only
from that answer, exchange a data-channel message through each relay of a `turnfleet up` fleet of real
coturn relays on loopback. The relayed candidates' addresses prove which relay carried it. A page from an
origin the issuer does not list gets no CORS grant: the browser itself refuses it the answer.

Loopback 127.0.6.1 (page server, issuer), relays 127.0.6.11-12; ports 26001 (TURN), 26020+ (coturn CLI, on 127.0.0.1 as up renders it),
26081-26082 (pages), 26080 (issuer), 26090 (up's metrics), relays 26100-26139.
"""
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from fleet import TOKEN, Fleet, wait_for  # noqa: E402

CHROMIUM = os.environ.get("TF_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
PAGE = os.path.join(os.path.dirname(__file__), "call.html")
LISTED, UNLISTED = "127.0.6.1:26081", "127.0.6.1:26082"


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


class TestBrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet("call", "127.0.6.11-12", 26001, 26100, 26139, "127.0.6.1:26090", 26020,
                          "127.0.6.1:26080", replicas=2, issuer_args=["--cors-origin", "http://" + LISTED,
                                                                       "--max-relays", "2", "--quiet"])
        cls.pages = []
        cls.tmp = tempfile.mkdtemp(prefix="tf-issuer-chromium-")
        try:
            cls.fleet.start()
            cls.pages = [PageServer(LISTED), PageServer(UNLISTED)]
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for p in cls.pages:
            p.stop()
        cls.fleet.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def page_url(self, origin, user):
        q = urllib.parse.urlencode({"issuer": self.fleet.issuer_url, "pool": "call", "user": user, "token": TOKEN})
        return "http://%s/call.html?%s" % (origin, q)

    def test_data_channel_through_each_relay(self):
        page = self.pages[0]
        profile = os.path.join(self.tmp, "listed")
        os.makedirs(profile, exist_ok=True)
        result = run_chromium(self.page_url(LISTED, "browser-user"), profile, lambda: page.results, 120)[0]
        if os.environ.get("TF_TEST_VERBOSE"):
            print(json.dumps(result, indent=1), file=sys.stderr)
        self.assertTrue(result.get("ok"), result)
        relays = self.fleet.relays()
        addresses = sorted(relays.values())
        self.assertEqual(len(result["calls"]), 2, result)
        seen = []
        for call in result["calls"]:
            self.assertEqual(call["received"], call["sent"], call)
            local, remote = call["local"], call["remote"]
            self.assertIsNotNone(local, call)
            # both ends relayed, both on the one relay this call was configured with
            self.assertEqual(local["type"], "relay", call)
            self.assertEqual(remote["type"], "relay", call)
            host = urllib.parse.urlsplit(call["urls"][0].replace("turn:", "turn://", 1)).hostname
            self.assertEqual(local["address"], host, call)
            self.assertEqual(remote["address"], host, call)
            for c in (local, remote):
                self.assertTrue(26100 <= c["port"] <= 26139, call)
            seen.append(host)
        self.assertEqual(sorted(seen), addresses, "one call through each relay")

    def test_unlisted_origin_gets_no_cors_grant(self):
        page = self.pages[1]
        profile = os.path.join(self.tmp, "unlisted")
        os.makedirs(profile, exist_ok=True)
        result = run_chromium(self.page_url(UNLISTED, "foreign-user"), profile, lambda: page.results, 60)[0]
        # the browser refuses the page the answer: fetch() rejects (a network error), no status to read
        self.assertFalse(result.get("ok"), result)
        self.assertEqual(result.get("stage"), "exception", result)
        self.assertIn("Failed to fetch", result.get("error", ""), result)


if __name__ == "__main__":
    unittest.main(verbosity=2)
