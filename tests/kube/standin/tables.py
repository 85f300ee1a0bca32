"""What clients read about the API rather than from it: discovery documents,
OpenAPI v3, Table rows for `kubectl get`, and Scale objects."""
import hashlib
import json

from util import human_age, jsonpath


def _groups(si):
    groups = {}
    for t in si.store.types.values():
        if t.group == "":
            continue
        groups.setdefault(t.group, set()).add(t.version)
    return groups


def _preferred(si, g, versions):
    # the storage version of a CRD first, else the highest
    for t in si.store.types.values():
        if t.group == g and t.crd is not None and t.crd.get("storage"):
            return t.version
    return sorted(versions, key=_vkey, reverse=True)[0]


def _vkey(v):
    import re
    m = re.match(r"v(\d+)(alpha|beta)?(\d*)", v)
    if not m:
        return (0, 0, 0)
    return (int(m.group(1)), {"alpha": 0, "beta": 1, None: 2}[m.group(2)], int(m.group(3) or 0))


def group(si, name):
    gs = _groups(si)
    if name not in gs:
        return None
    vs = sorted(gs[name], key=_vkey, reverse=True)
    pref = _preferred(si, name, vs)
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name,
            "versions": [{"groupVersion": "%s/%s" % (name, v), "version": v} for v in vs],
            "preferredVersion": {"groupVersion": "%s/%s" % (name, pref), "version": pref}}


def group_list(si):
    out = []
    for name in sorted(_groups(si)):
        g = group(si, name)
        g.pop("kind")
        g.pop("apiVersion")
        out.append(g)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}


def resource_list(si, g, v):
    ts = [t for t in si.store.types.values() if t.group == g and t.version == v]
    if not ts:
        return None
    res = []
    for t in sorted(ts, key=lambda t: t.plural):
        e = {"name": t.plural, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind,
             "verbs": t.verbs, "storageVersionHash": hashlib.sha256(("%s/%s" % t.storage).encode()).hexdigest()[:12]}
        if t.short:
            e["shortNames"] = t.short
        if t.categories:
            e["categories"] = t.categories
        res.append(e)
        if t.status:
            res.append({"name": t.plural + "/status", "singularName": "", "namespaced": t.namespaced,
                        "kind": t.kind, "verbs": ["get", "patch", "update"]})
        if t.scale_paths() is not None:
            res.append({"name": t.plural + "/scale", "singularName": "", "namespaced": t.namespaced,
                        "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
        for name, kind, sg, sv, verbs in t.extra_sub:
            e = {"name": t.plural + "/" + name, "singularName": "", "namespaced": t.namespaced, "kind": kind, "verbs": verbs}
            if sg:
                e["group"], e["version"] = sg, sv
            res.append(e)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "%s/%s" % (g, v) if g else v, "resources": res}


AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def aggregated(si, legacy_core):
    """apidiscovery.k8s.io/v2 APIGroupDiscoveryList for /api (core) or /apis."""
    groups = {"": {"v1"}} if legacy_core else _groups(si)
    items = []
    for name in sorted(groups):
        vs = sorted(groups[name], key=_vkey, reverse=True)
        if not legacy_core:
            pref = _preferred(si, name, vs)
            vs = [pref] + [v for v in vs if v != pref]
        versions = []
        for v in vs:
            rl = resource_list(si, name, v) or {"resources": []}
            res = {}
            for r in rl["resources"]:
                base, _, sub = r["name"].partition("/")
                if not sub:
                    e = {"resource": base, "responseKind": {"group": "", "version": "", "kind": r["kind"]},
                         "scope": "Namespaced" if r["namespaced"] else "Cluster", "singularResource": r["singularName"],
                         "verbs": r["verbs"]}
                    for k in ("shortNames", "categories"):
                        if r.get(k):
                            e[k] = r[k]
                    res[base] = e
                else:
                    res.setdefault(base, {"resource": base, "scope": "Namespaced" if r["namespaced"] else "Cluster",
                                          "verbs": [], "responseKind": {"group": "", "version": "", "kind": ""}})
                    res[base].setdefault("subresources", []).append(
                        {"subresource": sub, "responseKind": {"group": r.get("group", ""), "version": r.get("version", ""), "kind": r["kind"]},
                         "verbs": r["verbs"]})
            versions.append({"version": v, "resources": [res[k] for k in sorted(res)], "freshness": "Current"})
        items.append({"metadata": {"name": name, "creationTimestamp": None}, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


def _gv_hash(si, g, v):
    h = hashlib.sha256()
    for t in sorted((t for t in si.store.types.values() if t.group == g and t.version == v), key=lambda t: t.plural):
        h.update(t.plural.encode())
        if t.crd is not None:
            h.update(json.dumps(t.crd, sort_keys=True).encode())
    return h.hexdigest()[:32].upper()


def openapi_v3_index(si):
    paths = {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=%s" % _gv_hash(si, "", "v1")}}
    for g, vs in _groups(si).items():
        for v in vs:
            paths["apis/%s/%s" % (g, v)] = {"serverRelativeURL": "/openapi/v3/apis/%s/%s?hash=%s" % (g, v, _gv_hash(si, g, v))}
    return {"paths": paths}


def openapi_v3_doc(si, path):
    """A document per group/version: the CRDs' schemas, with the
    x-kubernetes-group-version-kind that kubectl keys them by."""
    parts = path.split("/")
    g, v = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2] if len(parts) > 2 else "")
    schemas, paths = {}, {}
    for t in si.store.types.values():
        if t.group != g or t.version != v or t.crd is None:
            continue
        s = json.loads(json.dumps(t.schema() or {"type": "object"}))
        props = s.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props["metadata"] = {"type": "object"}
        gvk = {"group": g, "version": v, "kind": t.kind}
        s["x-kubernetes-group-version-kind"] = [gvk]
        ref = "%s.%s.%s" % (".".join(reversed(g.split("."))), v, t.kind)
        schemas[ref] = s
        # the resource's paths, whose operations name the kind (kubectl explain finds the GVR's kind there)
        base = "/apis/%s/%s/%s%s" % (g, v, "namespaces/{namespace}/" if t.namespaced else "", t.plural)
        body = {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/" + ref}}}}}
        paths[base + "/{name}"] = {verb: {"operationId": "%s%s" % (verb, t.kind), "responses": body,
                                          "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}
                                   for verb, action in (("get", "get"), ("put", "put"), ("patch", "patch"))}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths,
            "components": {"schemas": schemas}}


# ---- tables ----------------------------------------------------------------

def _col(name, typ="string", fmt="", desc="", prio=0):
    return {"name": name, "type": typ, "format": fmt, "description": desc or name, "priority": prio}


def _pod_row(o):
    st = o.get("status") or {}
    cs = st.get("containerStatuses") or []
    n = len((o.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(c.get("restartCount", 0) for c in cs)
    reason = st.get("reason") or st.get("phase") or "Pending"
    for c in cs:
        s = c.get("state") or {}
        if s.get("waiting") and s["waiting"].get("reason"):
            reason = s["waiting"]["reason"]
        elif s.get("terminated") and reason in ("Running", "Succeeded", "Failed"):
            r = s["terminated"].get("reason") or ("Signal:%d" % s["terminated"]["signal"] if s["terminated"].get("signal") else "ExitCode:%d" % s["terminated"].get("exitCode", 0))
            reason = r
    if reason == "Running" and n and ready < n and any((c.get("state") or {}).get("running") for c in cs):
        reason = "Running"
    inits = st.get("initContainerStatuses") or []
    if inits and not all((c.get("state") or {}).get("terminated", {}).get("exitCode") == 0 for c in inits):
        done = sum(1 for c in inits if (c.get("state") or {}).get("terminated", {}).get("exitCode") == 0)
        cur = inits[min(done, len(inits) - 1)]
        w = ((cur.get("state") or {}).get("waiting") or {}).get("reason")
        t = (cur.get("state") or {}).get("terminated")
        reason = "Init:" + (w if w and w != "PodInitializing" else
                            ("Error" if t and t.get("exitCode") else "%d/%d" % (done, len(inits))))
    if o["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    gates = (o.get("spec") or {}).get("readinessGates") or []
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    gates_s = "%d/%d" % (sum(1 for g in gates if conds.get(g.get("conditionType")) == "True"), len(gates)) if gates else "<none>"
    return ["%d/%d" % (ready, n), reason, restarts, human_age(o["metadata"].get("creationTimestamp")),
            st.get("podIP") or "<none>", (o.get("spec") or {}).get("nodeName") or "<none>", "<none>", gates_s]


def _node_row(o):
    conds = {c.get("type"): c.get("status") for c in (o.get("status") or {}).get("conditions") or []}
    s = {"True": "Ready", "False": "NotReady"}.get(conds.get("Ready"), "NotReady")
    if (o.get("spec") or {}).get("unschedulable"):
        s += ",SchedulingDisabled"
    addrs = (o.get("status") or {}).get("addresses") or []
    ip = lambda t: next((a["address"] for a in addrs if a.get("type") == t), "<none>")
    info = (o.get("status") or {}).get("nodeInfo") or {}
    return [s, "<none>", human_age(o["metadata"].get("creationTimestamp")), info.get("kubeletVersion", ""),
            ip("InternalIP"), ip("ExternalIP"), info.get("osImage", ""), info.get("kernelVersion", ""), info.get("containerRuntimeVersion", "")]


def _event_row(o):
    io = o.get("involvedObject") or o.get("regarding") or {}
    last = o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
    return [human_age(last), o.get("type", ""), o.get("reason", ""),
            "%s/%s" % ((io.get("kind") or "").lower(), io.get("name", "")), o.get("message") or o.get("note") or ""]


def _hpa_targets(o):
    """What kube-apiserver's printer shows before any metric is read (no HPA controller here)."""
    spec = o.get("spec") or {}
    out = ["cpu: <unknown>/%s%%" % spec["targetCPUUtilizationPercentage"]] if "targetCPUUtilizationPercentage" in spec else []
    for m in spec.get("metrics") or []:
        src = m.get(m.get("type", "")[:1].lower() + m.get("type", "")[1:]) or {}
        t = src.get("target") or {}
        want = ("%s%%" % t["averageUtilization"]) if t.get("type") == "Utilization" else (t.get("averageValue") or t.get("value") or "")
        out.append(("%s: " % src["name"] if m.get("type") in ("Resource", "ContainerResource") else "") + "<unknown>/%s" % want)
    return ", ".join(out) or "<none>"


def _hpa_row(o):
    spec, ref = o.get("spec") or {}, (o.get("spec") or {}).get("scaleTargetRef") or {}
    return ["%s/%s" % (ref.get("kind", ""), ref.get("name", "")), _hpa_targets(o), spec.get("minReplicas", 1),
            spec.get("maxReplicas"), (o.get("status") or {}).get("currentReplicas", 0), human_age(o["metadata"].get("creationTimestamp"))]


BUILTIN_COLUMNS = {
    "horizontalpodautoscalers": ([_col("Name", fmt="name"), _col("Reference"), _col("Targets"), _col("MinPods", "string"),
                                  _col("MaxPods", "string"), _col("Replicas", "string"), _col("Age")], lambda o: _hpa_row(o)),
    "pods": ([_col("Name", fmt="name"), _col("Ready"), _col("Status"), _col("Restarts", "string"), _col("Age"),
              _col("IP", prio=1), _col("Node", prio=1), _col("Nominated Node", prio=1), _col("Readiness Gates", prio=1)], _pod_row),
    "nodes": ([_col("Name", fmt="name"), _col("Status"), _col("Roles"), _col("Age"), _col("Version"),
               _col("Internal-IP", prio=1), _col("External-IP", prio=1), _col("OS-Image", prio=1),
               _col("Kernel-Version", prio=1), _col("Container-Runtime", prio=1)], _node_row),
    "namespaces": ([_col("Name", fmt="name"), _col("Status"), _col("Age")],
                   lambda o: [(o.get("status") or {}).get("phase", ""), human_age(o["metadata"].get("creationTimestamp"))]),
    "secrets": ([_col("Name", fmt="name"), _col("Type"), _col("Data", "integer"), _col("Age")],
                lambda o: [o.get("type", ""), len(o.get("data") or {}), human_age(o["metadata"].get("creationTimestamp"))]),
    "configmaps": ([_col("Name", fmt="name"), _col("Data", "integer"), _col("Age")],
                   lambda o: [len(o.get("data") or {}) + len(o.get("binaryData") or {}), human_age(o["metadata"].get("creationTimestamp"))]),
    "serviceaccounts": ([_col("Name", fmt="name"), _col("Secrets", "integer"), _col("Age")],
                        lambda o: [len(o.get("secrets") or []), human_age(o["metadata"].get("creationTimestamp"))]),
    "services": ([_col("Name", fmt="name"), _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), _col("Age")],
                 lambda o: [(o.get("spec") or {}).get("type", ""), (o.get("spec") or {}).get("clusterIP", ""), "<none>",
                            ",".join("%s/%s" % (p.get("port"), p.get("protocol", "TCP")) for p in (o.get("spec") or {}).get("ports") or []) or "<none>",
                            human_age(o["metadata"].get("creationTimestamp"))]),
    "deployments": ([_col("Name", fmt="name"), _col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer"),
                     _col("Age")],
                    lambda o: ["%d/%d" % ((o.get("status") or {}).get("readyReplicas", 0), (o.get("spec") or {}).get("replicas", 1)),
                               (o.get("status") or {}).get("updatedReplicas", 0),
                               (o.get("status") or {}).get("availableReplicas", 0),
                               human_age(o["metadata"].get("creationTimestamp"))]),
    "jobs": ([_col("Name", fmt="name"), _col("Completions"), _col("Duration"), _col("Age")],
             lambda o: ["%d/%d" % ((o.get("status") or {}).get("succeeded", 0), (o.get("spec") or {}).get("completions", 1)),
                        "", human_age(o["metadata"].get("creationTimestamp"))]),
    "cronjobs": ([_col("Name", fmt="name"), _col("Schedule"), _col("Suspend"), _col("Active", "integer"), _col("Last Schedule"),
                  _col("Age")],
                 lambda o: [(o.get("spec") or {}).get("schedule", ""), str(bool((o.get("spec") or {}).get("suspend"))),
                            len((o.get("status") or {}).get("active") or []), "<none>",
                            human_age(o["metadata"].get("creationTimestamp"))]),
    "leases": ([_col("Name", fmt="name"), _col("Holder"), _col("Age")],
               lambda o: [(o.get("spec") or {}).get("holderIdentity", ""), human_age(o["metadata"].get("creationTimestamp"))]),
}
EVENT_COLUMNS = ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")], _event_row)


def _cells_custom(rt, o):
    cols = (rt.crd or {}).get("additionalPrinterColumns")
    if not cols:
        return [_col("Name", fmt="name"), _col("Age", "date")], [o["metadata"]["name"], human_age(o["metadata"].get("creationTimestamp"))]
    defs = [_col("Name", fmt="name", desc="Name must be unique within a namespace.")]
    cells = [o["metadata"]["name"]]
    for c in cols:
        defs.append(_col(c["name"], c.get("type", "string"), c.get("format", ""), c.get("description", ""), c.get("priority", 0)))
        vals = jsonpath(o, c.get("jsonPath", ""))
        if not vals:
            cells.append(None)
            continue
        v = vals[0] if len(vals) == 1 else ",".join(str(x) for x in vals)
        if c.get("type") == "date":
            v = human_age(v) if isinstance(v, str) else None
        elif c.get("type") == "integer" and isinstance(v, (int, float)):
            v = int(v)
        cells.append(v)
    return defs, cells


def table(si, rt, items, rv, omit_defs=False):
    defs = None
    rows = []
    if rt.crd is not None:
        for o in items:
            d, cells = _cells_custom(rt, o)
            defs = d
            rows.append((o, cells))
        if defs is None:
            defs = _cells_custom(rt, {"metadata": {"name": ""}})[0]
    elif rt.plural == "events":
        defs = EVENT_COLUMNS[0]
        rows = [(o, EVENT_COLUMNS[1](o)) for o in items]
    elif rt.plural in BUILTIN_COLUMNS:
        defs, f = BUILTIN_COLUMNS[rt.plural]
        rows = [(o, [o["metadata"]["name"]] + f(o)) for o in items]
    else:
        defs = [_col("Name", fmt="name"), _col("Created At", "date")]
        rows = [(o, [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]) for o in items]
    out_rows = []
    for o, cells in rows:
        out_rows.append({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                                    "metadata": o["metadata"]}})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": None if omit_defs else defs, "rows": out_rows}


def scale_of(rt, o):
    paths = rt.scale_paths() or {}

    def get(path, dflt):
        if not path:
            return dflt
        v = jsonpath(o, path)
        return v[0] if v else dflt
    md = o["metadata"]
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in md},
            "spec": {"replicas": get(paths.get("specReplicasPath"), 0)},
            "status": {"replicas": get(paths.get("statusReplicasPath"), 0), "selector": get(paths.get("labelSelectorPath"), "")}}
