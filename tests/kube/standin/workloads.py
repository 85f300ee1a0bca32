"""The workload controllers, as far as the stand-in needs them to run what
deploy/ installs: Deployments keep `replicas` pods of their current template
(the ReplicaSet layer is folded in: pods are owned by the Deployment and carry
`pod-template-hash`), Jobs run their pod to completion with `backoffLimit`
retries. There is no scheduler: a controller binds each pod it creates
(`spec.nodeName`) to a Ready, schedulable node matching the template's
nodeSelector, fewest of its siblings first; with none, the pod stays Pending.
A template change replaces every old pod at once (no rolling update).
CronJobs are stored and served but never fire: tests start their Jobs
(`kubectl create job --from=cronjob/NAME`). The API's defaulting gives a Job
its selector and pod labels (controller-uid, job-name), as kube-apiserver does."""
import copy
import hashlib

import api
from util import ApiError, canonical, gen_suffix, now_time

SYSTEM = dict(user="system:kube-controller-manager", groups=("system:masters",))


def _ctx():
    return api.Context(**SYSTEM)


def _owner(kind, obj, api_version):
    md = obj["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": md["name"], "uid": md["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _owned_by(pod, uid):
    return any(r.get("uid") == uid and r.get("controller") for r in pod["metadata"].get("ownerReferences") or [])


def _ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _phase(pod):
    return (pod.get("status") or {}).get("phase", "Pending")


class Workloads:
    def __init__(self, si):
        self.si = si
        self.st = si.store
        self.reg = si.registry

    def sync(self):
        self._deployments()
        self._jobs()

    # -- placement
    def _nodes(self, selector):
        out = []
        nodes, _ = self.st.list(("", "nodes"))
        for n in nodes:
            if (n.get("spec") or {}).get("unschedulable"):
                continue
            conds = (n.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                continue
            labels = n["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in (selector or {}).items()):
                out.append(n["metadata"]["name"])
        return sorted(out)

    def _create_pod(self, owner_kind, owner, api_version, template, name, extra_labels, siblings):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(template.get("metadata") or {}),
               "spec": copy.deepcopy(template.get("spec") or {})}
        md = pod["metadata"]
        md.pop("name", None)
        md.pop("generateName", None)
        md["name"] = name
        md["labels"] = dict(md.get("labels") or {}, **extra_labels)
        md["ownerReferences"] = [_owner(owner_kind, owner, api_version)]
        if not pod["spec"].get("nodeName"):
            nodes = self._nodes(pod["spec"].get("nodeSelector"))
            if nodes:
                load = {n: 0 for n in nodes}
                for s in siblings:
                    if s["spec"].get("nodeName") in load:
                        load[s["spec"]["nodeName"]] += 1
                pod["spec"]["nodeName"] = min(nodes, key=lambda n: (load[n], n))
        ns = owner["metadata"]["namespace"]
        try:
            self.reg.create(self.st.type_for("", "v1", "pods"), ns, pod, _ctx())
        except ApiError:
            pass
        return pod

    def _delete_pod(self, pod):
        if pod["metadata"].get("deletionTimestamp"):
            return
        try:
            self.reg.delete(self.st.type_for("", "v1", "pods"), pod["metadata"]["namespace"], pod["metadata"]["name"],
                            {"preconditions": {"uid": pod["metadata"]["uid"]}}, _ctx())
        except ApiError:
            pass

    def _status(self, rt, obj, status):
        md = obj["metadata"]
        if (obj.get("status") or {}) == status:
            return

        def p(cur):
            cur = copy.deepcopy(cur)
            cur["status"] = status
            return cur
        try:
            self.reg.update(rt, md["namespace"], md["name"], None, _ctx(), "status", patcher=p)
        except ApiError:
            pass

    # -- Deployments
    def _deployments(self):
        rt = self.st.type_for("apps", "v1", "deployments")
        deps, _ = self.st.list(("apps", "deployments"))
        # a copy of every pod on each change is the stand-in's cost at a thousand pods: only when needed
        pods = self.st.list(("", "pods"))[0] if deps else []
        for d in deps:
            md = d["metadata"]
            if md.get("deletionTimestamp"):
                continue
            spec = d.get("spec") or {}
            template = spec.get("template") or {}
            want = spec.get("replicas", 1)
            h = hashlib.sha256(canonical(template).encode()).hexdigest()[:10]
            mine = [p for p in pods if p["metadata"].get("namespace") == md["namespace"] and _owned_by(p, md["uid"])]
            live = [p for p in mine if not p["metadata"].get("deletionTimestamp")]
            for p in live:
                old = (p["metadata"].get("labels") or {}).get("pod-template-hash") != h
                if old or _phase(p) in ("Failed", "Succeeded"):
                    self._delete_pod(p)
            current = [p for p in live if (p["metadata"].get("labels") or {}).get("pod-template-hash") == h
                       and _phase(p) not in ("Failed", "Succeeded")]
            for p in sorted(current, key=lambda p: (_ready(p), p["metadata"]["name"]))[:max(0, len(current) - want)]:
                self._delete_pod(p)
            for _ in range(want - len(current)):
                name = "%s-%s-%s" % (md["name"], h, gen_suffix(5))
                current.append(self._create_pod("Deployment", d, "apps/v1", template, name, {"pod-template-hash": h}, current))
            ready = sum(1 for p in current if p.get("status") and _ready(p))
            status = {"observedGeneration": md.get("generation", 1), "replicas": len(live),
                      "updatedReplicas": min(len(current), want), "readyReplicas": ready,
                      "availableReplicas": ready, "unavailableReplicas": max(0, want - ready),
                      "conditions": [{"type": "Available", "status": "True" if ready >= want else "False",
                                      "reason": "MinimumReplicasAvailable" if ready >= want else "MinimumReplicasUnavailable",
                                      "message": "Deployment has minimum availability." if ready >= want
                                      else "Deployment does not have minimum availability."}]}
            if not ready:
                status.pop("readyReplicas")
                status.pop("availableReplicas")
            self._status(rt, d, status)

    # -- Jobs
    def _jobs(self):
        rt = self.st.type_for("batch", "v1", "jobs")
        jobs, _ = self.st.list(("batch", "jobs"))
        pods = self.st.list(("", "pods"))[0] if jobs else []
        for j in jobs:
            md = j["metadata"]
            status = copy.deepcopy(j.get("status") or {})
            if md.get("deletionTimestamp") or any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                                                  for c in status.get("conditions") or []):
                continue
            spec = j.get("spec") or {}
            mine = [p for p in pods if p["metadata"].get("namespace") == md["namespace"] and _owned_by(p, md["uid"])]
            succeeded = sum(1 for p in mine if _phase(p) == "Succeeded")
            failed = sum(1 for p in mine if _phase(p) == "Failed")
            active = [p for p in mine if _phase(p) not in ("Succeeded", "Failed") and not p["metadata"].get("deletionTimestamp")]
            status.setdefault("startTime", now_time())
            status.update({"active": len(active), "succeeded": succeeded, "failed": failed})
            if succeeded:
                status["completionTime"] = now_time()
                status["conditions"] = [{"type": "Complete", "status": "True", "lastTransitionTime": now_time()}]
                status["active"] = 0
                for p in active:
                    self._delete_pod(p)
            elif failed > spec.get("backoffLimit", 6):
                status["conditions"] = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                         "message": "Job has reached the specified backoff limit",
                                         "lastTransitionTime": now_time()}]
                status["active"] = 0
                for p in active:
                    self._delete_pod(p)
            elif not active:
                self._create_pod("Job", j, "batch/v1", spec.get("template") or {}, "%s-%s" % (md["name"], gen_suffix(5)),
                                 {}, mine)
                status["active"] = 1
            for k in ("active", "succeeded", "failed"):
                if not status.get(k):
                    status.pop(k, None)
            self._status(rt, j, status)
