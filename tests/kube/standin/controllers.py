"""What kube-controller-manager and the built-in admission plugins do, as far
as the stand-in needs: CRD establishment and cleanup, namespace lifecycle,
default service accounts and kube-root-ca.crt, the owner-reference garbage
collector (background, foreground, orphan), the node lifecycle controller,
the ServiceAccount admission plugin, and admission webhook calls; the
workload controllers are in workloads.py."""
import base64
import copy
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
import uuid

import api
import tables
import workloads
from util import (ApiError, gen_suffix, label_match, now_time, parse_time, selector_from_labelselector)

SYSTEM = dict(user="system:kube-controller-manager", groups=("system:masters",))


def _ctx():
    return api.Context(**SYSTEM)


class Controllers:
    def __init__(self, si):
        self.si = si
        self.stop_ev = threading.Event()
        self.thread = None
        self.node_grace = 40.0
        self.workloads = workloads.Workloads(si)

    # -- bootstrap and synchronous hooks
    def bootstrap(self):
        reg = self.si.registry
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            try:
                reg.create(reg.store.type_for("", "v1", "namespaces"), "", {"metadata": {"name": ns}}, _ctx())
            except ApiError:
                pass
        try:
            reg.create(reg.store.type_for("", "v1", "services"), "default",
                       {"metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
                        "spec": {"clusterIP": self.si.host, "ports": [{"name": "https", "port": self.si.port, "protocol": "TCP", "targetPort": self.si.port}]}}, _ctx())
        except ApiError:
            pass
        # as kube-apiserver's endpoint reconciler keeps it: every API server's address and port
        try:
            reg.create(reg.store.type_for("", "v1", "endpoints"), "default",
                       {"metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                        "subsets": [{"addresses": [{"ip": a} for a in [self.si.host] + list(self.si.advertise)],
                                     "ports": [{"name": "https", "port": self.si.port, "protocol": "TCP"}]}]}, _ctx())
        except ApiError:
            pass

    def on_change(self, rt, typ, obj):
        reg = self.si.registry
        if rt.kind == "Namespace" and rt.group == "" and typ == "ADDED":
            ns = obj["metadata"]["name"]
            for t, body in ((("", "v1", "serviceaccounts"), {"metadata": {"name": "default"}}),
                            (("", "v1", "configmaps"), {"metadata": {"name": "kube-root-ca.crt", "annotations": {
                                "kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                                                        "data": {"ca.crt": self.si.ca_pem}})):
                try:
                    reg.create(reg.store.type_for(*t), ns, body, _ctx())
                except ApiError:
                    pass
        if rt.kind == "CustomResourceDefinition":
            self._crd_changed(typ, obj)
        with self.si.store.cond:
            self.si.store.cond.notify_all()

    def _crd_changed(self, typ, crd):
        st = self.si.store
        sp = crd["spec"]
        if typ == "DELETED":
            st.remove_types(sp["group"], sp["names"]["plural"])
            return
        if crd["metadata"].get("deletionTimestamp"):
            return
        st.remove_types(sp["group"], sp["names"]["plural"])
        for t in api.crd_types(crd):
            st.add_type(t)
        status = copy.deepcopy(crd.get("status") or {})
        now = now_time()
        conds = {c["type"]: c for c in status.get("conditions") or []}
        want = [("NamesAccepted", "NoConflicts", "no conflicts found"), ("Established", "InitialNamesAccepted", "the initial names have been accepted")]
        out = []
        for typ_, reason, msg in want:
            c = conds.get(typ_)
            if c is None or c.get("status") != "True":
                c = {"type": typ_, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg}
            out.append(c)
        status["conditions"] = out
        status["acceptedNames"] = {k: v for k, v in sp["names"].items()}
        stored = list(status.get("storedVersions") or [])
        for v in sp.get("versions") or []:
            if v.get("storage") and v["name"] not in stored:
                stored.append(v["name"])
        status["storedVersions"] = stored
        if status != crd.get("status"):
            rt = st.type_for("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            try:
                self.si.registry.update(rt, "", crd["metadata"]["name"], None, _ctx(), "status",
                                        patcher=lambda cur: dict(cur, status=status))
            except ApiError:
                pass

    # -- built-in admission: the ServiceAccount plugin
    def admit_pod(self, pod, ctx):
        sp = pod.setdefault("spec", {})
        ns = pod["metadata"]["namespace"]
        sa_name = sp.get("serviceAccountName") or "default"
        sa = self.si.store.get(("", "serviceaccounts"), ns, sa_name)
        if sa is None:
            raise ApiError(403, "Forbidden", 'pods "%s" is forbidden: error looking up service account %s/%s: serviceaccount "%s" not found' % (pod["metadata"].get("name", ""), ns, sa_name, sa_name),
                           {"name": pod["metadata"].get("name", ""), "kind": "pods"})
        auto = sp.get("automountServiceAccountToken")
        if auto is None:
            auto = sa.get("automountServiceAccountToken", True)
        if not auto:
            return pod
        mount = "/var/run/secrets/kubernetes.io/serviceaccount"
        for c in sp.get("containers") or []:
            if any(m.get("mountPath") == mount for m in c.get("volumeMounts") or []):
                return pod
        vname = "kube-api-access-" + gen_suffix()
        sp.setdefault("volumes", []).append({"name": vname, "projected": {"defaultMode": 0o644, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}})
        for c in (sp.get("containers") or []) + (sp.get("initContainers") or []):
            c.setdefault("volumeMounts", []).append({"name": vname, "readOnly": True, "mountPath": mount})
        return pod

    # -- admission webhooks
    def webhooks(self, rt, op, obj, old, ctx, mutating, sub):
        st = self.si.store
        kind = "mutatingwebhookconfigurations" if mutating else "validatingwebhookconfigurations"
        if rt.group == "admissionregistration.k8s.io":
            return obj   # webhooks never see their own configuration (as upstream)
        cfgs, _ = st.list(("admissionregistration.k8s.io", kind))
        for cfg in cfgs:
            for wh in cfg.get("webhooks") or []:
                if not self._wh_matches(wh, rt, op, obj, old, sub):
                    continue
                obj = self._call(wh, rt, op, obj, old, ctx, mutating, sub)
        return obj

    def _wh_matches(self, wh, rt, op, obj, old, sub):
        res = rt.plural + ("/" + sub if sub else "")
        ok = False
        for r in wh.get("rules") or []:
            ops = r.get("operations") or []
            if "*" not in ops and op not in ops:
                continue
            if not _in(r.get("apiGroups"), rt.group) or not _in(r.get("apiVersions"), rt.version):
                continue
            rs = r.get("resources") or []
            if not ("*" in rs or res in rs or (sub and ("*/" + sub in rs or rt.plural + "/*" in rs)) or ("*/*" in rs)):
                continue
            scope = r.get("scope", "*")
            if scope == "Namespaced" and not rt.namespaced or scope == "Cluster" and rt.namespaced:
                continue
            ok = True
            break
        if not ok:
            return False
        target = obj if obj is not None else old
        osel = selector_from_labelselector(wh.get("objectSelector"))
        if osel and not (label_match(osel, ((obj or {}).get("metadata") or {}).get("labels")) or
                         label_match(osel, ((old or {}).get("metadata") or {}).get("labels"))):
            return False
        nsel = selector_from_labelselector(wh.get("namespaceSelector"))
        if nsel and rt.namespaced:
            nso = self.si.store.get(("", "namespaces"), "", target["metadata"].get("namespace", ""))
            if not label_match(nsel, (nso or {}).get("metadata", {}).get("labels")):
                return False
        return True

    def _call(self, wh, rt, op, obj, old, ctx, mutating, sub):
        name = wh.get("name", "")
        cc = wh.get("clientConfig") or {}
        timeout = int(wh.get("timeoutSeconds") or 10)
        fail = wh.get("failurePolicy", "Fail") != "Ignore"
        versions = wh.get("admissionReviewVersions") or ["v1"]
        if "v1" not in versions:
            if fail:
                raise ApiError(500, "InternalError", 'Internal error occurred: failed calling webhook "%s": webhook does not accept v1 AdmissionReview' % name)
            return obj
        send_obj, send_old = obj, old
        kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        if sub == "scale":
            send_obj = tables.scale_of(rt, obj) if obj else None
            send_old = tables.scale_of(rt, old) if old else None
            kind = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
        view = lambda o: api.to_view(rt, copy.deepcopy(o)) if o is not None and sub != "scale" else o
        uid = str(uuid.uuid4())
        md = (obj or old or {}).get("metadata") or {}
        req = {"uid": uid, "kind": kind, "resource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
               "subResource": sub, "requestKind": kind,
               "requestResource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
               "requestSubResource": sub, "name": md.get("name", ""), "namespace": md.get("namespace", ""),
               "operation": op, "userInfo": {"username": ctx.user, "uid": ctx.uid, "groups": ctx.groups},
               "object": view(send_obj), "oldObject": view(send_old), "dryRun": bool(ctx.dry_run),
               "options": {"kind": {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(op, ""), "apiVersion": "meta.k8s.io/v1"}}
        if not md.get("namespace"):
            req.pop("namespace")
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
        if cc.get("url"):
            url = cc["url"]
            u = urllib.parse.urlsplit(url)
            host, port, path, connect = u.hostname, u.port or 443, u.path or "/", u.hostname
        elif cc.get("service"):
            s = cc["service"]
            svc = self.si.store.get(("", "services"), s.get("namespace", ""), s.get("name", ""))
            host = "%s.%s.svc" % (s.get("name"), s.get("namespace"))
            port = int(s.get("port", 443))
            path = s.get("path") or "/"
            url = "https://%s:%d%s" % (host, port, path)
            connect, port = self._service_endpoint(svc, port)
        else:
            connect = None
            url = ""
        full = "%s?timeout=%ds" % (url, timeout)
        try:
            if not connect and cc.get("service") and ((svc or {}).get("spec") or {}).get("selector"):
                raise OSError('no endpoints available for service "%s"' % cc["service"].get("name"))
            if not connect:
                raise OSError("dial tcp: lookup %s: no such host" % url)
            sctx = ssl.create_default_context()
            if cc.get("caBundle"):
                sctx = ssl.create_default_context(cadata=base64.b64decode(cc["caBundle"]).decode())
            conn = _Conn(host, connect, port, sctx, timeout)
            body = json.dumps(review).encode()
            conn.request("POST", "%s?timeout=%ds" % (path, timeout), body, {"Content-Type": "application/json", "Accept": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            if resp.status != 200:
                raise _WebhookBad("expected webhook response of 200, got %d" % resp.status)
            out = json.loads(data)
            r = out.get("response")
            if out.get("kind") != "AdmissionReview" or out.get("apiVersion") != "admission.k8s.io/v1":
                raise _WebhookBad('expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s' % (out.get("apiVersion"), out.get("kind")))
            if r is None:
                raise _WebhookBad("webhook response was absent")
            if r.get("uid") != uid:
                raise _WebhookBad("expected response.uid=%q, got %q".replace("%q", '"%s"') % (uid, r.get("uid")))
            if "allowed" not in r:
                raise _WebhookBad("webhook response was absent")
        except _WebhookBad as e:
            if fail:
                raise ApiError(500, "InternalError", 'Internal error occurred: failed calling webhook "%s": received invalid webhook response: %s' % (name, e))
            return obj
        except (OSError, ValueError, ssl.SSLError, http.client.HTTPException) as e:
            if fail:
                msg = "context deadline exceeded" if isinstance(e, (socket.timeout, TimeoutError)) else str(e)
                if isinstance(e, ssl.SSLCertVerificationError):
                    msg = "tls: failed to verify certificate: %s" % e.verify_message
                raise ApiError(500, "InternalError", 'Internal error occurred: failed calling webhook "%s": failed to call webhook: Post "%s": %s' % (name, full, msg))
            return obj
        for w in r.get("warnings") or []:
            w = w if len(w) <= 256 else w[:253] + "..."
            ctx.warnings.append(w)
        if not r.get("allowed"):
            s = r.get("status") or {}
            code = s.get("code") or 400
            if code < 400:
                code = 400
            msg = 'admission webhook "%s" denied the request' % name
            if s.get("message"):
                msg += ": " + s["message"]
            elif s.get("reason"):
                msg += ": " + s["reason"]
            else:
                msg += " without explanation"
            raise ApiError(code, s.get("reason", ""), msg, s.get("details"))
        if mutating and r.get("patch") and sub != "scale":
            if r.get("patchType") != "JSONPatch":
                raise ApiError(500, "InternalError", 'Internal error occurred: failed calling webhook "%s": received invalid webhook response: expected patchType=JSONPatch' % name)
            from util import json_patch
            try:
                patched = json_patch(api.to_view(rt, copy.deepcopy(obj)), json.loads(base64.b64decode(r["patch"])))
            except Exception as e:
                raise ApiError(500, "InternalError", 'Internal error occurred: JSON Patch: %s' % e)
            return api.from_view(rt, patched)
        return obj

    def _service_endpoint(self, svc, port):
        """Where a Service's port leads, as kube-proxy would route it: with a selector, a Ready pod's podIP
        and the port's targetPort (a name is looked up in the pod's container ports); without one, the
        clusterIP itself (a test that gives the Service an address it serves on)."""
        spec = (svc or {}).get("spec") or {}
        sel = spec.get("selector")
        if not sel:
            return spec.get("clusterIP"), port
        sp = next((p for p in spec.get("ports") or [] if int(p.get("port", 0)) == port), None)
        if sp is None:
            return None, port
        target = sp.get("targetPort", port)
        pods, _ = self.si.store.list(("", "pods"), svc["metadata"]["namespace"])
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            st = pod.get("status") or {}
            labels = pod["metadata"].get("labels") or {}
            if pod["metadata"].get("deletionTimestamp") or not st.get("podIP") or any(labels.get(k) != v for k, v in sel.items()):
                continue
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or []):
                continue
            if isinstance(target, str) and not target.isdigit():
                named = [cp.get("containerPort") for c in (pod.get("spec") or {}).get("containers") or []
                         for cp in c.get("ports") or [] if cp.get("name") == target]
                if not named:
                    continue
                return st["podIP"], int(named[0])
            return st["podIP"], int(target)
        return None, port

    # -- the background loop
    def start(self):
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def stop(self):
        self.stop_ev.set()
        with self.si.store.cond:
            self.si.store.cond.notify_all()
        if self.thread:
            self.thread.join(5)

    def _loop(self):
        st = self.si.store
        seen = -1
        last_nodes = 0
        while not self.stop_ev.is_set():
            with st.cond:
                if st.rv == seen:
                    st.cond.wait(1.0)
                rv = st.rv
            if self.stop_ev.is_set():
                return
            try:
                if rv != seen:
                    seen = rv
                    self._gc()
                    self._namespaces()
                    self._crd_cleanup()
                    self.workloads.sync()
                if time.time() - last_nodes >= 1.0:
                    last_nodes = time.time()
                    self._node_lifecycle()
            except ApiError:
                pass
            except Exception:
                import traceback
                traceback.print_exc()

    def _all(self):
        st = self.si.store
        with st.cond:
            out = []
            for storage, b in st.objs.items():
                for (ns, name), o in b.items():
                    out.append((storage, ns, name, o))
            return out

    def _rt(self, storage):
        for t in self.si.store.types.values():
            if t.storage == storage and (t.group != "events.k8s.io"):
                if t.crd is None or t.crd.get("storage"):
                    return t
        for t in self.si.store.types.values():
            if t.storage == storage:
                return t
        return None

    def _gc(self):
        objs = self._all()
        uids = {}
        for storage, ns, name, o in objs:
            uids[o["metadata"].get("uid")] = (storage, ns, name, o)
        reg = self.si.registry
        for storage, ns, name, o in objs:
            md = o["metadata"]
            refs = md.get("ownerReferences") or []
            if not refs:
                continue
            rt = self._rt(storage)
            if rt is None:
                continue
            # a namespaced owner counts only in the dependent's namespace
            live = [r for r in refs if r.get("uid") in uids and uids[r["uid"]][1] in ("", ns)]
            owners_orphaning = [r for r in live if "orphan" in (uids[r["uid"]][3]["metadata"].get("finalizers") or [])
                                and uids[r["uid"]][3]["metadata"].get("deletionTimestamp")]
            fg = [r for r in live if "foregroundDeletion" in (uids[r["uid"]][3]["metadata"].get("finalizers") or [])
                  and uids[r["uid"]][3]["metadata"].get("deletionTimestamp")]
            if not live or (fg and len(fg) == len(live)):
                if not md.get("deletionTimestamp"):
                    try:
                        reg.delete(rt, ns, name, {"propagationPolicy": "Foreground" if fg else "Background",
                                                  "preconditions": {"uid": md["uid"]}}, _ctx())
                    except ApiError:
                        pass
                continue
            drop = {r["uid"] for r in owners_orphaning} | {r.get("uid") for r in refs if r not in live}
            if drop:
                try:
                    reg.update(rt, ns, name, None, _ctx(), patcher=lambda cur, drop=drop: _drop_refs(cur, drop))
                except ApiError:
                    pass
        # owners waiting on dependents
        deps = {}
        for storage, ns, name, o in objs:
            for r in o["metadata"].get("ownerReferences") or []:
                deps.setdefault(r.get("uid"), []).append((r, o))
        for storage, ns, name, o in objs:
            md = o["metadata"]
            fins = md.get("finalizers") or []
            if not md.get("deletionTimestamp"):
                continue
            rt = self._rt(storage)
            if rt is None:
                continue
            if "orphan" in fins and not deps.get(md["uid"]):
                self._drop_finalizer(rt, ns, name, "orphan")
            if "foregroundDeletion" in fins:
                blocking = [d for r, d in deps.get(md["uid"], []) if r.get("blockOwnerDeletion")]
                if not blocking:
                    self._drop_finalizer(rt, ns, name, "foregroundDeletion")

    def _drop_finalizer(self, rt, ns, name, fin):
        def p(cur):
            cur = copy.deepcopy(cur)
            cur["metadata"]["finalizers"] = [f for f in cur["metadata"].get("finalizers") or [] if f != fin]
            return cur
        try:
            self.si.registry.update(rt, ns, name, None, _ctx(), patcher=p)
        except ApiError:
            pass

    def _namespaces(self):
        st = self.si.store
        nss, _ = st.list(("", "namespaces"))
        for nso in nss:
            if not nso["metadata"].get("deletionTimestamp"):
                continue
            ns = nso["metadata"]["name"]
            left = 0
            for storage, ons, name, o in self._all():
                if ons != ns:
                    continue
                rt = self._rt(storage)
                if rt is None or not rt.namespaced:
                    continue
                left += 1
                if not o["metadata"].get("deletionTimestamp"):
                    try:
                        self.si.registry.delete(rt, ns, name, {"propagationPolicy": "Background"}, _ctx())
                    except ApiError:
                        pass
            if left == 0 and (nso.get("spec") or {}).get("finalizers"):
                rt = st.type_for("", "v1", "namespaces")

                def p(cur):
                    cur = copy.deepcopy(cur)
                    cur["spec"]["finalizers"] = []
                    return cur
                try:
                    self.si.registry.update(rt, "", ns, None, _ctx(), patcher=p)
                except ApiError:
                    pass

    def _crd_cleanup(self):
        st = self.si.store
        crds, _ = st.list(("apiextensions.k8s.io", "customresourcedefinitions"))
        rt_crd = st.type_for("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for crd in crds:
            md = crd["metadata"]
            if not md.get("deletionTimestamp") or "customresourcecleanup.apiextensions.k8s.io" not in (md.get("finalizers") or []):
                continue
            storage = (crd["spec"]["group"], crd["spec"]["names"]["plural"])
            rt = self._rt(storage)
            items = list(st.bucket(storage).items())
            for (ns, name), o in items:
                if rt is not None and not o["metadata"].get("deletionTimestamp"):
                    try:
                        self.si.registry.delete(rt, ns, name, {}, _ctx())
                    except ApiError:
                        pass
            if not st.bucket(storage):
                self._drop_finalizer(rt_crd, "", md["name"], "customresourcecleanup.apiextensions.k8s.io")

    def _node_lifecycle(self):
        st = self.si.store
        nodes, _ = st.list(("", "nodes"))
        rt = st.type_for("", "v1", "nodes")
        now = time.time()
        for n in nodes:
            conds = (n.get("status") or {}).get("conditions") or []
            ready = next((c for c in conds if c.get("type") == "Ready"), None)
            if ready is None or ready.get("status") == "Unknown":
                continue
            hb = parse_time(ready.get("lastHeartbeatTime"))
            if hb is None or now - hb <= self.node_grace:
                continue

            def p(cur):
                cur = copy.deepcopy(cur)
                for c in (cur.get("status") or {}).get("conditions") or []:
                    if c.get("type") in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
                        c["status"] = "Unknown"
                        c["reason"] = "NodeStatusUnknown"
                        c["message"] = "Kubelet stopped posting node status."
                        c["lastTransitionTime"] = now_time()
                return cur
            try:
                self.si.registry.update(rt, "", n["metadata"]["name"], None, _ctx(), "status", patcher=p)
            except ApiError:
                continue
            self._mark_pods_not_ready(n["metadata"]["name"])

    def _mark_pods_not_ready(self, node):
        """What the node lifecycle controller does to the pods of a silent node."""
        st = self.si.store
        prt = st.type_for("", "v1", "pods")
        pods, _ = st.list(("", "pods"), None, None, [("spec.nodeName", "=", node)])
        for pod in pods:
            def p(cur):
                cur = copy.deepcopy(cur)
                for c in (cur.get("status") or {}).get("conditions") or []:
                    if c.get("type") == "Ready" and c.get("status") != "False":
                        c["status"] = "False"
                        c["lastTransitionTime"] = now_time()
                return cur
            try:
                self.si.registry.update(prt, pod["metadata"]["namespace"], pod["metadata"]["name"], None, _ctx(), "status", patcher=p)
            except ApiError:
                pass


class _WebhookBad(Exception):
    pass


class _Conn(http.client.HTTPSConnection):
    """HTTPS to `connect` while verifying the certificate for `host`."""

    def __init__(self, host, connect, port, ctx, timeout):
        super().__init__(host, port, context=ctx, timeout=timeout)
        self._connect_to = connect
        self._ctx = ctx

    def connect(self):
        sock = socket.create_connection((self._connect_to, self.port), self.timeout)
        self.sock = self._ctx.wrap_socket(sock, server_hostname=self.host)


def _in(lst, v):
    return bool(lst) and ("*" in lst or v in lst)


def _drop_refs(cur, drop):
    cur = copy.deepcopy(cur)
    cur["metadata"]["ownerReferences"] = [r for r in cur["metadata"].get("ownerReferences") or [] if r.get("uid") not in drop]
    if not cur["metadata"]["ownerReferences"]:
        del cur["metadata"]["ownerReferences"]
    return cur
