"""The process kubelet: registers a Node, posts Ready heartbeats, and runs the
Pods bound to it as real processes (container.py), with volumes as files,
exec/tcp/http probes, preStop hooks, graceful termination, restarts with
backoff, pod status and readiness gates, and logs."""
import base64
import copy
import fnmatch
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import api
from util import ApiError, now_micro, now_time, parse_time

HERE = os.path.dirname(os.path.abspath(__file__))
CONTAINER = os.path.join(HERE, "container.py")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _ctx(node):
    return api.Context("system:node:%s" % node, ("system:nodes", "system:masters"))


class ImageMap:
    """Image name patterns (fnmatch, first match wins) -> root filesystem,
    plus host files bound into the container (the project's binaries)."""

    def __init__(self, entries):
        self.entries = entries  # [(pattern, root, [(src, dst)])]

    def resolve(self, image):
        for pat, root, binds in self.entries:
            if fnmatch.fnmatchcase(image, pat):
                return root, binds
        return None, None


class Container:
    def __init__(self, spec):
        self.spec = spec
        self.name = spec["name"]
        self.proc = None
        self.pid = None          # host PID of the container's PID 1
        self.started_at = None
        self.state = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state = {}
        self.restarts = 0
        self.ready = False
        self.started = False
        self.backoff_until = 0
        self.backoff = 0
        self.ready_ok = 0
        self.ready_fail = 0
        self.live_fail = 0
        self.next_ready = 0
        self.next_live = 0
        self.logfile = None
        self.copiers = ()        # the threads copying stdout and stderr into the log
        self.cid = None
        self.uid = self.gid = 0
        self.startup_ok = False
        self.startup_fail = 0
        self.next_startup = 0


class PodWorker(threading.Thread):
    def __init__(self, kubelet, pod):
        super().__init__(daemon=True)
        self.k = kubelet
        self.uid = pod["metadata"]["uid"]
        self.ns = pod["metadata"]["namespace"]
        self.name = pod["metadata"]["name"]
        self.pod = pod
        self.dir = os.path.join(kubelet.dir, "pods", self.uid)
        self.containers = [Container(c) for c in pod["spec"].get("containers") or []]
        self.inits = [Container(c) for c in pod["spec"].get("initContainers") or []]
        self.init_done = not self.inits
        self.init_failed = False
        self.wake = threading.Event()
        self.gone = False          # the API object is gone: kill now
        self.shutdown = None       # node shutdown grace (seconds) when set
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.volumes_ready = False
        self.start_time = now_time()
        self.terminating = False
        self.last_status = None
        self.pause = None          # shareProcessNamespace: the pod's PID 1 (container.py --pause)
        self.pause_pid = None

    # -- helpers
    def event(self, typ, reason, msg):
        self.k.event(self.pod, typ, reason, msg)

    def _refresh(self):
        p = self.k.store.get(("", "pods"), self.ns, self.name)
        if p is None or p["metadata"]["uid"] != self.uid:
            return None
        self.pod = p
        return p

    # -- volumes
    def _write_items(self, d, data, items, mode):
        os.makedirs(d, exist_ok=True)
        pairs = []
        if items:
            for it in items:
                if it["key"] not in data:
                    raise KeyError(it["key"])
                pairs.append((it.get("path", it["key"]), data[it["key"]], it.get("mode", mode)))
        else:
            pairs = [(k, v, mode) for k, v in data.items()]
        fs_group = (self.pod["spec"].get("securityContext") or {}).get("fsGroup")
        for path, v, m in pairs:
            p = os.path.join(d, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(v if isinstance(v, bytes) else v.encode())
            if fs_group is not None:
                # SetVolumeOwnership of a read-only volume: group fsGroup, g+r
                os.chown(p, 0, fs_group)
                m |= 0o440
            os.chmod(p, m)

    def _source(self, kind, name, optional):
        obj = self.k.store.get(("", kind), self.ns, name)
        if obj is None:
            if optional:
                return {}
            raise LookupError('%s "%s" not found' % (kind[:-1], name))
        if kind == "secrets":
            return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        out = dict(obj.get("data") or {})
        out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return out

    def _field(self, path):
        p = self.pod
        vals = {"metadata.name": p["metadata"]["name"], "metadata.namespace": self.ns, "metadata.uid": self.uid,
                "spec.nodeName": self.k.name, "spec.serviceAccountName": p["spec"].get("serviceAccountName", ""),
                "status.hostIP": self.k.addresses[0], "status.podIP": self.pod_ip(),
                "status.podIPs": self.pod_ip(), "status.hostIPs": self.k.addresses[0]}
        if path.startswith("metadata.labels['") or path.startswith("metadata.annotations['"):
            which = "labels" if "labels" in path else "annotations"
            key = path.split("['", 1)[1].rstrip("']")
            return (p["metadata"].get(which) or {}).get(key, "")
        return vals.get(path, "")

    def prepare_volumes(self):
        vroot = os.path.join(self.dir, "volumes")
        for v in self.pod["spec"].get("volumes") or []:
            d = os.path.join(vroot, v["name"])
            if "secret" in v:
                s = v["secret"]
                self._write_items(d, self._source("secrets", s["secretName"], s.get("optional")), s.get("items"), s.get("defaultMode", 0o644))
            elif "configMap" in v:
                s = v["configMap"]
                self._write_items(d, self._source("configmaps", s["name"], s.get("optional")), s.get("items"), s.get("defaultMode", 0o644))
            elif "emptyDir" in v:
                os.makedirs(d, exist_ok=True)
                os.chmod(d, 0o777)
                fs_group = (self.pod["spec"].get("securityContext") or {}).get("fsGroup")
                if fs_group is not None:
                    os.chown(d, 0, fs_group)
                    os.chmod(d, 0o2777)
            elif "hostPath" in v:
                pass
            elif "projected" in v:
                mode = v["projected"].get("defaultMode", 0o644)
                os.makedirs(d, exist_ok=True)
                for src in v["projected"].get("sources") or []:
                    if "serviceAccountToken" in src:
                        t = src["serviceAccountToken"]
                        sa = self.k.store.get(("", "serviceaccounts"), self.ns, self.pod["spec"].get("serviceAccountName", "default"))
                        if sa is None:
                            raise LookupError('serviceaccount "%s" not found' % self.pod["spec"].get("serviceAccountName"))
                        tok = self.k.si.auth.issue_sa(self.ns, sa["metadata"]["name"], sa["metadata"]["uid"], int(t.get("expirationSeconds", 3607)))
                        self._write_items(d, {t.get("path", "token"): tok}, None, mode)
                    elif "configMap" in src:
                        s = src["configMap"]
                        self._write_items(d, self._source("configmaps", s["name"], s.get("optional")), s.get("items"), mode)
                    elif "secret" in src:
                        s = src["secret"]
                        self._write_items(d, self._source("secrets", s["name"], s.get("optional")), s.get("items"), mode)
                    elif "downwardAPI" in src:
                        data = {it["path"]: self._field(it["fieldRef"]["fieldPath"]) for it in src["downwardAPI"].get("items") or [] if "fieldRef" in it}
                        self._write_items(d, data, None, mode)
            elif "downwardAPI" in v:
                data = {it["path"]: self._field(it["fieldRef"]["fieldPath"]) for it in v["downwardAPI"].get("items") or [] if "fieldRef" in it}
                self._write_items(d, data, None, v["downwardAPI"].get("defaultMode", 0o644))
        self.volumes_ready = True

    def _mounts(self, c):
        vols = {v["name"]: v for v in self.pod["spec"].get("volumes") or []}
        out = []
        for vm in c.spec.get("volumeMounts") or []:
            v = vols.get(vm["name"])
            if v is None:
                continue
            src = v["hostPath"]["path"] if "hostPath" in v else os.path.join(self.dir, "volumes", vm["name"])
            if vm.get("subPath"):
                src = os.path.join(src, vm["subPath"])
            out.append({"src": src, "dst": vm["mountPath"], "ro": bool(vm.get("readOnly"))})
        return out

    def _env(self, c):
        env = {"PATH": DEFAULT_PATH, "HOSTNAME": socket.gethostname() if self.pod["spec"].get("hostNetwork") else self.name,
               "KUBERNETES_SERVICE_HOST": self.k.si.host, "KUBERNETES_SERVICE_PORT": str(self.k.si.port),
               "KUBERNETES_SERVICE_PORT_HTTPS": str(self.k.si.port), "HOME": "/root"}
        for ef in c.spec.get("envFrom") or []:
            pre = ef.get("prefix", "")
            if "configMapRef" in ef:
                for k, v in self._source("configmaps", ef["configMapRef"]["name"], ef["configMapRef"].get("optional")).items():
                    env[pre + k] = v if isinstance(v, str) else v.decode()
            if "secretRef" in ef:
                for k, v in self._source("secrets", ef["secretRef"]["name"], ef["secretRef"].get("optional")).items():
                    env[pre + k] = v.decode()
        for e in c.spec.get("env") or []:
            if "value" in e:
                v = e["value"]
                for k2, v2 in env.items():
                    v = v.replace("$(%s)" % k2, v2)
                env[e["name"]] = v
            elif "valueFrom" in e:
                vf = e["valueFrom"]
                if "fieldRef" in vf:
                    env[e["name"]] = self._field(vf["fieldRef"]["fieldPath"])
                elif "secretKeyRef" in vf:
                    r = vf["secretKeyRef"]
                    env[e["name"]] = self._source("secrets", r["name"], r.get("optional")).get(r["key"], b"").decode()
                elif "configMapKeyRef" in vf:
                    r = vf["configMapKeyRef"]
                    env[e["name"]] = self._source("configmaps", r["name"], r.get("optional")).get(r["key"], "")
            else:
                env[e["name"]] = ""
        return env

    def pod_ip(self):
        if self.pod["spec"].get("hostNetwork"):
            return self.k.addresses[0]
        ann = (self.pod["metadata"].get("annotations") or {}).get("k8s.v1.cni.cncf.io/networks")
        if ann:
            try:
                nets = json.loads(ann)
                for n in nets if isinstance(nets, list) else []:
                    for ip in n.get("ips") or []:
                        return ip.split("/")[0]
            except ValueError:
                pass
        return self.k.addresses[0]

    # -- processes
    def identity(self, c):
        """(uid, gid, groups, readOnlyRootFilesystem) from the pod's and the
        container's securityContext; raises LookupError for runAsNonRoot
        without a non-zero runAsUser (the image has no USER here)."""
        psc = self.pod["spec"].get("securityContext") or {}
        csc = c.spec.get("securityContext") or {}
        pick = lambda k, d=None: csc.get(k, psc.get(k, d))
        uid = int(pick("runAsUser", 0))
        gid = int(pick("runAsGroup", 0))
        if pick("runAsNonRoot", False) and uid == 0:
            raise LookupError("container has runAsNonRoot and image will run as root (pod: \"%s_%s(%s)\", container: %s)" % (self.name, self.ns, self.uid, c.name))
        groups = [int(g) for g in psc.get("supplementalGroups") or []]
        if psc.get("fsGroup") is not None:
            groups.append(int(psc["fsGroup"]))
        return uid, gid, sorted(set(groups)), bool(csc.get("readOnlyRootFilesystem"))

    def start_container(self, c):
        image = c.spec.get("image", "")
        root, binds = self.k.images.resolve(image)
        if root is None:
            c.state = {"waiting": {"reason": "ErrImagePull", "message": 'failed to pull image "%s": the image is not in the stand-in\'s image map' % image}}
            return
        argv = list(c.spec.get("command") or []) + list(c.spec.get("args") or [])
        if not c.spec.get("command"):
            c.state = {"waiting": {"reason": "CreateContainerError", "message": "the stand-in has no image entrypoints: set command"}}
            return
        env = self._env(c)
        argv = [self._expand(a, env) for a in argv]
        cdir = os.path.join(self.dir, "c", "%s-%d" % (c.name, c.restarts))
        os.makedirs(os.path.join(cdir, "scratch"), exist_ok=True)
        mounts = self._mounts(c) + [{"src": s, "dst": d, "ro": True} for s, d in binds]
        uid, gid, groups, ro_root = self.identity(c)
        spec = {"root": root, "scratch": os.path.join(cdir, "scratch"), "mounts": mounts, "argv": argv, "env": env,
                "cwd": c.spec.get("workingDir") or "/", "pidfile": os.path.join(cdir, "pid"),
                "statusfile": os.path.join(cdir, "status"), "uid": uid, "gid": gid, "groups": groups,
                "readOnlyRoot": ro_root}
        c.uid, c.gid = uid, gid
        if self.k.netns:
            spec["netns"] = self.k.netns    # hostNetwork or not: the node's (pods have no network of their own)
        if self.pod["spec"].get("shareProcessNamespace"):
            spec["pidns"] = "/proc/%d/ns/pid" % self._pause()
        with open(os.path.join(cdir, "spec.json"), "w") as f:
            json.dump(spec, f)
        if c.logfile:
            prev = os.path.join(self.dir, "logs", c.name + ".previous")
            try:
                shutil.copyfile(c.logfile, prev)
            except OSError:
                pass
        os.makedirs(os.path.join(self.dir, "logs"), exist_ok=True)
        c.logfile = os.path.join(self.dir, "logs", c.name + ".log")
        open(c.logfile, "wb").close()
        # stdout and stderr are pipes, as a container runtime gives them: a
        # write to /proc/1/fd/1 (a preStop's) appends, never truncates
        c.proc = subprocess.Popen([sys.executable, CONTAINER, os.path.join(cdir, "spec.json")], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
        c.copiers = _log_copiers(c.logfile, (c.proc.stdout, c.proc.stderr))
        c.cdir = cdir
        # the helper writes the pidfile once the command has exec'd in its root;
        # before that nothing may enter the container (nsenter would see the host)
        while not os.path.exists(spec["pidfile"]) and c.proc.poll() is None:
            time.sleep(0.01)
        try:
            c.pid = int(open(spec["pidfile"]).read())
        except (OSError, ValueError):
            c.pid = None
        c.started_at = now_time()
        c.cid = "standin://%s-%s-%d" % (self.uid[:8], c.name, c.restarts)
        c.state = {"running": {"startedAt": c.started_at}}
        c.started = True
        c.ready = False
        c.ready_ok = c.ready_fail = c.live_fail = 0
        now = time.time()
        rp = c.spec.get("readinessProbe") or {}
        lp = c.spec.get("livenessProbe") or {}
        sp = c.spec.get("startupProbe") or {}
        c.next_ready = now + rp.get("initialDelaySeconds", 0)
        c.next_live = now + lp.get("initialDelaySeconds", 0)
        c.next_startup = now + sp.get("initialDelaySeconds", 0)
        c.startup_ok = not sp
        c.startup_fail = 0
        if not rp:
            c.ready = True
        self.event("Normal", "Created", "Created container %s" % c.name)
        self.event("Normal", "Started", "Started container %s" % c.name)
        hook = ((c.spec.get("lifecycle") or {}).get("postStart") or {})
        if "exec" in hook:
            rc = self.exec_in(c, hook["exec"].get("command") or [], 30)
            if rc != 0:
                self.event("Warning", "FailedPostStartHook", "PostStartHook failed")
                self.kill(c, self.pod["spec"].get("terminationGracePeriodSeconds", 30), False)

    def _pause(self):
        """The host PID of the pod's shared PID namespace's PID 1, started on first use."""
        if self.pause is not None and self.pause.poll() is None and self.pause_pid:
            return self.pause_pid
        os.makedirs(self.dir, exist_ok=True)
        pidfile = os.path.join(self.dir, "pause.pid")
        try:
            os.unlink(pidfile)
        except FileNotFoundError:
            pass
        self.pause = subprocess.Popen([sys.executable, CONTAINER, "--pause", pidfile], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                      close_fds=True)
        while not os.path.exists(pidfile) and self.pause.poll() is None:
            time.sleep(0.01)
        self.pause_pid = int(open(pidfile).read())
        return self.pause_pid

    @staticmethod
    def _expand(a, env):
        for k, v in env.items():
            a = a.replace("$(%s)" % k, v)
        return a

    def exec_in(self, c, cmd, timeout):
        """Run cmd in c's namespaces and root; -> exit code (None on timeout)."""
        if c.pid is None or c.proc is None or c.proc.poll() is not None:
            return None
        try:
            # never the host: a container's root is its overlay, not /
            if os.readlink("/proc/%d/root" % c.pid) == "/":
                return None
        except OSError:
            return None
        env = self._env(c)
        try:
            ids = ["-S", str(c.uid), "-G", str(c.gid)] if c.uid or c.gid else []
            p = subprocess.run(["nsenter", "-t", str(c.pid), "-m", "-n", "-p", "-r", "-w"] + ids + ["--"] + list(cmd),
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout, start_new_session=True)
            return p.returncode
        except subprocess.TimeoutExpired:
            return None
        except OSError:
            return 126

    def probe(self, c, pr):
        timeout = pr.get("timeoutSeconds", 1)
        if "exec" in pr:
            return self.exec_in(c, pr["exec"].get("command") or [], timeout) == 0
        host = self.pod_ip()

        def port(p):
            """A number, or the name of one of the container's ports."""
            if isinstance(p, int) or str(p).isdigit():
                return int(p)
            named = [cp.get("containerPort") for cp in c.spec.get("ports") or [] if cp.get("name") == p]
            return int(named[0]) if named else 0
        if "tcpSocket" in pr:
            try:
                with socket.create_connection((pr["tcpSocket"].get("host") or host, port(pr["tcpSocket"]["port"])), timeout):
                    return True
            except OSError:
                return False
        if "httpGet" in pr:
            g = pr["httpGet"]
            url = "%s://%s:%d%s" % (g.get("scheme", "HTTP").lower(), g.get("host") or host, port(g["port"]), g.get("path", "/"))
            try:
                import ssl
                with urllib.request.urlopen(url, timeout=timeout, context=ssl._create_unverified_context()) as r:
                    return 200 <= r.status < 400
            except Exception:
                return False
        return False

    def _exited(self, c):
        if c.proc is None or c.proc.poll() is None:
            return None
        code, sig = c.proc.returncode, 0
        try:
            st = json.load(open(os.path.join(c.cdir, "status")))
            code, sig = st["exitCode"], st["signal"]
        except (OSError, ValueError, KeyError):
            pass
        return code, sig

    def _record_exit(self, c, code, sig):
        for t in c.copiers:       # the log holds all the container wrote before it is seen terminated
            t.join(5)
        fin = now_time()
        t = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": c.started_at,
             "finishedAt": fin, "containerID": c.cid}
        if sig:
            t["signal"] = sig
        c.state = {"terminated": t}
        c.ready = False
        c.proc = None
        c.pid = None

    def kill(self, c, grace, run_prestop=True):
        """preStop, SIGTERM, SIGKILL after grace (seconds, counting the hook)."""
        if c.proc is None or c.proc.poll() is not None:
            return
        deadline = time.time() + grace
        hook = ((c.spec.get("lifecycle") or {}).get("preStop") or {})
        if run_prestop and "exec" in hook and grace > 0:
            self.exec_in(c, hook["exec"].get("command") or [], max(0.1, deadline - time.time()))
            # a hook that used up the grace period earns the one-off 2 s extension
            deadline = max(deadline, time.time() + 2)
        elif run_prestop and "sleep" in hook:
            time.sleep(min(max(0, deadline - time.time()), hook["sleep"].get("seconds", 0)))
            deadline = max(deadline, time.time() + 2)
        try:
            c.proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        while time.time() < deadline and c.proc.poll() is None:
            time.sleep(0.05)
        if c.proc.poll() is None:
            # the container's PID 1 (its namespace dies with it); the helper
            # reaps it and exits. The helper itself only when it never said.
            try:
                os.kill(c.pid or c.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                c.proc.wait(5)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()

    # -- status
    def status_patch(self, cur):
        cur = copy.deepcopy(cur)
        st = cur.setdefault("status", {})
        now = now_time()
        cs = []
        for c in self.containers:
            e = {"name": c.name, "state": c.state, "lastState": c.last_state, "ready": c.ready,
                 "restartCount": c.restarts, "image": c.spec.get("image", ""), "imageID": "",
                 "started": "running" in c.state and c.startup_ok}
            if c.cid:
                e["containerID"] = c.cid
            cs.append(e)
        st["containerStatuses"] = cs
        if self.inits:
            st["initContainerStatuses"] = [{"name": c.name, "state": c.state, "lastState": c.last_state,
                                            "ready": "terminated" in c.state and c.state["terminated"].get("exitCode") == 0,
                                            "restartCount": c.restarts, "image": c.spec.get("image", ""), "imageID": "",
                                            "started": "running" in c.state, **({"containerID": c.cid} if c.cid else {})}
                                           for c in self.inits]
        all_ready = bool(self.containers) and all(c.ready for c in self.containers)
        gates = [g.get("conditionType") for g in cur["spec"].get("readinessGates") or []]
        conds = {c["type"]: c for c in st.get("conditions") or []}
        gates_ok = all((conds.get(g) or {}).get("status") == "True" for g in gates)
        own = {"PodReadyToStartContainers": self.volumes_ready, "Initialized": self.init_done,
               "ContainersReady": all_ready, "Ready": all_ready and gates_ok, "PodScheduled": True}
        for t, ok in own.items():
            old = conds.get(t)
            s = "True" if ok else "False"
            if old is None or old.get("status") != s or (not ok and t in ("Ready", "ContainersReady")):
                c = {"type": t, "status": s, "lastProbeTime": None,
                     "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == s else now}
                if not ok and t in ("Ready", "ContainersReady"):
                    notready = [c.name for c in self.containers if not c.ready]
                    if notready:
                        c["reason"] = "ContainersNotReady"
                        c["message"] = "containers with unready status: [%s]" % " ".join(notready)
                    elif t == "Ready":
                        c["reason"] = "ReadinessGatesNotReady"
                        c["message"] = "corresponding condition of pod readiness gate \"%s\" does not exist." % next((g for g in gates if g not in conds), gates[0] if gates else "")
                conds[t] = c
        order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
        st["conditions"] = [conds[t] for t in order if t in conds] + [c for t, c in conds.items() if t not in order]
        st["hostIP"] = self.k.addresses[0]
        st["hostIPs"] = [{"ip": self.k.addresses[0]}]
        if self.volumes_ready:
            st["podIP"] = self.pod_ip()
            st["podIPs"] = [{"ip": st["podIP"]}]
        st["startTime"] = self.start_time
        st["phase"] = self.phase()
        st.setdefault("qosClass", "BestEffort")
        return cur

    def phase(self):
        policy = self.pod["spec"].get("restartPolicy", "Always")
        if self.init_failed:
            return "Failed"
        if not self.init_done:
            return "Pending"
        running = [c for c in self.containers if "running" in c.state]
        term = [c for c in self.containers if "terminated" in c.state]
        if running:
            return "Running"
        if self.containers and len(term) == len(self.containers):
            if self.terminating or policy == "Never" or (policy == "OnFailure" and all(c.state["terminated"]["exitCode"] == 0 for c in term)):
                return "Succeeded" if all(c.state["terminated"]["exitCode"] == 0 for c in term) else "Failed"
            return "Running"
        if any(c.restarts for c in self.containers):
            return "Running"
        return "Pending"

    def push_status(self):
        rt = self.k.store.type_for("", "v1", "pods")
        try:
            self.k.registry.update(rt, self.ns, self.name, None, _ctx(self.k.name), "status", patcher=self._guarded)
        except (ApiError, _Gone):
            pass

    def _guarded(self, cur):
        if cur["metadata"]["uid"] != self.uid:
            raise _Gone()
        self.pod = cur
        return self.status_patch(cur)

    # -- the pod's life
    def run(self):
        try:
            self._run()
        except Exception:
            import traceback
            traceback.print_exc()
        finally:
            for c in self.inits + self.containers:
                self.kill(c, 0, False)
            if self.pause is not None:
                self.pause.terminate()
                self.pause.wait()
            shutil.rmtree(self.dir, ignore_errors=True)
            self.done.set()

    def _run(self):
        os.makedirs(self.dir, exist_ok=True)
        self.push_status()
        mount_warned = False
        while not self.gone and self.shutdown is None:
            if self.k.paused.is_set():
                # a stopped kubelet: the processes run on, nobody looks after them
                self.wake.wait(0.25)
                self.wake.clear()
                continue
            p = self._refresh()
            if p is None:
                self.gone = True
                break
            if p["metadata"].get("deletionTimestamp"):
                return self.terminate(p["metadata"].get("deletionGracePeriodSeconds", 30))
            if not self.volumes_ready:
                try:
                    self.prepare_volumes()
                except (LookupError, KeyError) as e:
                    if not mount_warned:
                        self.event("Warning", "FailedMount", "MountVolume.SetUp failed: %s" % e)
                        mount_warned = True
                    self.wake.wait(0.5)
                    self.wake.clear()
                    continue
            now = time.time()
            policy = p["spec"].get("restartPolicy", "Always")
            if not self.init_done:
                self._run_inits(policy, now)
                self.push_status()
                self.wake.wait(0.25)
                self.wake.clear()
                continue
            for c in self.containers:
                if c.proc is None and "running" not in c.state:
                    first = c.started_at is None
                    if first or (policy == "Always" or (policy == "OnFailure" and c.state.get("terminated", {}).get("exitCode", 1) != 0)):
                        if not first and now < c.backoff_until:
                            if "terminated" in c.state:
                                c.last_state = c.state
                            c.state = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off %ds restarting failed container=%s pod=%s_%s(%s)" % (c.backoff, c.name, self.name, self.ns, self.uid)}}
                            continue
                        if not first:
                            if "terminated" in c.state:
                                c.last_state = c.state
                            c.restarts += 1
                        try:
                            self.start_container(c)
                        except (LookupError, KeyError) as e:
                            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
                    continue
                ex = self._exited(c)
                if ex is not None:
                    self._record_exit(c, *ex)
                    lived = time.time() - (parse_time(c.started_at) or time.time())
                    c.backoff = self.k.backoff_base if c.backoff == 0 or lived > 600 else min(c.backoff * 2, self.k.backoff_max)
                    c.backoff_until = time.time() + c.backoff
                    if policy == "Always" or (policy == "OnFailure" and ex[0] != 0):
                        self.event("Warning", "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)" % (c.name, self.name, self.ns, self.uid))
                    continue
                stp = c.spec.get("startupProbe")
                if stp and not c.startup_ok:
                    if now >= c.next_startup:
                        c.next_startup = now + stp.get("periodSeconds", 10)
                        if self.probe(c, stp):
                            c.startup_ok = True
                        else:
                            c.startup_fail += 1
                            if c.startup_fail >= stp.get("failureThreshold", 3):
                                self.event("Normal", "Killing", "Container %s failed startup probe, will be restarted" % c.name)
                                self.kill(c, p["spec"].get("terminationGracePeriodSeconds", 30))
                    continue
                rp = c.spec.get("readinessProbe")
                if rp and now >= c.next_ready:
                    c.next_ready = now + rp.get("periodSeconds", 10)
                    if self.probe(c, rp):
                        c.ready_fail = 0
                        c.ready_ok += 1
                        if c.ready_ok >= rp.get("successThreshold", 1):
                            c.ready = True
                    else:
                        c.ready_ok = 0
                        c.ready_fail += 1
                        if c.ready_fail >= rp.get("failureThreshold", 3) or not c.ready:
                            if c.ready or c.ready_fail == 1:
                                self.event("Warning", "Unhealthy", "Readiness probe failed")
                            c.ready = False
                lp = c.spec.get("livenessProbe")
                if lp and now >= c.next_live:
                    c.next_live = now + lp.get("periodSeconds", 10)
                    if self.probe(c, lp):
                        c.live_fail = 0
                    else:
                        c.live_fail += 1
                        if c.live_fail >= lp.get("failureThreshold", 3):
                            self.event("Normal", "Killing", "Container %s failed liveness probe, will be restarted" % c.name)
                            self.kill(c, p["spec"].get("terminationGracePeriodSeconds", 30))
            self.push_status()
            self.wake.wait(0.25)
            self.wake.clear()
        if self.shutdown is not None:
            return self.terminate(min(self.shutdown, (self.pod["spec"].get("terminationGracePeriodSeconds", 30))), shutdown=True)
        # the API object vanished (grace 0 delete): kill without waiting for a hook
        for c in self.inits + self.containers:
            self.kill(c, 2, False)

    def _run_inits(self, policy, now):
        """Init containers one after the other, each to success."""
        if self.init_failed:
            return
        for c in self.inits:
            t = c.state.get("terminated")
            if t and t.get("exitCode") == 0 and c.proc is None:
                continue
            if c.proc is not None:
                ex = self._exited(c)
                if ex is None:
                    return
                self._record_exit(c, *ex)
                if ex[0] == 0:
                    continue
                if policy == "Never":
                    self.init_failed = True
                    return
                c.backoff = self.k.backoff_base if c.backoff == 0 else min(c.backoff * 2, self.k.backoff_max)
                c.backoff_until = now + c.backoff
                return
            if c.started_at is not None:
                if now < c.backoff_until:
                    if "terminated" in c.state:
                        c.last_state = c.state
                    c.state = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off %ds restarting failed container=%s pod=%s_%s(%s)" % (c.backoff, c.name, self.name, self.ns, self.uid)}}
                    return
                if "terminated" in c.state:
                    c.last_state = c.state
                c.restarts += 1
            try:
                self.start_container(c)
            except (LookupError, KeyError) as e:
                c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
            return
        self.init_done = True

    def terminate(self, grace, shutdown=False):
        self.terminating = True
        for c in self.containers:
            if "running" in c.state:
                self.event("Normal", "Killing", "Stopping container %s" % c.name)
        threads = [threading.Thread(target=self.kill, args=(c, grace)) for c in self.inits + self.containers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in self.inits + self.containers:
            ex = self._exited(c) if c.proc is not None else None
            if ex is not None:
                self._record_exit(c, *ex)
        self.push_status()
        if shutdown:
            return
        rt = self.k.store.type_for("", "v1", "pods")
        try:
            self.k.registry.delete(rt, self.ns, self.name, {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}}, _ctx(self.k.name))
        except ApiError:
            pass

    def logs(self, container, q):
        c = next((c for c in self.inits + self.containers if c.name == container), None)
        if c is None or c.logfile is None:
            return None
        path = os.path.join(self.dir, "logs", c.name + ".previous") if q.get("previous") in ("true", "1") else c.logfile
        try:
            data = open(path, "rb").read()
        except OSError:
            return [b""]
        size = len(data)
        if q.get("tailLines"):
            n = int(q["tailLines"])
            lines = data.splitlines(True)
            data = b"".join(lines[-n:]) if n else b""
        if q.get("follow") not in ("true", "1"):
            return [data]

        try:
            f = open(path, "rb")  # held: a pod's directory removed at its end does not cut the last read
        except OSError:
            return [data]
        f.seek(size)

        def follow():
            try:
                yield data
                live = True
                while live:
                    live = not self.done.is_set() and c.proc is not None    # one last read after the end
                    if live:
                        time.sleep(0.2)
                    more = f.read()
                    if more:
                        yield more
            finally:
                f.close()
        return follow()


def _log_copiers(path, pipes):
    """Threads appending what each pipe carries to the log at path, each ending with its pipe."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    left = [len(pipes)]
    lock = threading.Lock()

    def copy(pipe):
        try:
            while True:
                try:
                    b = os.read(pipe.fileno(), 65536)
                except OSError:
                    break
                if not b:
                    break
                os.write(fd, b)
        finally:
            pipe.close()
            with lock:
                left[0] -= 1
                if not left[0]:
                    os.close(fd)
    ts = [threading.Thread(target=copy, args=(p,), daemon=True) for p in pipes]
    for t in ts:
        t.start()
    return ts


class _Gone(Exception):
    pass


class Kubelet(threading.Thread):
    def __init__(self, si, name, addresses, workdir, images, labels=None, annotations=None,
                 heartbeat=10.0, backoff_base=10.0, backoff_max=300.0, netns=None):
        super().__init__(daemon=True)
        self.si = si
        self.store = si.store
        self.registry = si.registry
        self.name = name
        self.addresses = addresses
        self.netns = netns                # the node's network namespace (a path to setns), or None: the host's
        self.dir = os.path.join(workdir, "kubelet", name)
        self.images = images
        self.labels = labels or {}
        self.annotations = annotations or {}
        self.heartbeat = heartbeat
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.workers = {}
        self.stop_ev = threading.Event()
        self.paused = threading.Event()   # a "stopped" kubelet: no heartbeats, no pod sync
        self.shutdown_grace = 30

    def event(self, pod, typ, reason, msg):
        rt = self.store.type_for("", "v1", "events")
        now = now_time()
        body = {"metadata": {"name": "%s.%x" % (pod["metadata"]["name"], time.time_ns()), "namespace": pod["metadata"]["namespace"]},
                "involvedObject": {"kind": "Pod", "namespace": pod["metadata"]["namespace"], "name": pod["metadata"]["name"],
                                   "uid": pod["metadata"]["uid"], "apiVersion": "v1"},
                "reason": reason, "message": msg, "type": typ, "source": {"component": "kubelet", "host": self.name},
                "firstTimestamp": now, "lastTimestamp": now, "count": 1, "reportingComponent": "kubelet", "reportingInstance": self.name}
        try:
            self.registry.create(rt, pod["metadata"]["namespace"], body, _ctx(self.name))
        except ApiError:
            pass

    def register(self):
        rt = self.store.type_for("", "v1", "nodes")
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
        labels.update(self.labels)
        addrs = [{"type": "InternalIP", "address": self.addresses[0]}] + \
                [{"type": "ExternalIP", "address": a} for a in self.addresses[1:]] + [{"type": "Hostname", "address": self.name}]
        body = {"metadata": {"name": self.name, "labels": labels,
                             "annotations": dict({"node.alpha.kubernetes.io/ttl": "0"}, **self.annotations)},
                "spec": {}, "status": {"addresses": addrs,
                                       "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                                       "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                                       "nodeInfo": {"kubeletVersion": "v1.32.0-standin", "kubeProxyVersion": "", "osImage": "Debian GNU/Linux",
                                                    "kernelVersion": os.uname().release, "containerRuntimeVersion": "standin://1",
                                                    "operatingSystem": "linux", "architecture": "amd64", "machineID": "", "systemUUID": "", "bootID": ""}}}
        try:
            self.registry.create(rt, "", body, _ctx(self.name))
        except ApiError as e:
            if e.code != 409:
                raise
            def p(cur):
                cur = copy.deepcopy(cur)
                cur["metadata"]["labels"] = dict(cur["metadata"].get("labels") or {}, **labels)
                cur["metadata"]["annotations"] = dict(cur["metadata"].get("annotations") or {}, **body["metadata"]["annotations"])
                return cur
            self.registry.update(rt, "", self.name, None, _ctx(self.name), patcher=p)
            self.registry.update(rt, "", self.name, None, _ctx(self.name), "status",
                                 patcher=lambda cur: dict(copy.deepcopy(cur), status=dict((cur.get("status") or {}), **body["status"])))
        self.beat()

    def renew_lease(self):
        """The node's Lease in kube-node-lease, as the kubelet renews it."""
        rt = self.store.type_for("coordination.k8s.io", "v1", "leases")
        now = now_micro()
        try:
            self.registry.update(rt, "kube-node-lease", self.name, None, _ctx(self.name),
                                 patcher=lambda cur: dict(copy.deepcopy(cur), spec=dict(cur.get("spec") or {}, renewTime=now)))
        except ApiError as e:
            if e.code != 404:
                return
            node = self.store.get(("", "nodes"), "", self.name)
            body = {"metadata": {"name": self.name, "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": node["metadata"]["uid"]}] if node else []},
                    "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40, "renewTime": now}}
            try:
                self.registry.create(rt, "kube-node-lease", body, _ctx(self.name))
            except ApiError:
                pass

    def beat(self):
        self.renew_lease()
        rt = self.store.type_for("", "v1", "nodes")
        now = now_time()

        def p(cur):
            cur = copy.deepcopy(cur)
            st = cur.setdefault("status", {})
            old = {c["type"]: c for c in st.get("conditions") or []}
            conds = []
            for t, ok, reason, msg in (("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                                       ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                                       ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                                       ("Ready", "True", "KubeletReady", "kubelet is posting ready status")):
                o = old.get(t) or {}
                conds.append({"type": t, "status": ok, "lastHeartbeatTime": now,
                              "lastTransitionTime": o.get("lastTransitionTime") if o.get("status") == ok else now,
                              "reason": reason, "message": msg})
            st["conditions"] = conds
            return cur
        try:
            self.registry.update(rt, "", self.name, None, _ctx(self.name), "status", patcher=p)
        except ApiError:
            pass

    def run(self):
        self.register()
        last = time.time()
        seen = -1
        while not self.stop_ev.is_set():
            with self.store.cond:
                if self.store.rv == seen:
                    self.store.cond.wait(min(1.0, self.heartbeat))
                seen = self.store.rv
            if self.stop_ev.is_set():
                break
            if self.paused.is_set():
                continue
            if time.time() - last >= self.heartbeat:
                last = time.time()
                self.beat()
            self.sync()

    def sync(self):
        pods, _ = self.store.list(("", "pods"), None, None, [("spec.nodeName", "=", self.name)])
        live = set()
        for p in pods:
            uid = p["metadata"]["uid"]
            live.add(uid)
            w = self.workers.get(uid)
            if w is None:
                if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed") or p["metadata"].get("deletionTimestamp") and not (p.get("status") or {}).get("containerStatuses"):
                    if p["metadata"].get("deletionTimestamp"):
                        try:
                            self.registry.delete(self.store.type_for("", "v1", "pods"), p["metadata"]["namespace"], p["metadata"]["name"],
                                                 {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}, _ctx(self.name))
                        except ApiError:
                            pass
                    continue
                w = PodWorker(self, p)
                self.workers[uid] = w
                w.start()
            else:
                w.wake.set()
        for uid, w in list(self.workers.items()):
            if uid not in live:
                w.gone = True
                w.wake.set()
            if w.done.is_set():
                del self.workers[uid]

    def log_for(self, pod, container, q):
        w = self.workers.get(pod["metadata"]["uid"])
        if w is None:
            return None
        return w.logs(container, q)

    def stop(self):
        """Node shutdown: every pod stopped gracefully (capped grace)."""
        self.stop_ev.set()
        with self.store.cond:
            self.store.cond.notify_all()
        self.join(5)
        for w in list(self.workers.values()):
            w.shutdown = self.shutdown_grace
            w.wake.set()
        for w in list(self.workers.values()):
            w.done.wait(self.shutdown_grace + 10)
