"""The stand-in's storage and registry: resource types, one resourceVersion
counter, bounded watch history, and the per-kind strategies (generation,
status subresources, finalizers, graceful pod deletion, secrets, CRDs)."""
import base64
import bisect
import copy
import re
import threading
import time
import uuid

import schema
import ssa
from util import (ApiError, canonical, conflict_modified, field_match, gen_suffix, invalid,
                  label_match, not_found, now_time)

DNS1123_SUB = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
               "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
               "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")

META_FIELDS = ("metadata.name", "metadata.namespace")
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class ResourceType:
    def __init__(self, group, version, plural, kind, namespaced=True, short=(), singular=None,
                 status=False, fields=(), storage=None, categories=(), crd=None, generation=False,
                 require_rv=False, verbs=None, extra_sub=()):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespaced = namespaced
        self.short = list(short)
        self.singular = singular or kind.lower()
        self.status = status
        self.fields = set(META_FIELDS) | set(fields)
        self.storage = storage or (group, plural)
        self.categories = list(categories)
        self.crd = crd                 # the CRD version entry for custom resources
        self.generation = generation or crd is not None
        self.require_rv = require_rv or crd is not None
        self.verbs = verbs or VERBS
        self.extra_sub = list(extra_sub)  # (name, kind, group, version, verbs)

    @property
    def builtin(self):
        return self.crd is None

    @property
    def api_version(self):
        return "%s/%s" % (self.group, self.version) if self.group else self.version

    def qualified(self):
        return "%s.%s" % (self.plural, self.group) if self.group else self.plural

    def scale_paths(self):
        if self.crd is None:
            return None
        return ((self.crd.get("subresources") or {}).get("scale"))

    def schema(self):
        if self.crd is None:
            return None
        return ((self.crd.get("schema") or {}).get("openAPIV3Schema"))


def builtin_types():
    T = ResourceType
    pod_fields = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                  "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName")
    ev_fields = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                 "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
                 "reason", "reportingComponent", "source", "type")
    return [
        T("", "v1", "namespaces", "Namespace", False, ("ns",), status=True, fields=("status.phase",),
          verbs=["create", "delete", "get", "list", "patch", "update", "watch"]),
        T("", "v1", "nodes", "Node", False, ("no",), status=True, fields=("spec.unschedulable",)),
        T("", "v1", "pods", "Pod", True, ("po",), status=True, fields=pod_fields, categories=("all",),
          extra_sub=[("log", "Pod", "", "v1", ["get"])]),
        T("", "v1", "secrets", "Secret", True, fields=("type",)),
        T("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
        T("", "v1", "events", "Event", True, ("ev",), fields=ev_fields),
        T("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",),
          extra_sub=[("token", "TokenRequest", "authentication.k8s.io", "v1", ["create"])]),
        T("", "v1", "services", "Service", True, ("svc",), status=True, categories=("all",)),
        T("", "v1", "endpoints", "Endpoints", True, ("ep",)),
        T("coordination.k8s.io", "v1", "leases", "Lease", True, require_rv=True),
        T("apps", "v1", "deployments", "Deployment", True, ("deploy",), status=True, generation=True, categories=("all",)),
        T("batch", "v1", "jobs", "Job", True, status=True, generation=True, categories=("all",)),
        T("batch", "v1", "cronjobs", "CronJob", True, ("cj",), status=True, generation=True, categories=("all",)),
        T("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ("hpa",), status=True,
          generation=True, categories=("all",)),
        T("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ("hpa",), status=True,
          generation=True, categories=("all",), storage=("autoscaling", "horizontalpodautoscalers")),
        T("events.k8s.io", "v1", "events", "Event", True, ("ev",), storage=("", "events"), fields=ev_fields),
        T("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
          ("crd", "crds"), status=True, generation=True),
        T("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
        T("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
        T("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
        T("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
        T("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
          "ValidatingWebhookConfiguration", False, generation=True),
        T("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False, verbs=["create"]),
        T("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
          "MutatingWebhookConfiguration", False, generation=True),
    ]


class Event:
    __slots__ = ("rv", "storage", "type", "obj", "old")

    def __init__(self, rv, storage, typ, obj, old):
        self.rv, self.storage, self.type, self.obj, self.old = rv, storage, typ, obj, old


class Store:
    """All objects, one RV counter, the bounded history watches read."""

    def __init__(self, history=1000):
        self.cond = threading.Condition()
        self.objs = {}          # storage -> {(ns, name): obj}
        self.rv = 100
        self.history = []       # [Event]
        self.history_rvs = []
        self.history_max = history
        self.compacted = self.rv  # a watch from an RV below this is expired
        self.epoch = 0          # bumped by a simulated restart: ends every watch
        self.types = {}         # (group, version, plural) -> ResourceType
        for t in builtin_types():
            self.add_type(t)

    # -- types
    def add_type(self, rt):
        self.types[(rt.group, rt.version, rt.plural)] = rt

    def remove_types(self, group, plural):
        for k in [k for k in self.types if k[0] == group and k[2] == plural]:
            del self.types[k]

    def type_for(self, group, version, plural):
        return self.types.get((group, version, plural))

    def type_by_kind(self, api_version, kind):
        g, _, v = api_version.rpartition("/")
        for t in self.types.values():
            if t.group == g and t.version == v and t.kind == kind:
                return t
        return None

    # -- reads
    def bucket(self, storage):
        return self.objs.setdefault(storage, {})

    def get(self, storage, ns, name):
        with self.cond:
            o = self.bucket(storage).get((ns or "", name))
            return copy.deepcopy(o) if o is not None else None

    def list(self, storage, ns=None, labels=None, fields=None):
        with self.cond:
            out = []
            for (ons, _n), o in sorted(self.bucket(storage).items()):
                if ns and ons != ns:
                    continue
                if labels and not label_match(labels, o["metadata"].get("labels")):
                    continue
                if fields and not field_match(fields, o):
                    continue
                out.append(copy.deepcopy(o))
            return out, str(self.rv)

    # -- writes (caller holds no lock; each is atomic)
    def _record(self, storage, typ, obj, old):
        ev = Event(self.rv, storage, typ, copy.deepcopy(obj), copy.deepcopy(old) if old else None)
        self.history.append(ev)
        self.history_rvs.append(self.rv)
        if len(self.history) > self.history_max:
            drop = len(self.history) - self.history_max
            self.compacted = self.history[drop - 1].rv + 1
            del self.history[:drop]
            del self.history_rvs[:drop]
        self.cond.notify_all()

    def commit(self, storage, ns, name, new, expect_rv=None, delete=False):
        """Store `new` (or delete) when the stored RV is still `expect_rv`
        (None: unconditional). Returns (obj, changed); raises KeyError on a
        lost race so the caller recomputes."""
        with self.cond:
            b = self.bucket(storage)
            key = (ns or "", name)
            cur = b.get(key)
            if expect_rv is not None:
                cur_rv = cur["metadata"]["resourceVersion"] if cur else None
                if cur_rv != expect_rv:
                    raise KeyError("stale")
            if delete:
                if cur is None:
                    raise KeyError("gone")
                self.rv += 1
                gone = copy.deepcopy(cur)
                gone["metadata"]["resourceVersion"] = str(self.rv)
                del b[key]
                self._record(storage, "DELETED", gone, cur)
                return gone, True
            if cur is not None and canonical(_strip_rv(cur)) == canonical(_strip_rv(new)):
                return copy.deepcopy(cur), False
            self.rv += 1
            new = copy.deepcopy(new)
            new["metadata"]["resourceVersion"] = str(self.rv)
            b[key] = new
            self._record(storage, "ADDED" if cur is None else "MODIFIED", new, cur)
            return copy.deepcopy(new), True

    # -- control
    def compact(self):
        with self.cond:
            self.history.clear()
            self.history_rvs.clear()
            self.compacted = self.rv + 1
            self.cond.notify_all()

    def restart(self):
        with self.cond:
            self.history.clear()
            self.history_rvs.clear()
            self.compacted = self.rv + 1
            self.epoch += 1
            self.cond.notify_all()

    def events_after(self, rv):
        """History strictly after rv; None when rv is older than the history."""
        if rv + 1 < self.compacted:
            return None
        i = bisect.bisect_right(self.history_rvs, rv)
        return self.history[i:]


def _strip_rv(o):
    o = dict(o)
    m = dict(o.get("metadata") or {})
    m.pop("resourceVersion", None)
    o["metadata"] = m
    return o


# ---- events.k8s.io/v1 <-> core/v1 -----------------------------------------

_EV_MAP = [("regarding", "involvedObject"), ("note", "message"), ("deprecatedSource", "source"),
           ("deprecatedFirstTimestamp", "firstTimestamp"), ("deprecatedLastTimestamp", "lastTimestamp"),
           ("deprecatedCount", "count"), ("reportingController", "reportingComponent")]


def event_to_core(o):
    o = copy.deepcopy(o)
    for new, old in _EV_MAP:
        if new in o:
            o[old] = o.pop(new)
    o["apiVersion"] = "v1"
    return o


def event_from_core(o):
    o = copy.deepcopy(o)
    for new, old in _EV_MAP:
        if old in o:
            o[new] = o.pop(old)
    o["apiVersion"] = "events.k8s.io/v1"
    return o


# ---- autoscaling/v1 <-> v2 (stored) ---------------------------------------

def _cpu_metric(m):
    r = m.get("resource") or {}
    return m.get("type") == "Resource" and r.get("name") == "cpu" and (r.get("target") or {}).get("type") == "Utilization"


def hpa_to_v1(o):
    """The v1 view carries the CPU utilization target only."""
    o = copy.deepcopy(o)
    spec = o.get("spec") or {}
    cpu = [m for m in spec.pop("metrics", None) or [] if _cpu_metric(m)]
    spec.pop("behavior", None)
    if cpu:
        spec["targetCPUUtilizationPercentage"] = cpu[0]["resource"]["target"].get("averageUtilization")
    st = o.get("status") or {}
    cur = [m for m in st.pop("currentMetrics", None) or [] if m.get("type") == "Resource" and (m.get("resource") or {}).get("name") == "cpu"]
    st.pop("conditions", None)
    if cur and (cur[0]["resource"].get("current") or {}).get("averageUtilization") is not None:
        st["currentCPUUtilizationPercentage"] = cur[0]["resource"]["current"]["averageUtilization"]
    return o


def hpa_from_v1(o):
    o = copy.deepcopy(o)
    spec = o.get("spec") or {}
    pct = spec.pop("targetCPUUtilizationPercentage", None)
    if pct is not None:
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": pct}}}]
    st = o.get("status") or {}
    cur = st.pop("currentCPUUtilizationPercentage", None)
    if cur is not None:
        st["currentMetrics"] = [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": cur}}}]
    return o


def _hpa_v1(rt):
    return rt.group == "autoscaling" and rt.version == "v1" and rt.kind == "HorizontalPodAutoscaler"


def to_view(rt, o):
    """Stored object -> what the client of rt sees."""
    if o is None:
        return None
    if rt.group == "events.k8s.io":
        o = event_from_core(o)
    elif _hpa_v1(rt):
        o = hpa_to_v1(o)
    o["apiVersion"] = rt.api_version
    o["kind"] = rt.kind
    return o


def from_view(rt, o):
    if rt.group == "events.k8s.io":
        return event_to_core(o)
    if _hpa_v1(rt):
        o = hpa_from_v1(o)
        o["apiVersion"] = "autoscaling/v2"
    return o


# ---- strategies ------------------------------------------------------------

class Context:
    """Per-request facts: who, which options, and the warnings to return."""

    def __init__(self, user="system:admin", groups=("system:masters",), uid="", dry_run=False,
                 field_validation="Warn", field_manager=""):
        self.user, self.groups, self.uid = user, list(groups), uid
        self.dry_run = dry_run
        self.field_validation = field_validation
        self.field_manager = field_manager
        self.subresource = ""
        self.warnings = []
        self.user_agent = ""         # the default field manager of an HTTP request
        self.apply = None            # managed fields a server-side apply decided (ssa.apply)
        self.managed_base = None     # managedFields an update's body set, instead of the stored ones


class Registry:
    """The write paths every caller (HTTP, kubelet, controllers) goes through."""

    def __init__(self, store, admission=None):
        self.store = store
        self.admission = admission   # object with mutate(...)/validate(...) or None
        self.hooks = []              # callables(rt, ev_type, obj) after commits (CRD registration)

    # -- helpers
    def _ns_check(self, rt, ns, creating):
        if not rt.namespaced:
            return
        nso = self.store.get(("", "namespaces"), "", ns)
        if nso is None:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % ns,
                           {"name": ns, "kind": "namespaces"})
        if creating and nso["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", 'unable to create new content in namespace %s because it is being terminated' % ns,
                           {"name": ns, "kind": "namespaces", "causes": [{"reason": "NamespaceTerminating",
                            "message": 'namespace %s is being terminated' % ns, "field": "metadata.namespace"}]})

    def _validate_meta(self, rt, obj, errs):
        md = obj["metadata"]
        name = md.get("name", "")
        if not name:
            errs.append(("FieldValueRequired", "metadata.name", "Required value: name or generateName is required"))
        elif rt.kind not in ("Event",) and (not re.match(DNS1123_SUB, name) or len(name) > 253):
            errs.append(("FieldValueInvalid", "metadata.name", "Invalid value: %s: %s" % (schema.gofmt(name), DNS1123_MSG)))
        owners = md.get("ownerReferences") or []
        if sum(1 for r in owners if r.get("controller")) > 1:
            errs.append(("FieldValueInvalid", "metadata.ownerReferences", "Invalid value: []v1.OwnerReference: Only one reference can have Controller set to true."))
        for i, r in enumerate(owners):
            for f in ("apiVersion", "kind", "name", "uid"):
                if not r.get(f):
                    errs.append(("FieldValueInvalid", "metadata.ownerReferences[%d].%s" % (i, f), "Invalid value: \"\": %s must not be empty" % f))

    def _prepare_create(self, rt, ns, obj, ctx):
        obj = copy.deepcopy(obj)
        md = obj.setdefault("metadata", {})
        if rt.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + gen_suffix()
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_time()
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
            md.pop(k, None)
        if not md.get("labels"):
            md.pop("labels", None)
        if not md.get("annotations"):
            md.pop("annotations", None)
        if rt.generation:
            md["generation"] = 1
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        obj = from_view(rt, obj)
        if rt.status and rt.crd is not None:
            obj.pop("status", None)
        self._defaults(rt, obj, None)
        return obj

    def _defaults(self, rt, obj, old):
        k = rt.kind
        if rt.storage == ("", "secrets"):
            sd = obj.pop("stringData", None)
            if sd:
                data = obj.setdefault("data", {})
                for key, v in sd.items():
                    data[key] = base64.b64encode(v.encode()).decode()
            obj.setdefault("type", "Opaque")
        elif k == "Namespace":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            st = obj.setdefault("status", {})
            st.setdefault("phase", "Active")
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif k == "Pod" and rt.group == "":
            sp = obj.setdefault("spec", {})
            sp.setdefault("restartPolicy", "Always")
            sp.setdefault("terminationGracePeriodSeconds", 30)
            sp.setdefault("dnsPolicy", "ClusterFirst")
            sp.setdefault("schedulerName", "default-scheduler")
            sp.setdefault("serviceAccountName", sp.get("serviceAccount") or "default")
            sp.setdefault("serviceAccount", sp["serviceAccountName"])
            for c in sp.get("containers") or []:
                c.setdefault("terminationMessagePath", "/dev/termination-log")
                c.setdefault("imagePullPolicy", "Always" if str(c.get("image", "")).endswith(":latest") or ":" not in str(c.get("image", "")) else "IfNotPresent")
                for p in c.get("ports") or []:
                    p.setdefault("protocol", "TCP")
            if old is None:
                obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif k == "Service":
            sp = obj.setdefault("spec", {})
            sp.setdefault("type", "ClusterIP")
            for p in sp.get("ports") or []:
                p.setdefault("protocol", "TCP")
                p.setdefault("targetPort", p.get("port"))
            if old is None and not sp.get("clusterIP"):
                n = sum(1 for _ in self.store.bucket(("", "services"))) + 1
                sp["clusterIP"] = "10.96.%d.%d" % (n // 250, n % 250 + 1)
            elif old is not None:
                sp.setdefault("clusterIP", (old.get("spec") or {}).get("clusterIP"))
            sp.setdefault("clusterIPs", [sp["clusterIP"]])
            sp.setdefault("sessionAffinity", "None")
            obj.setdefault("status", {"loadBalancer": {}})
        elif k == "Job" and rt.group == "batch":
            sp = obj.setdefault("spec", {})
            for f, v in (("backoffLimit", 6), ("completions", 1), ("parallelism", 1)):
                sp.setdefault(f, v)
            if old is None and not sp.get("selector") and not sp.get("manualSelector"):
                md = obj["metadata"]
                labels = {"batch.kubernetes.io/controller-uid": md["uid"], "controller-uid": md["uid"],
                          "batch.kubernetes.io/job-name": md["name"], "job-name": md["name"]}
                tmd = sp.setdefault("template", {}).setdefault("metadata", {})
                tmd["labels"] = dict(tmd.get("labels") or {}, **labels)
                sp["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": md["uid"]}}
        elif k == "Deployment" and rt.group == "apps":
            sp = obj.setdefault("spec", {})
            sp.setdefault("replicas", 1)
            sp.setdefault("strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        elif k == "Event" and not obj.get("type"):
            obj["type"] = "Normal"
        elif k == "CustomResourceDefinition":
            sp = obj.setdefault("spec", {})
            names = sp.setdefault("names", {})
            if names.get("kind"):
                names.setdefault("singular", names["kind"].lower())
                names.setdefault("listKind", names["kind"] + "List")
            sp.setdefault("conversion", {"strategy": "None"})
        elif k in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            for w in obj.get("webhooks") or []:
                w.setdefault("failurePolicy", "Fail")
                w.setdefault("matchPolicy", "Equivalent")
                w.setdefault("timeoutSeconds", 10)
                w.setdefault("namespaceSelector", {})
                w.setdefault("objectSelector", {})
                if k.startswith("Mutating"):
                    w.setdefault("reinvocationPolicy", "Never")
                for r in w.get("rules") or []:
                    r.setdefault("scope", "*")

    def _validate(self, rt, obj, old, ctx):
        errs = []
        self._validate_meta(rt, obj, errs)
        md = obj["metadata"]
        if old is not None:
            om = old["metadata"]
            if om.get("deletionTimestamp") and len(set(md.get("finalizers") or []) - set(om.get("finalizers") or [])):
                errs.append(("FieldValueForbidden", "metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers %s" %
                             schema.gofmt(sorted(set(md.get("finalizers") or []) - set(om.get("finalizers") or [])))))
            for f in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                if md.get(f) != om.get(f):
                    errs.append(("FieldValueInvalid", "metadata." + f, "Invalid value: %s: field is immutable; may only be changed via deletion" % schema.gofmt(md.get(f))))
        if rt.crd is not None:
            sch = rt.schema()
            if sch:
                schema.validate(obj, sch, old, "", errs)
        elif rt.kind == "Secret":
            for k, v in (obj.get("data") or {}).items():
                try:
                    base64.b64decode(v, validate=True)
                except Exception:
                    errs.append(("FieldValueInvalid", "data[%s]" % k, "Invalid value: %s: illegal base64 data" % schema.gofmt(v)))
        elif rt.kind == "Pod":
            cs = (obj.get("spec") or {}).get("containers")
            if not cs:
                errs.append(("FieldValueRequired", "spec.containers", "Required value"))
            for i, c in enumerate(cs or []):
                if not c.get("name"):
                    errs.append(("FieldValueRequired", "spec.containers[%d].name" % i, "Required value"))
                if not c.get("image"):
                    errs.append(("FieldValueRequired", "spec.containers[%d].image" % i, "Required value"))
            if old is not None:
                a = dict(obj.get("spec") or {})
                b = dict(old.get("spec") or {})
                for d in (a, b):
                    d.pop("activeDeadlineSeconds", None)
                    d.pop("tolerations", None)
                    d["containers"] = [{kk: vv for kk, vv in c.items() if kk != "image"} for c in d.get("containers") or []]
                if canonical(a) != canonical(b):
                    errs.append(("FieldValueForbidden", "spec", "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"))
        elif rt.kind == "Event" and old is None:
            if obj.get("eventTime"):
                for f in ("reportingComponent", "reportingInstance", "action", "reason"):
                    if not obj.get(f):
                        ext = {"reportingComponent": "reportingController"}.get(f, f) if rt.group else f
                        errs.append(("FieldValueRequired", ext, "Required value"))
            elif (obj.get("involvedObject") or {}).get("namespace", md.get("namespace")) != md.get("namespace"):
                errs.append(("FieldValueInvalid", "involvedObject.namespace", "Invalid value: %s: does not match event.namespace" % schema.gofmt((obj.get("involvedObject") or {}).get("namespace"))))
        elif rt.kind == "CustomResourceDefinition":
            self._validate_crd(obj, errs)
        if errs:
            raise invalid(rt, md.get("name", ""), errs)

    def _validate_crd(self, obj, errs):
        sp = obj.get("spec") or {}
        names = sp.get("names") or {}
        for f in ("plural", "kind"):
            if not names.get(f):
                errs.append(("FieldValueRequired", "spec.names." + f, "Required value"))
        if not sp.get("group"):
            errs.append(("FieldValueRequired", "spec.group", "Required value"))
        want = "%s.%s" % (names.get("plural"), sp.get("group"))
        if obj["metadata"].get("name") != want:
            errs.append(("FieldValueInvalid", "metadata.name", 'Invalid value: %s: must be spec.names.plural+"."+spec.group' % schema.gofmt(obj["metadata"].get("name"))))
        if sp.get("scope") not in ("Namespaced", "Cluster"):
            errs.append(("FieldValueNotSupported", "spec.scope", 'Unsupported value: %s: supported values: "Cluster", "Namespaced"' % schema.gofmt(sp.get("scope"))))
        vs = sp.get("versions") or []
        if not vs:
            errs.append(("FieldValueInvalid", "spec.versions", "Invalid value: null: must have exactly one version marked as storage version"))
        elif sum(1 for v in vs if v.get("storage")) != 1:
            errs.append(("FieldValueInvalid", "spec.versions", "Invalid value: %s: must have exactly one version marked as storage version" % schema.gofmt(vs)))
        for i, v in enumerate(vs):
            s = (v.get("schema") or {}).get("openAPIV3Schema")
            if s is None:
                errs.append(("FieldValueRequired", "spec.versions[%d].schema.openAPIV3Schema" % i, "Required value: schemas are required"))
                continue
            if s.get("type") != "object":
                errs.append(("FieldValueInvalid", "spec.versions[%d].schema.openAPIV3Schema.type" % i, 'Invalid value: %s: must be object at the root' % schema.gofmt(s.get("type"))))
            self._structural(s, "spec.versions[%d].schema.openAPIV3Schema" % i, errs, True)
            schema.check_schema_rules(s, "spec.versions[%d].schema.openAPIV3Schema" % i, errs)

    def _structural(self, s, path, errs, root=False):
        if not isinstance(s, dict):
            return
        if not s.get("type") and not s.get("x-kubernetes-int-or-string") and not s.get("x-kubernetes-preserve-unknown-fields") and not root:
            errs.append(("FieldValueRequired", path + ".type", "Required value: must not be empty for specified object fields"))
        for k, sub in (s.get("properties") or {}).items():
            self._structural(sub, "%s.properties[%s]" % (path, k), errs)
        if isinstance(s.get("items"), dict):
            self._structural(s["items"], path + ".items", errs)
        elif s.get("type") == "array":
            errs.append(("FieldValueRequired", path + ".items", "Required value: must be specified"))

    def _generation(self, rt, obj, old):
        if not rt.generation or old is None:
            return
        a = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
        b = {k: v for k, v in old.items() if k not in ("metadata", "status")}
        gen = old["metadata"].get("generation", 1)
        if canonical(a) != canonical(b):
            gen += 1
        obj["metadata"]["generation"] = gen

    def _schema_pass(self, rt, obj, ctx):
        """Defaults and pruning of custom resources; unknown fields are an
        error (Strict) or warnings (Warn)."""
        if rt.crd is None or not rt.schema():
            return
        unknown = []
        schema.default_and_prune(obj, rt.schema(), "", unknown)
        if unknown:
            if ctx.field_validation == "Strict":
                msg = ", ".join('unknown field "%s"' % u for u in unknown)
                raise ApiError(400, "BadRequest", '%s in version "%s" cannot be handled as a %s: strict decoding error: %s' % (rt.kind, rt.version, rt.kind, msg))
            if ctx.field_validation != "Ignore":
                for u in unknown:
                    ctx.warnings.append('unknown field "%s"' % u)

    @staticmethod
    def _managed(rt, old, new, ctx, sub):
        mf = ssa.track(rt, old, new, ctx, sub)
        if mf:
            new["metadata"]["managedFields"] = mf
        else:
            new["metadata"].pop("managedFields", None)

    def _admit(self, rt, op, obj, old, ctx, phase, sub=""):
        """phase "mutate" returns the (maybe patched) object; "validate" may raise."""
        if self.admission:
            return self.admission(rt, op, obj, old, ctx, phase, sub)
        return obj

    # -- the verbs
    def create(self, rt, ns, obj, ctx):
        self._ns_check(rt, ns, True)
        obj = self._prepare_create(rt, ns, obj, ctx)
        name = obj["metadata"].get("name", "")
        obj = self._admit(rt, "CREATE", obj, None, ctx, "mutate", ctx.subresource)
        self._schema_pass(rt, obj, ctx)
        self._validate(rt, obj, None, ctx)
        self._admit(rt, "CREATE", obj, None, ctx, "validate", ctx.subresource)
        self._managed(rt, None, obj, ctx, "")
        if ctx.dry_run:
            return to_view(rt, obj)
        with self.store.cond:
            if self.store.bucket(rt.storage).get((obj["metadata"].get("namespace", ""), name)) is not None:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (rt.qualified(), name),
                               {"name": name, "group": rt.group, "kind": rt.plural})
            out, _ = self.store.commit(rt.storage, obj["metadata"].get("namespace", ""), name, obj)
        self._after(rt, "ADDED", out)
        return to_view(rt, out)

    def get(self, rt, ns, name):
        o = self.store.get(rt.storage, ns if rt.namespaced else "", name)
        if o is None:
            raise not_found(rt, name)
        return to_view(rt, o)

    def update(self, rt, ns, name, obj, ctx, sub="", patcher=None):
        """PUT (obj given) or PATCH (patcher: stored view -> new view)."""
        ns = ns if rt.namespaced else ""
        for _attempt in range(10):
            cur = self.store.get(rt.storage, ns, name)
            if cur is None:
                raise not_found(rt, name)
            view = to_view(rt, copy.deepcopy(cur))
            new = patcher(view) if patcher else copy.deepcopy(obj)
            if not isinstance(new, dict):
                raise ApiError(400, "BadRequest", "the request body must be an object")
            new = from_view(rt, new)
            md = new.setdefault("metadata", {})
            if md.get("name", name) != name:
                raise ApiError(400, "BadRequest", 'the name of the object (%s) does not match the name on the URL (%s)' % (md.get("name"), name))
            if rt.namespaced and md.get("namespace", ns) != ns:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
            client_rv = md.get("resourceVersion")
            if patcher is None and not client_rv and rt.require_rv:
                raise invalid(rt, name, [("FieldValueInvalid", "metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")])
            if client_rv and client_rv != cur["metadata"]["resourceVersion"]:
                raise conflict_modified(rt, name)
            om = cur["metadata"]
            for f in ("uid", "creationTimestamp", "generation"):
                if f in om:
                    md[f] = om[f]
                else:
                    md.pop(f, None)
            md["name"] = name
            if rt.namespaced:
                md["namespace"] = ns
            sent = md.pop("managedFields", None)      # a client may rewrite them (kubectl's client-side apply upgrade does)
            ctx.managed_base = None
            if sent is not None and sent != cur["metadata"].get("managedFields"):
                ctx.managed_base = [e for e in sent if e]    # [{}] clears them
            if not md.get("labels"):
                md.pop("labels", None)
            if not md.get("annotations"):
                md.pop("annotations", None)
            if not md.get("finalizers"):
                md.pop("finalizers", None)
            new["apiVersion"], new["kind"] = cur.get("apiVersion", rt.api_version), rt.kind
            if sub == "status":
                st = new.get("status")
                new = copy.deepcopy(cur)
                if st is None:
                    new.pop("status", None)
                else:
                    new["status"] = st
            elif rt.status and "status" in cur:
                new["status"] = copy.deepcopy(cur["status"])
            elif rt.status:
                new.pop("status", None)
            self._defaults(rt, new, cur)
            new = self._admit(rt, "UPDATE", new, cur, ctx, "mutate", sub)
            self._schema_pass(rt, new, ctx)
            self._generation(rt, new, cur)
            self._validate(rt, new, cur, ctx)
            self._admit(rt, "UPDATE", new, cur, ctx, "validate", sub)
            self._managed(rt, cur, new, ctx, sub)
            if ctx.dry_run:
                return to_view(rt, new)
            md = new["metadata"]
            gone = md.get("deletionTimestamp") and not md.get("finalizers") and \
                (rt.kind != "Pod" or md.get("deletionGracePeriodSeconds", 0) == 0) and \
                not (rt.kind == "Namespace" and (new.get("spec") or {}).get("finalizers"))
            try:
                if gone:
                    out, _ = self.store.commit(rt.storage, ns, name, None, cur["metadata"]["resourceVersion"], delete=True)
                    self._after(rt, "DELETED", out)
                    return to_view(rt, out)
                out, changed = self.store.commit(rt.storage, ns, name, new, cur["metadata"]["resourceVersion"])
            except KeyError:
                if client_rv:
                    raise conflict_modified(rt, name)
                continue
            if changed:
                self._after(rt, "MODIFIED", out)
            return to_view(rt, out)
        raise conflict_modified(rt, name)

    def delete(self, rt, ns, name, opts, ctx):
        """-> (object still present or None, final object)."""
        ns = ns if rt.namespaced else ""
        opts = opts or {}
        for _attempt in range(10):
            cur = self.store.get(rt.storage, ns, name)
            if cur is None:
                raise not_found(rt, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != cur["metadata"]["uid"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": Precondition failed: UID in precondition: %s, UID in object meta: %s' % (rt.qualified(), name, pre["uid"], cur["metadata"]["uid"]),
                               {"name": name, "group": rt.group, "kind": rt.plural})
            if pre.get("resourceVersion") and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s' % (rt.qualified(), name, pre["resourceVersion"], cur["metadata"]["resourceVersion"]),
                               {"name": name, "group": rt.group, "kind": rt.plural})
            self._admit(rt, "DELETE", None, cur, ctx, "validate", "")
            new = copy.deepcopy(cur)
            md = new["metadata"]
            grace = None
            if rt.kind == "Pod" and rt.group == "":
                g = opts.get("gracePeriodSeconds")
                if g is None:
                    g = (cur.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                if not (cur.get("spec") or {}).get("nodeName") or (cur.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    g = 0
                grace = int(g)
                old_g = md.get("deletionGracePeriodSeconds")
                if grace > 0:
                    if md.get("deletionTimestamp") and old_g is not None and old_g <= grace:
                        return to_view(rt, cur), None
                    md["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + grace))
                    md["deletionGracePeriodSeconds"] = grace
                    if ctx.dry_run:
                        return to_view(rt, new), None
                    try:
                        out, _ = self.store.commit(rt.storage, ns, name, new, cur["metadata"]["resourceVersion"])
                    except KeyError:
                        continue
                    self._after(rt, "MODIFIED", out)
                    return to_view(rt, out), None
            policy = opts.get("propagationPolicy")
            if policy is None and opts.get("orphanDependents") is True:
                policy = "Orphan"
            fins = list(md.get("finalizers") or [])
            if policy == "Foreground" and "foregroundDeletion" not in fins:
                fins.append("foregroundDeletion")
            if policy == "Orphan" and "orphan" not in fins:
                fins.append("orphan")
            if rt.kind == "Namespace" and rt.group == "":
                new.setdefault("status", {})["phase"] = "Terminating"
            if rt.kind == "CustomResourceDefinition" and "customresourcecleanup.apiextensions.k8s.io" not in fins and not md.get("deletionTimestamp"):
                fins.append("customresourcecleanup.apiextensions.k8s.io")
            ns_pending = rt.kind == "Namespace" and (new.get("spec") or {}).get("finalizers")
            if fins or ns_pending:
                md["finalizers"] = fins
                if not fins:
                    md.pop("finalizers")
                if not md.get("deletionTimestamp"):
                    md["deletionTimestamp"] = now_time()
                    md["deletionGracePeriodSeconds"] = 0
                    if rt.generation:
                        md["generation"] = md.get("generation", 1) + 1
                elif grace == 0:
                    md["deletionGracePeriodSeconds"] = 0
                if ctx.dry_run:
                    return to_view(rt, new), None
                try:
                    out, changed = self.store.commit(rt.storage, ns, name, new, cur["metadata"]["resourceVersion"])
                except KeyError:
                    continue
                if changed:
                    self._after(rt, "MODIFIED", out)
                return to_view(rt, out), None
            if ctx.dry_run:
                return None, to_view(rt, cur)
            try:
                out, _ = self.store.commit(rt.storage, ns, name, None, cur["metadata"]["resourceVersion"], delete=True)
            except KeyError:
                continue
            self._after(rt, "DELETED", out)
            return None, to_view(rt, out)
        raise conflict_modified(rt, name)

    def _after(self, rt, typ, obj):
        for h in self.hooks:
            h(rt, typ, obj)


def crd_types(crd):
    """ResourceTypes a CRD serves."""
    sp = crd["spec"]
    names = sp["names"]
    out = []
    storage = (sp["group"], names["plural"])
    for v in sp.get("versions") or []:
        if not v.get("served", True):
            continue
        rt = ResourceType(sp["group"], v["name"], names["plural"], names["kind"],
                          sp.get("scope") == "Namespaced", names.get("shortNames") or (),
                          names.get("singular"), status="status" in (v.get("subresources") or {}),
                          storage=storage, categories=names.get("categories") or (), crd=v)
        out.append(rt)
    return out

