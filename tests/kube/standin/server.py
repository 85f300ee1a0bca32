"""The stand-in's HTTPS front: authentication, RBAC, admission (built-in and
webhooks), discovery, OpenAPI, tables, protobuf bodies, watches, faults and
the request log."""
import base64
import copy
import json
import random
import re
import secrets as pysecrets
import socket
import ssl
import struct
import threading
import time
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import api
import controllers
import k8sproto
import ssa
import tables
from util import (ApiError, bad_request, field_match, invalid, json_patch, JsonPatchTestFailed, label_match, merge_patch,
                  not_found, parse_bool, parse_field_selector, parse_label_selector, strategic_merge)

SERVER_VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-turnfleet-standin",
                  "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                  "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23", "compiler": "gc",
                  "platform": "linux/amd64"}

PATCH_TYPES_CR = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
PATCH_TYPES_BUILTIN = PATCH_TYPES_CR[:2] + ["application/strategic-merge-patch+json", "application/apply-patch+yaml"]


class Auth:
    """Bearer tokens -> (user, uid, groups, expiry)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tokens = {}

    def add(self, token, user, groups, uid="", expiry=None):
        with self.lock:
            self.tokens[token] = (user, uid or str(uuid.uuid4()), list(groups), expiry)

    def revoke(self, token):
        with self.lock:
            return self.tokens.pop(token, None) is not None

    def lookup(self, token):
        with self.lock:
            t = self.tokens.get(token)
        if t is None or (t[3] is not None and time.time() > t[3]):
            return None
        return t

    def issue_sa(self, ns, name, sa_uid, seconds):
        tok = "sa.%s.%s" % (base64.urlsafe_b64encode(("%s:%s" % (ns, name)).encode()).decode().rstrip("="), pysecrets.token_urlsafe(24))
        self.add(tok, "system:serviceaccount:%s:%s" % (ns, name),
                 ["system:serviceaccounts", "system:serviceaccounts:%s" % ns, "system:authenticated"],
                 sa_uid, time.time() + seconds)
        return tok


class Faults:
    """Rules the control endpoint sets, matched per request."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.log = []
        self.next_id = 1

    def add(self, rule):
        with self.lock:
            rule = dict(rule)
            rule["id"] = self.next_id
            self.next_id += 1
            rule.setdefault("hits", 0)
            self.rules.append(rule)
            return rule["id"]

    def clear(self):
        with self.lock:
            self.rules = []

    def match(self, method, path, query, user):
        with self.lock:
            for r in self.rules:
                if r.get("method") and not re.fullmatch(r["method"], method):
                    continue
                if r.get("path") and not re.search(r["path"], path):
                    continue
                if r.get("query") and not re.search(r["query"], query):
                    continue
                if r.get("user") and r["user"] != user:
                    continue
                if r.get("count") is not None and r["hits"] >= r["count"]:
                    continue
                if r.get("probability") is not None and random.random() >= r["probability"]:
                    continue
                r["hits"] += 1
                return dict(r)
        return None

    def record(self, entry):
        with self.lock:
            entry["seq"] = len(self.log) + 1
            self.log.append(entry)


# ---- protobuf (the minimal OpenAPI v2 document) ------------------------------

def _pb_str(field, s):
    b = s.encode()
    return bytes([(field << 3) | 2]) + _pb_len(len(b)) + b


def _pb_len(n):
    out = b""
    while True:
        c = n & 0x7F
        n >>= 7
        if n:
            out += bytes([c | 0x80])
        else:
            return out + bytes([c])


def openapi_v2_protobuf():
    info = _pb_str(1, "Kubernetes") + _pb_str(2, SERVER_VERSION["gitVersion"])
    return _pb_str(1, "2.0") + bytes([0x12]) + _pb_len(len(info)) + info + bytes([0x42, 0x00])


# ---- the server ------------------------------------------------------------

class StandIn:
    def __init__(self, host, port, certfile, keyfile, ca_pem, control_port=None, history=1000):
        self.store = api.Store(history)
        self.auth = Auth()
        self.faults = Faults()
        self.registry = api.Registry(self.store, self.admit)
        self.host, self.port = host, port
        self.advertise = []   # more API server addresses the `kubernetes` Endpoints list (an HA control plane)
        self.ca_pem = ca_pem
        self.certfile, self.keyfile = certfile, keyfile
        self.control_port = control_port
        self.bookmark_interval = 60.0
        self.legacy_discovery = False   # True: answer only the legacy documents
        self.log_provider = None       # (ns, pod, container, opts) -> bytes iterator
        self.kubelet_control = None    # (node, action) -> bool
        self.controllers = controllers.Controllers(self)
        self.servers = []
        self.stopping = threading.Event()
        self.registry.hooks.append(self.controllers.on_change)

    # -- lifecycle
    def start(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.certfile, self.keyfile)
        srv = _Server((self.host, self.port), _Handler)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
        srv.standin = self
        srv.control = False
        self.servers.append(srv)
        if self.control_port:
            c = _Server((self.host, self.control_port), _Handler)
            c.standin = self
            c.control = True
            self.servers.append(c)
        for s in self.servers:
            threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()
        self.controllers.bootstrap()
        self.controllers.start()

    def stop(self):
        self.stopping.set()
        with self.store.cond:
            self.store.cond.notify_all()
        self.controllers.stop()
        for s in self.servers:
            s.shutdown()
            s.server_close()

    @property
    def url(self):
        return "https://%s:%d" % (self.host, self.port)

    # -- admission
    def admit(self, rt, op, obj, old, ctx, phase, sub):
        if phase == "mutate":
            if rt.kind == "Pod" and rt.group == "" and op == "CREATE" and sub == "":
                obj = self.controllers.admit_pod(obj, ctx)
            obj = self.controllers.webhooks(rt, op, obj, old, ctx, True, sub)
            return obj
        self.controllers.webhooks(rt, op, obj, old, ctx, False, sub)
        return obj

    # -- RBAC
    def authorize(self, user, groups, verb, group, resource, sub, ns, name):
        if "system:masters" in groups:
            return True
        if group == "authorization.k8s.io" and resource == "selfsubjectaccessreviews" and verb == "create":
            return True     # the default system:basic-user binding
        res = resource + ("/" + sub if sub else "")
        st = self.store

        def rules_allow(rules):
            for r in rules or []:
                if not _m(r.get("verbs"), verb):
                    continue
                if not _m(r.get("apiGroups"), group):
                    continue
                if not (_m(r.get("resources"), res) or (sub and "*/" + sub in (r.get("resources") or []))
                        or (sub and resource + "/*" in (r.get("resources") or []))):
                    continue
                if r.get("resourceNames") and name not in r["resourceNames"]:
                    continue
                return True
            return False

        def subj_match(subjects, bns):
            for s in subjects or []:
                k = s.get("kind")
                if k == "User" and s.get("name") == user:
                    return True
                if k == "Group" and s.get("name") in groups:
                    return True
                if k == "ServiceAccount" and user == "system:serviceaccount:%s:%s" % (s.get("namespace") or bns, s.get("name")):
                    return True
            return False

        def role_rules(ref, bns):
            if ref.get("kind") == "ClusterRole":
                o = st.get(("rbac.authorization.k8s.io", "clusterroles"), "", ref.get("name"))
            else:
                o = st.get(("rbac.authorization.k8s.io", "roles"), bns, ref.get("name"))
            return (o or {}).get("rules")

        crbs, _ = st.list(("rbac.authorization.k8s.io", "clusterrolebindings"))
        for b in crbs:
            if subj_match(b.get("subjects"), "") and rules_allow(role_rules(b.get("roleRef") or {}, "")):
                return True
        if ns:
            rbs, _ = st.list(("rbac.authorization.k8s.io", "rolebindings"), ns)
            for b in rbs:
                if subj_match(b.get("subjects"), ns) and rules_allow(role_rules(b.get("roleRef") or {}, ns)):
                    return True
        return False

    def forbidden(self, user, verb, group, resource, sub, ns, name):
        res = resource + ("/" + sub if sub else "")
        what = '%s "%s"' % (res if not group else "%s.%s" % (res, group), name) if name else (res if not group else "%s.%s" % (res, group))
        scope = 'in the namespace "%s"' % ns if ns else "at the cluster scope"
        msg = '%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s" %s' % (what, user, verb, res, group, scope)
        return ApiError(403, "Forbidden", msg, {"name": name, "group": group, "kind": resource})


def name_of(o):
    return ((o or {}).get("metadata") or {}).get("name", "")


def _m(lst, v):
    return bool(lst) and ("*" in lst or v in lst)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass


class _Abort(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "turnfleet-standin"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        if hasattr(self.connection, "do_handshake"):
            self.connection.settimeout(10)
            try:
                self.connection.do_handshake()
            except (ssl.SSLError, OSError):
                self.close_connection = True
                raise _Abort()
            self.connection.settimeout(None)

    def handle(self):
        try:
            super().handle()
        except (_Abort, ConnectionError, ssl.SSLError, OSError):
            pass

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    # -- responses
    def _send(self, code, body, ctype="application/json", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        fault = getattr(self, "fault", None)
        if fault and fault.get("slowHeaders") and not self._hold(float(fault["slowHeaders"])):
            raise _Abort()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for w in getattr(self, "warnings", []):
            self.send_header("Warning", '299 - %s' % json.dumps(w))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.status_code = code
        if self.command == "HEAD":
            return
        if fault and fault.get("truncate"):
            self.wfile.write(body[:max(1, len(body) // 2)])
            self.wfile.flush()
            self.close_connection = True
            raise _Abort()
        if fault and fault.get("slowBody"):
            n = max(1, len(body) // 10)
            for i in range(0, len(body), n):
                self.wfile.write(body[i:i + n])
                self.wfile.flush()
                if not self._hold(float(fault["slowBody"]) / 10):
                    raise _Abort()
            return
        self.wfile.write(body)

    def _hold(self, seconds):
        """Wait as a stalled or slow server does: False when a restart (or the end) came first."""
        si = self.server.standin
        st = si.store
        end = time.time() + seconds
        with st.cond:
            while time.time() < end and st.epoch == self.epoch and not si.stopping.is_set():
                st.cond.wait(end - time.time())
            return st.epoch == self.epoch and not si.stopping.is_set()

    def _error(self, e):
        self._send(e.code, e.status(), headers=e.headers)

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                line = self.rfile.readline().strip()
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            return data
        return self.rfile.read(n) if n else b""

    def _json_body(self, raw, allow_pb=True):
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype == "application/vnd.kubernetes.protobuf" and allow_pb:
            try:
                return k8sproto.decode(raw)
            except k8sproto.UnsupportedKind as e:
                raise ApiError(415, "UnsupportedMediaType", str(e))
            except k8sproto.DecodeError as e:
                raise bad_request("error decoding body: %s" % e)
        if ctype not in ("application/json", "*/*", "application/yaml") and not ctype.endswith("+json"):
            raise ApiError(415, "UnsupportedMediaType",
                           'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf')
        try:
            return json.loads(raw or b"null")
        except ValueError as e:
            raise bad_request("error decoding body: %s" % e)

    # -- dispatch
    def _dispatch(self, method):
        si = self.server.standin
        u = urllib.parse.urlsplit(self.path)
        self.q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        self.warnings = []
        self.status_code = 0
        self.fault = None
        self.epoch = si.store.epoch     # a restart after this ends the request
        raw = b""
        user = "-"
        try:
            raw = self._read_body()
            if self.server.control:
                return self._control(method, u.path, raw)
            user, groups, uid = self._authenticate()
            self.fault = si.faults.match(method, u.path, u.query, user)
            self._apply_fault(self.fault)
            self._route(method, u.path, raw, user, groups, uid)
        except ApiError as e:
            self._error(e)
        except _Abort:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # a bug of the stand-in: answer it like the real server's panic handler
            import traceback
            traceback.print_exc()
            try:
                self._error(ApiError(500, "InternalError", "Internal error occurred: %s" % e))
            except Exception:
                pass
        finally:
            if not self.server.control:
                si.faults.record({"method": method, "path": u.path, "query": u.query,
                                  "contentType": self.headers.get("Content-Type") or "",
                                  "accept": self.headers.get("Accept") or "",
                                  "userAgent": self.headers.get("User-Agent") or "",
                                  "user": user, "bodySize": len(raw), "code": self.status_code,
                                  "time": time.time()})

    def _authenticate(self):
        si = self.server.standin
        h = self.headers.get("Authorization") or ""
        scheme, _, cred = h.partition(" ")
        if scheme.lower() == "bearer" and cred.strip():     # the scheme is case-insensitive (RFC 7235)
            t = si.auth.lookup(cred.strip())
            if t:
                return t[0], t[2] + (["system:authenticated"] if "system:authenticated" not in t[2] else []), t[1]
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def _apply_fault(self, f):
        if not f:
            return
        if f.get("reset"):
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            self.close_connection = True
            raise _Abort()
        code = f.get("status")
        if code:
            reason, msg = {500: ("InternalError", "Internal error occurred: injected fault"),
                           503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
                           504: ("Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request"),
                           429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
                           409: ("Conflict", "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again"),
                           410: ("Expired", "too old resource version: 1 (%s)" % self.server.standin.store.rv),
                           401: ("Unauthorized", "Unauthorized"),
                           403: ("Forbidden", "forbidden: injected fault")}.get(code, ("InternalError", "injected fault"))
            headers = {}
            details = None
            if f.get("retryAfter") is not None:
                headers["Retry-After"] = str(f["retryAfter"])
                details = {"retryAfterSeconds": int(f["retryAfter"])}
            raise ApiError(code, reason, f.get("message", msg), details, headers)

    def _accept_table(self):
        a = self.headers.get("Accept") or ""
        return "as=Table" in a

    def _route(self, method, path, raw, user, groups, uid):
        si = self.server.standin
        parts = [p for p in path.split("/") if p]
        if path in ("/healthz", "/readyz", "/livez"):
            return self._send(200, "ok", "text/plain")
        if path == "/version":
            return self._send(200, SERVER_VERSION)
        if path == "/openapi/v2" or path == "/swagger-2.0.0.pb-v1":
            return self._send(200, openapi_v2_protobuf(), "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        if path == "/openapi/v3":
            return self._send(200, tables.openapi_v3_index(si))
        if path.startswith("/openapi/v3/"):
            return self._send(200, tables.openapi_v3_doc(si, path[len("/openapi/v3/"):]))
        if path in ("/api", "/apis") and "as=APIGroupDiscoveryList" in (self.headers.get("Accept") or "") \
                and not si.legacy_discovery:
            return self._send(200, tables.aggregated(si, path == "/api"), tables.AGGREGATED)
        if path == "/api":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "%s:%d" % (si.host, si.port)}]})
        if path == "/apis":
            return self._send(200, tables.group_list(si))
        if not parts or parts[0] not in ("api", "apis"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if parts[0] == "api":
            group, rest = "", parts[1:]
        else:
            group, rest = parts[1], parts[2:]
            if not rest:
                g = tables.group(si, group)
                if g is None:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return self._send(200, g)
        if not rest:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        version, rest = rest[0], rest[1:]
        if not rest:
            rl = tables.resource_list(si, group, version)
            if rl is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self._send(200, rl)
        ns = ""
        if rest[0] == "namespaces" and len(rest) == 3 and group == "" and rest[2] in ("status", "finalize"):
            pass
        elif rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rt = si.store.type_for(group, version, plural)
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if rt.namespaced and not ns and name:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub and sub not in (["status"] if rt.status else []) + (["scale"] if rt.scale_paths() is not None else []) + [s[0] for s in rt.extra_sub]:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        watch = parse_bool(self.q.get("watch", ""))
        verb = {"GET": "get" if name else ("watch" if watch else "list"), "POST": "create", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete" if name else "deletecollection"}[method]
        if sub == "log" or sub == "token":
            verb = "get" if sub == "log" else "create"
        if not si.authorize(user, groups, verb, group, plural, sub, ns, name):
            raise si.forbidden(user, verb, group, plural, sub, ns, name)
        ctx = api.Context(user, groups, uid, dry_run=self.q.get("dryRun") == "All",
                          field_validation=self.q.get("fieldValidation", "Warn"),
                          field_manager=self.q.get("fieldManager", ""))
        ctx.subresource = sub
        ctx.user_agent = self.headers.get("User-Agent") or ""
        self.warnings = ctx.warnings
        if method == "GET" and not name:
            return self._list_or_watch(rt, ns, watch)
        if method == "GET":
            if sub == "log":
                return self._log(rt, ns, name)
            obj = si.registry.get(rt, ns, name)
            if sub == "scale":
                obj = tables.scale_of(rt, obj)
            elif self._accept_table():
                return self._send(200, tables.table(si, rt, [obj], obj["metadata"]["resourceVersion"]))
            return self._send(200, obj)
        if method == "POST":
            if name and sub == "token":
                return self._token_request(rt, ns, name, raw, ctx)
            if name:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            body = self._json_body(raw)
            if not isinstance(body, dict):
                raise bad_request("the body of the request must be an object")
            self._check_body_kind(rt, body)
            if rt.kind == "SelfSubjectAccessReview":
                return self._self_review(rt, body, user, groups)
            out = si.registry.create(rt, ns, body, ctx)
            return self._send(201, out)
        if method == "PUT":
            if not name:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            body = self._json_body(raw)
            if not isinstance(body, dict):
                raise bad_request("the body of the request must be an object")
            if sub == "scale":
                return self._scale_write(rt, ns, name, lambda s: body, ctx)
            self._check_body_kind(rt, body)
            out = si.registry.update(rt, ns, name, body, ctx, sub)
            return self._send(200, out)
        if method == "PATCH":
            if not name:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            if (self.headers.get("Content-Type") or "").split(";")[0].strip() == "application/apply-patch+yaml" and sub != "scale":
                return self._apply(rt, ns, name, sub, raw, ctx)
            patcher = self._patcher(rt, raw)
            if sub == "scale":
                return self._scale_write(rt, ns, name, patcher, ctx)
            out = si.registry.update(rt, ns, name, None, ctx, sub, patcher=patcher)
            return self._send(200, out)
        if method == "DELETE":
            if not name:
                return self._delete_collection(rt, ns, ctx)
            opts = self._json_body(raw) if raw else None
            if not opts:
                opts = {}
                if "gracePeriodSeconds" in self.q:
                    opts["gracePeriodSeconds"] = int(self.q["gracePeriodSeconds"])
                if "propagationPolicy" in self.q:
                    opts["propagationPolicy"] = self.q["propagationPolicy"]
            still, gone = si.registry.delete(rt, ns, name, opts, ctx)
            if still is not None:
                return self._send(200, still)
            return self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                    "details": {"name": name, "group": rt.group, "kind": rt.plural,
                                                "uid": gone["metadata"].get("uid")}})
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def _check_body_kind(self, rt, body):
        k = body.get("kind")
        if k and k != rt.kind:
            raise bad_request('%s in version "%s" cannot be handled as a %s: the object provided is unrecognized (must be of type %s)' % (k, rt.version, rt.kind, rt.kind))

    def _patcher(self, rt, raw):
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        accepted = PATCH_TYPES_BUILTIN if rt.builtin else PATCH_TYPES_CR
        if ctype not in accepted or ctype == "application/apply-patch+yaml":    # apply: on /scale only here
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media types include: " + ", ".join(accepted))
        try:
            patch = json.loads(raw or b"null")
        except ValueError as e:
            raise bad_request("error decoding patch: %s" % e)
        if ctype == "application/json-patch+json":
            if not isinstance(patch, list):
                raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")

            def f(cur):
                try:
                    return json_patch(cur, patch)
                except JsonPatchTestFailed as e:
                    # NewGenericServerResponse(422, ...) as kube-apiserver's applyJSPatch builds it
                    raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request",
                                   {"group": rt.group, "kind": rt.plural, "name": name_of(cur),
                                    "causes": [{"reason": "UnexpectedServerResponse", "message": "%s: test failed" % e}]})
                except (KeyError, IndexError, ValueError, TypeError) as e:
                    raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request",
                                   {"group": rt.group, "kind": rt.plural, "name": name_of(cur),
                                    "causes": [{"reason": "UnexpectedServerResponse", "message": "%s" % e}]})
            return f
        if not isinstance(patch, dict):
            raise bad_request("the patch must be a JSON object")
        if ctype == "application/merge-patch+json":
            return lambda cur: merge_patch(cur, patch)
        return lambda cur: strategic_merge(cur, patch)

    def _apply(self, rt, ns, name, sub, raw, ctx):
        """Server-side apply: a patch of the object, or its create (201)."""
        si = self.server.standin
        if not ctx.field_manager:
            raise ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                           {"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
                               {"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]})
        try:
            cfg = json.loads(raw or b"null")
        except ValueError:
            import yaml     # python3-yaml: apply bodies may be YAML (kubectl sends JSON)
            try:
                cfg = yaml.safe_load(raw)
            except yaml.YAMLError as e:
                raise bad_request("error decoding YAML: %s" % e)
        if not isinstance(cfg, dict):
            raise bad_request("the apply configuration must be an object")
        self._check_body_kind(rt, cfg)
        if not cfg.get("apiVersion") or not cfg.get("kind"):
            raise bad_request("invalid object type: %s, Kind=%s" % (cfg.get("apiVersion", ""), cfg.get("kind", "")))
        if (cfg.get("metadata") or {}).get("name", name) != name:
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)" % (cfg["metadata"]["name"], name))
        force = parse_bool(self.q.get("force", ""))
        try:
            out = si.registry.update(rt, ns, name, None, ctx, sub, patcher=lambda cur: ssa.apply(rt, cur, cfg, ctx, force, sub))
            return self._send(200, out)
        except ApiError as e:
            if e.code != 404 or sub or e.details is None or e.details.get("kind") != rt.plural:
                raise
        obj = ssa.apply(rt, None, cfg, ctx, force)
        obj.setdefault("metadata", {})["name"] = name
        return self._send(201, si.registry.create(rt, ns, obj, ctx))

    def _scale_write(self, rt, ns, name, scale_patcher, ctx):
        si = self.server.standin
        paths = rt.scale_paths()
        spec_path = paths.get("specReplicasPath", ".spec.replicas").lstrip(".").split(".")

        def patcher(cur):
            scale = tables.scale_of(rt, cur)
            new = scale_patcher(copy.deepcopy(scale))
            want = (new.get("spec") or {}).get("replicas")
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                from util import conflict_modified
                raise conflict_modified(rt, name)
            if not isinstance(want, int) or isinstance(want, bool) or want < 0:
                raise invalid(rt, name, [("FieldValueInvalid", "spec.replicas", "Invalid value: %s: must be greater than or equal to 0" % json.dumps(want))])
            o = copy.deepcopy(cur)
            d = o
            for p in spec_path[:-1]:
                d = d.setdefault(p, {})
            d[spec_path[-1]] = want
            return o
        out = si.registry.update(rt, ns, name, None, ctx, "scale", patcher=patcher)
        return self._send(200, tables.scale_of(rt, out))

    def _self_review(self, rt, body, user, groups):
        """`kubectl auth can-i`: the RBAC decision for the caller, never stored."""
        si = self.server.standin
        spec = body.get("spec") or {}
        ra = spec.get("resourceAttributes")
        if ra is None:
            allowed, reason = True, ""      # non-resource URLs are open to authenticated users here
        else:
            allowed = si.authorize(user, groups, ra.get("verb", ""), ra.get("group", ""), ra.get("resource", ""),
                                   ra.get("subresource", ""), ra.get("namespace", ""), ra.get("name", ""))
            reason = "RBAC: allowed by the stand-in's RBAC" if allowed else ""
        out = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"creationTimestamp": None},
               "spec": spec, "status": {"allowed": allowed}}
        if reason:
            out["status"]["reason"] = reason
        return self._send(201, out)

    def _token_request(self, rt, ns, name, raw, ctx):
        si = self.server.standin
        sa = si.store.get(("", "serviceaccounts"), ns, name)
        if sa is None:
            raise not_found(rt, name)
        body = self._json_body(raw) or {}
        spec = body.get("spec") or {}
        secs = int(spec.get("expirationSeconds") or 3600)
        if secs < 600:
            raise invalid(rt, name, [("FieldValueInvalid", "spec.expirationSeconds", "Invalid value: %d: may not specify a duration less than 10 minutes" % secs)])
        tok = si.auth.issue_sa(ns, name, sa["metadata"]["uid"], secs)
        exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + secs))
        return self._send(201, {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                                "metadata": {"name": name, "namespace": ns, "creationTimestamp": None},
                                "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                                         "expirationSeconds": secs, "boundObjectRef": spec.get("boundObjectRef")},
                                "status": {"token": tok, "expirationTimestamp": exp}})

    def _delete_collection(self, rt, ns, ctx):
        si = self.server.standin
        labels = parse_label_selector(self.q.get("labelSelector", ""))
        fields = parse_field_selector(self.q.get("fieldSelector", ""), rt.fields)
        items, rv = si.store.list(rt.storage, ns if rt.namespaced else None, labels, fields)
        out = []
        for o in items:
            try:
                still, gone = si.registry.delete(rt, ns or o["metadata"].get("namespace", ""), o["metadata"]["name"], {}, ctx)
                out.append(still or gone)
            except ApiError as e:
                if e.code != 404:
                    raise
        return self._send(200, {"kind": rt.kind + "List", "apiVersion": rt.api_version,
                                "metadata": {"resourceVersion": str(si.store.rv)}, "items": out})

    def _log(self, rt, ns, name):
        si = self.server.standin
        pod = si.registry.get(rt, ns, name)
        names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        inits = [c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []]
        c = self.q.get("container")
        if not c:
            if len(names) != 1:
                raise bad_request("a container name must be specified for pod %s, choose one of: [%s]" % (name, " ".join(names)) +
                                  (" or one of the init containers: [%s]" % " ".join(inits) if inits else ""))
            c = names[0]
        if c not in names + inits:
            raise bad_request("container %s is not valid for pod %s" % (c, name))
        if si.log_provider is None or (pod.get("spec") or {}).get("nodeName") is None:
            raise bad_request('container "%s" in pod "%s" is waiting to start: ContainerCreating' % (c, name))
        data = si.log_provider(pod, c, self.q)
        if data is None:
            raise bad_request('container "%s" in pod "%s" is waiting to start: ContainerCreating' % (c, name))
        if not parse_bool(self.q.get("follow", "")):
            return self._send(200, b"".join(data), "text/plain")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.status_code = 200
        for chunk in data:
            if chunk:
                self._chunk(chunk)
        self._chunk(b"")

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    # -- list and watch
    def _list_or_watch(self, rt, ns, watch):
        si = self.server.standin
        labels = parse_label_selector(self.q.get("labelSelector", ""))
        fields = parse_field_selector(self.q.get("fieldSelector", ""), rt.fields)
        if watch:
            return self._watch(rt, ns, labels, fields)
        items, rv = si.store.list(rt.storage, ns if rt.namespaced else None, labels, fields)
        items = [api.to_view(rt, o) for o in items]
        if self._accept_table():
            return self._send(200, tables.table(si, rt, items, rv))
        if rt.builtin:
            for o in items:
                o.pop("apiVersion", None)
                o.pop("kind", None)
        return self._send(200, {"kind": rt.kind + "List", "apiVersion": rt.api_version,
                                "metadata": {"resourceVersion": rv}, "items": items})

    def _watch(self, rt, ns, labels, fields):
        si = self.server.standin
        st = si.store
        q = self.q
        rv_s = q.get("resourceVersion", "")
        bookmarks = parse_bool(q.get("allowWatchBookmarks", ""))
        initial = parse_bool(q.get("sendInitialEvents", ""))
        timeout = float(q.get("timeoutSeconds") or random.uniform(1800, 3600))
        deadline = time.time() + timeout
        table = self._accept_table()
        fault = self.fault or {}
        ns_f = ns if rt.namespaced else None

        def match(o):
            if o is None:
                return False
            if ns_f and o["metadata"].get("namespace") != ns_f:
                return False
            if labels and not label_match(labels, o["metadata"].get("labels")):
                return False
            if fields and not field_match(fields, o):
                return False
            return True

        with st.cond:
            epoch = st.epoch
            if rv_s in ("", "0") or initial:
                snapshot = [o for o in st.list(rt.storage, ns_f, labels, fields)[0]]
                cursor = st.rv
                pending = []
            else:
                try:
                    rv = int(rv_s)
                except ValueError:
                    raise bad_request('invalid resource version: %s' % rv_s)
                evs = st.events_after(rv)
                snapshot = []
                if evs is None:
                    pending = None
                else:
                    pending = list(evs)
                cursor = max(rv, st.rv) if pending is not None else st.rv
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.status_code = 200
        sent = [0]

        def emit(typ, obj):
            if table and typ in ("ADDED", "MODIFIED", "DELETED"):
                body = tables.table(si, rt, [obj], obj["metadata"].get("resourceVersion"), sent[0] > 0)
            else:
                body = obj
            line = json.dumps({"type": typ, "object": body}).encode() + b"\n"
            if fault.get("truncate") and sent[0] >= int(fault.get("afterEvents", 0)):
                self._chunk(line[:len(line) // 2])
                self.close_connection = True
                raise _Abort()
            if fault.get("resetMidStream") and sent[0] >= int(fault.get("afterEvents", 0)):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                raise _Abort()
            if fault.get("expireMidStream") and sent[0] >= int(fault.get("afterEvents", 0)):
                expired()
                raise _Abort()
            self._chunk(line)
            sent[0] += 1

        def expired():
            e = ApiError(410, "Expired", "too old resource version: %s (%s)" % (rv_s or 0, st.compacted - 1 if st.compacted > 1 else st.rv))
            self._chunk(json.dumps({"type": "ERROR", "object": e.status()}).encode() + b"\n")
            self._chunk(b"")
            self.close_connection = True

        def bookmark(rv, initial_end=False):
            md = {"resourceVersion": str(rv)}
            if initial_end:
                md["annotations"] = {"k8s.io/initial-events-end": "true"}
            self._chunk(json.dumps({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": md}}).encode() + b"\n")

        try:
            if pending is None:
                expired()
                return
            if fault.get("stall"):
                if not self._hold(float(fault.get("stallSeconds", timeout))):
                    raise _Abort()           # a restart: the connection dies with the old server
                self.close_connection = True
                return
            for o in snapshot:
                emit("ADDED", api.to_view(rt, o))
            if initial and bookmarks:
                bookmark(cursor, True)
            last_bm = time.time()
            while True:
                for ev in pending:
                    if ev.storage != rt.storage:
                        continue
                    m_new, m_old = match(ev.obj), match(ev.old)
                    o = api.to_view(rt, copy.deepcopy(ev.obj))
                    if ev.type == "DELETED":
                        if m_old or m_new:
                            emit("DELETED", o)
                    elif m_new:
                        emit("MODIFIED" if m_old else "ADDED", o)
                    elif m_old:
                        emit("DELETED", o)
                now = time.time()
                if now >= deadline:
                    break
                with st.cond:
                    while st.rv <= cursor and st.epoch == epoch and not si.stopping.is_set():
                        left = deadline - time.time()
                        if bookmarks:
                            left = min(left, si.bookmark_interval - (time.time() - last_bm))
                        if left <= 0:
                            break
                        st.cond.wait(min(left, 5.0))
                    if st.epoch != epoch or si.stopping.is_set():
                        pending = None
                    else:
                        evs = st.events_after(cursor)
                        if evs is None:
                            pending = "expired"
                        else:
                            pending = list(evs)
                            cursor = st.rv
                if pending is None:
                    break
                if pending == "expired":
                    expired()
                    return
                if bookmarks and time.time() - last_bm >= si.bookmark_interval:
                    bookmark(cursor)
                    last_bm = time.time()
            if bookmarks and time.time() >= deadline:
                bookmark(cursor)
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True

    # -- control endpoint
    def _control(self, method, path, raw):
        si = self.server.standin
        body = json.loads(raw) if raw else {}
        out = {"ok": True}
        if path == "/faults" and method == "POST":
            out = {"id": si.faults.add(body)}
        elif path == "/faults" and method == "DELETE":
            si.faults.clear()
        elif path == "/faults" and method == "GET":
            out = {"rules": si.faults.rules}
        elif path == "/requests" and method == "GET":
            since = int(self.q.get("since", "0"))
            with si.faults.lock:
                out = {"requests": [r for r in si.faults.log if r["seq"] > since]}
        elif path == "/requests" and method == "DELETE":
            with si.faults.lock:
                si.faults.log = []
        elif path == "/tokens" and method == "POST":
            tok = body.get("token") or pysecrets.token_urlsafe(24)
            si.auth.add(tok, body.get("user", "admin"), body.get("groups", ["system:masters"]))
            out = {"token": tok}
        elif path == "/tokens/revoke" and method == "POST":
            out = {"revoked": si.auth.revoke(body.get("token", ""))}
        elif path == "/compact" and method == "POST":
            si.store.compact()
            out = {"compacted": si.store.compacted}
        elif path == "/restart" and method == "POST":
            si.store.restart()
            out = {"resourceVersion": str(si.store.rv)}
        elif path == "/bookmarks" and method == "POST":
            si.bookmark_interval = float(body.get("interval", 60))
        elif path == "/history" and method == "POST":
            with si.store.cond:
                si.store.history_max = int(body.get("size", 1000))
        elif path.startswith("/kubelets/") and method == "POST":
            node, action = path.split("/")[2:4]
            if si.kubelet_control is None or not si.kubelet_control(node, action):
                return self._send(404, {"error": "no such kubelet or action"})
        elif path == "/healthz":
            return self._send(200, "ok", "text/plain")
        else:
            return self._send(404, {"error": "unknown control path %s" % path})
        return self._send(200, out)
