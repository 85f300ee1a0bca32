"""What the monitoring tests share: the shipped files of deploy/monitoring and the
transformation of its plain prometheus.yml into what Debian's Prometheus runs."""
import copy
import json
import os
import re
import shutil

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
MON = os.path.join(SOURCE, "deploy", "monitoring")


def tool(name):
    """A peer the tests need: missing is a failure, never a skip."""
    path = shutil.which(name)
    if not path:
        raise AssertionError("%s not found: install Debian's prometheus package (tools/dev/install-deps.sh)" % name)
    return path


def load(name):
    with open(os.path.join(MON, name)) as f:
        return yaml.safe_load(f)


def alerts(rules):
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r]


def dashboard():
    with open(os.path.join(MON, "grafana-dashboard.json")) as f:
        return json.load(f)


def dashboard_queries(dash, value=".*"):
    """(panel title, refId, expr) of every target, the template variables set to @p value (Grafana's "All")."""
    names = [v["name"] for v in dash["templating"]["list"] if v["type"] != "datasource"]
    out = []
    for p in dash["panels"]:
        for t in p["targets"]:
            e = t["expr"]
            for n in names:
                e = e.replace("$" + n, value)
            out.append((p["title"], t["refId"], e))
    return out


def rules_with_for(rules, for_):
    """The shipped rules with every `for:` set to @p for_ (a test waits seconds, not minutes); expressions unchanged."""
    r = copy.deepcopy(rules)
    for a in alerts(r):
        a["for"] = for_
    return r


def file_sd_config(config, targets_dir, up_target, interval):
    """The shipped prometheus.yml as a Debian Prometheus 2.42 runs it: that build has no Kubernetes discovery,
    so each kubernetes_sd_configs becomes a file_sd_configs whose file the test writes with the targets and the
    __meta_kubernetes_* labels Kubernetes discovery would give (pod_targets()); the relabelling is the shipped one.
    The turnfleet-up job scrapes @p up_target; a job's bearer token file is @p targets_dir/metrics-token
    (the caller writes it: the pool's token for the agents)."""
    c = copy.deepcopy(config)
    c["global"] = {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval}
    for job in c["scrape_configs"]:
        if "kubernetes_sd_configs" in job:
            del job["kubernetes_sd_configs"]
            job["file_sd_configs"] = [{"files": [os.path.join(targets_dir, job["job_name"] + ".json")],
                                       "refresh_interval": interval}]
        else:
            job["static_configs"] = [{"targets": [up_target]}]
        if "credentials_file" in (job.get("authorization") or {}):
            job["authorization"]["credentials_file"] = os.path.join(targets_dir, "metrics-token")
    return c


def _label(s):
    return re.sub(r"[^a-zA-Z0-9_]", "_", s)


def pod_targets(pods, namespaces=None):
    """Kubernetes discovery's `role: pod` for these pods: one target per container port, address POD_IP:PORT,
    labels __meta_kubernetes_namespace, _pod_name, _pod_ip, _pod_label_*, _pod_annotation_*, _pod_container_name,
    _pod_container_port_name, _pod_container_port_number, _pod_container_port_protocol."""
    groups = []
    for p in pods:
        md, spec, st = p["metadata"], p["spec"], p.get("status") or {}
        if namespaces and md["namespace"] not in namespaces:
            continue
        ip = st.get("podIP")
        if not ip:
            continue
        base = {"__meta_kubernetes_namespace": md["namespace"], "__meta_kubernetes_pod_name": md["name"],
                "__meta_kubernetes_pod_ip": ip}
        for k, v in (md.get("labels") or {}).items():
            base["__meta_kubernetes_pod_label_" + _label(k)] = v
        for k, v in (md.get("annotations") or {}).items():
            base["__meta_kubernetes_pod_annotation_" + _label(k)] = v
        for c in spec["containers"]:
            for port in c.get("ports") or []:
                labels = dict(base)
                labels.update({"__meta_kubernetes_pod_container_name": c["name"],
                               "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                               "__meta_kubernetes_pod_container_port_number": str(port["containerPort"]),
                               "__meta_kubernetes_pod_container_port_protocol": port.get("protocol", "TCP")})
                host = "[%s]" % ip if ":" in ip else ip
                groups.append({"targets": ["%s:%d" % (host, port["containerPort"])], "labels": labels})
    return groups
