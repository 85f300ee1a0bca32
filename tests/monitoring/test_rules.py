"""ctest monitoring_rules: deploy/monitoring as shipped.

- promtool check rules, and promtool test rules (tests/monitoring/rules_test.yaml) with a
  firing case for every alert;
- the PrometheusRule carries exactly the groups of rules.yaml; every alert has its runbook
  section in docs/operations.md;
- prometheus.yml: the three jobs, promtool check config of it as Debian's Prometheus runs it
  (file_sd for Kubernetes discovery), and the agents' relabelling the same as the PodMonitor's;
- every dashboard query is valid PromQL (promtool check rules on them as recording rules);
- kubectl kustomize deploy/monitoring and deploy/with-monitoring: the same objects with every
  kubectl (kubectl 1.20's kustomize included).
usage: /usr/bin/python3 test_rules.py"""
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import monitoring as m  # noqa: E402

failures = []


def expect(ok, what, detail=""):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)
        if detail:
            print("  " + str(detail).replace("\n", "\n  "))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main():
    promtool = m.tool("promtool")
    rules_path = os.path.join(m.MON, "rules.yaml")
    p = run([promtool, "check", "rules", rules_path])
    expect(p.returncode == 0, "promtool check rules deploy/monitoring/rules.yaml", p.stdout + p.stderr)
    test_path = os.path.join(m.HERE, "rules_test.yaml")
    p = run([promtool, "test", "rules", test_path])
    expect(p.returncode == 0 and "SUCCESS" in p.stdout, "promtool test rules tests/monitoring/rules_test.yaml",
           p.stdout + p.stderr)

    rules = m.load("rules.yaml")
    names = [a["alert"] for a in m.alerts(rules)]
    want = {"TurnfleetPoolNotReady", "TurnfleetRelayProbeFailing", "TurnfleetCapacityPressure",
            "TurnfleetAllocationsRejected508", "TurnfleetDrainOverdue", "TurnfleetVantageUnreachable",
            "TurnfleetRelayUncounted",
            "TurnfleetOperatorAbsent", "TurnfleetOperatorNoLeader"}
    expect(set(names) == want and len(names) == len(want), "the alerts: %s" % ", ".join(sorted(want)), names)
    with open(test_path) as f:
        unit = yaml.safe_load(f)
    fired = {t["alertname"] for g in unit["tests"] for t in g.get("alert_rule_test", []) if t.get("exp_alerts")}
    quiet = {t["alertname"] for g in unit["tests"] for t in g.get("alert_rule_test", []) if not t.get("exp_alerts")}
    expect(fired >= set(names), "every alert has a unit test where it fires", sorted(set(names) - fired))
    expect(quiet >= set(names), "every alert has a unit test where it stays quiet", sorted(set(names) - quiet))

    pr = m.load("prometheusrule.yaml")
    expect(pr["apiVersion"] == "monitoring.coreos.com/v1" and pr["kind"] == "PrometheusRule",
           "prometheusrule.yaml is a PrometheusRule")
    expect(pr["spec"] == rules, "the PrometheusRule holds exactly the groups of rules.yaml")

    with open(os.path.join(m.SOURCE, "docs", "operations.md")) as f:
        ops = f.read()
    heads = {re.sub(r"[^a-z0-9-]", "", h.strip().lower().replace(" ", "-")) for h in re.findall(r"(?m)^#+ (.*)$", ops)}
    for a in m.alerts(rules):
        anchor = a["annotations"].get("runbook", "")
        expect(anchor == "docs/operations.md#" + a["alert"].lower() and a["alert"].lower() in heads,
               "%s: runbook section docs/operations.md#%s" % (a["alert"], a["alert"].lower()), anchor)
        expect(a["labels"].get("severity") in ("warning", "critical"), "%s has a severity" % a["alert"])

    config = m.load("prometheus.yml")
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    expect(set(jobs) == {"turnfleet-up", "turnfleet-operator", "turnfleet-agents"},
           "prometheus.yml scrapes turnfleet up, the operator and the agents", sorted(jobs))
    expect(all(j.get("honor_labels") is True for j in jobs.values()), "every job keeps the series' own labels")
    expect(config.get("rule_files") == ["rules.yaml"], "prometheus.yml loads rules.yaml")
    pm = m.load("podmonitor.yaml")
    ep = pm["spec"]["podMetricsEndpoints"][0]
    relabel = [(tuple(r["sourceLabels"]), r["regex"], r["targetLabel"], r["replacement"]) for r in ep["relabelings"]]
    plain = [(tuple(r["source_labels"]), r["regex"], r["target_label"], r["replacement"])
             for r in jobs["turnfleet-agents"]["relabel_configs"] if r.get("target_label") == "__address__"]
    expect(relabel == plain and len(plain) == 2, "the agents' address relabelling is the PodMonitor's", (relabel, plain))
    expect(ep["port"] == "agent" and ep.get("honorLabels") is True, "the PodMonitor scrapes the `agent` port, honouring labels")
    auth = jobs["turnfleet-agents"].get("authorization") or {}
    expect(auth.get("type") == "Bearer" and auth.get("credentials_file") and
           (ep.get("authorization") or {}).get("type") == "Bearer" and
           (ep["authorization"].get("credentials") or {}).get("key") == "metrics-token",
           "the agents' job and the PodMonitor send the pool's metrics token", (auth, ep.get("authorization")))
    sm = m.load("servicemonitor.yaml")
    svc = m.load("service.yaml")
    expect(sm["spec"]["selector"]["matchLabels"] == svc["metadata"]["labels"] and
           sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"] and
           sm["spec"]["endpoints"][0].get("honorLabels") is True,
           "the ServiceMonitor selects the metrics Service and its port, honouring labels")
    with open(os.path.join(m.SOURCE, "deploy", "operator", "deployment.yaml")) as f:
        dep = yaml.safe_load(f)
    expect(svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"] and
           any(pt.get("name") == svc["spec"]["ports"][0]["targetPort"]
               for pt in dep["spec"]["template"]["spec"]["containers"][0]["ports"]),
           "the metrics Service selects the operator's pods and their `metrics` port")

    with tempfile.TemporaryDirectory(prefix="tf-monitoring-") as tmp:
        c = m.file_sd_config(config, tmp, "127.0.3.1:23650", "1s")
        for name, text in (("turnfleet-operator.json", "[]"), ("turnfleet-agents.json", "[]"),
                           ("metrics-token", "0" * 64)):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        c["rule_files"] = [rules_path]
        path = os.path.join(tmp, "prometheus.yml")
        with open(path, "w") as f:
            yaml.safe_dump(c, f)
        p = run([promtool, "check", "config", path])
        expect(p.returncode == 0, "promtool check config: prometheus.yml as Debian's Prometheus runs it",
               p.stdout + p.stderr)
        # the dashboard's queries as recording rules: promtool parses every one
        dash = m.dashboard()
        qs = m.dashboard_queries(dash)
        expect(len(dash["panels"]) >= 8 and all(p["targets"] for p in dash["panels"]), "the dashboard has its panels")
        rec = {"groups": [{"name": "dashboard", "rules": [
            {"record": "dashboard:q%d" % i, "expr": e} for i, (_, _, e) in enumerate(qs)]}]}
        path = os.path.join(tmp, "dashboard-rules.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(rec, f)
        p = run([promtool, "check", "rules", path])
        expect(p.returncode == 0, "every dashboard query (%d) is valid PromQL" % len(qs), p.stdout + p.stderr)

        clients = run([os.path.join(m.SOURCE, "tests", "kube", "clients.sh")])
        found = dict(line.split(" ", 1) for line in clients.stdout.splitlines() if " " in line)
        expect(clients.returncode == 0 and "kubectl-1.20" in found and "kubectl-rootfs" in found,
               "tests/kube/clients.sh: kubectl 1.20 and the unstable root's", clients.stderr)
        for overlay, kinds in (("monitoring", {"Service", "ServiceMonitor", "PodMonitor", "PrometheusRule"}),
                               ("with-monitoring", {"Service", "ServiceMonitor", "PodMonitor", "PrometheusRule",
                                                    "Deployment", "CustomResourceDefinition"})):
            seen = {}
            for name, k in sorted(found.items()):
                p = run([k, "kustomize", os.path.join(m.SOURCE, "deploy", overlay)], env=dict(os.environ, HOME=tmp))
                expect(p.returncode == 0, "%s kustomize deploy/%s" % (name, overlay), p.stderr)
                seen[name] = sorted((d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
                                    for d in yaml.safe_load_all(p.stdout) if d) if p.returncode == 0 else None
            first = next(iter(seen.values()))
            expect(first is not None and all(v == first for v in seen.values()),
                   "deploy/%s: the same objects with every kubectl" % overlay, seen)
            expect(first is not None and kinds <= {k for k, _, _ in first}, "deploy/%s holds %s" % (overlay, sorted(kinds)),
                   first)
    if failures:
        print("%d FAILED: %s" % (len(failures), "; ".join(failures)))
        return 1
    print("monitoring_rules: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
