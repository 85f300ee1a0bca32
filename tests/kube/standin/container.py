"""Run one container: `python3 container.py SPEC.json`; or a pod's shared PID
namespace (shareProcessNamespace): `python3 container.py --pause PIDFILE`.

New mount and PID namespaces (unshare(2) through ctypes), an overlay of the
image's root (lower, never written) under a tmpfs (upper, gone with the
namespace), /proc of the new PID namespace, /dev and /sys bound in, the pod's
volumes bound at their mount paths, chroot, then exec of the command as PID 1
of its namespace (or, when the spec names a pod's shared PID namespace
`pidns`, joined with setns(2): the pause process is PID 1 there, as the
pod sandbox is in Kubernetes). When the spec names the node's network
namespace `netns` (cluster.py --node-netns), it is joined first, so every
process of the container is in it. This process stays outside as the container's parent
(and dies with the kubelet thread that started it):
it forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to the container,
writes the container's host PID to the spec's pidfile, and exits with its
status (128+N for signal N) and the signal in statusfile. If this process is
killed, the kernel kills the container (PR_SET_PDEATHSIG), and with it every
process of its PID namespace."""
import ctypes
import json
import os
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1

libc = ctypes.CDLL(None, use_errno=True)


def _mount(src, dst, fstype, flags, data=None):
    r = libc.mount(src.encode() if src else None, dst.encode(), fstype.encode() if fstype else None,
                   ctypes.c_ulong(flags), data.encode() if data else None)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, "mount %s on %s: %s" % (src or fstype, dst, os.strerror(e)))


def in_root(root, path):
    """`path` inside `root`, following symlinks as the container will see
    them (an absolute link target is taken from `root`, never the host)."""
    parts = [p for p in path.split("/") if p and p != "."]
    cur = root
    hops = 0
    while parts:
        p = parts.pop(0)
        if p == "..":
            cur = os.path.dirname(cur) if cur != root else root
            continue
        nxt = os.path.join(cur, p)
        if os.path.islink(nxt):
            hops += 1
            if hops > 40:
                raise OSError("too many symlinks under %s" % path)
            target = os.readlink(nxt)
            if target.startswith("/"):
                cur = root
            parts = [x for x in target.split("/") if x and x != "."] + parts
            continue
        cur = nxt
    return cur


def _mkpoint(path, is_file):
    if is_file:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            open(path, "a").close()
    else:
        os.makedirs(path, exist_ok=True)


def setup_and_exec(spec):
    root = spec["root"]
    scratch = spec["scratch"]
    _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    up, wk, m = (os.path.join(scratch, x) for x in ("upper", "work", "merged"))
    for d in (up, wk, m):
        os.mkdir(d)
    _mount("overlay", m, "overlay", 0, "lowerdir=%s,upperdir=%s,workdir=%s" % (root, up, wk))
    for d in ("proc", "dev", "sys", "tmp", "run"):
        os.makedirs(in_root(m, d), exist_ok=True)
    _mount("proc", in_root(m, "proc"), "proc", MS_NOSUID | MS_NODEV)
    _mount("/dev", in_root(m, "dev"), None, MS_BIND | MS_REC)
    _mount("/sys", in_root(m, "sys"), None, MS_BIND | MS_REC)
    _mount("tmpfs", in_root(m, "tmp"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    _mount("tmpfs", in_root(m, "run"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for mnt in spec.get("mounts", []):
        src, dst = mnt["src"], in_root(m, mnt["dst"])
        if not (dst == m or dst.startswith(m + "/")):
            raise OSError("mount path %s leaves the container's root" % mnt["dst"])
        _mkpoint(dst, os.path.isfile(src))
        _mount(src, dst, None, MS_BIND | MS_REC)
        if mnt.get("ro"):
            _mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    if spec.get("readOnlyRoot"):
        _mount(None, m, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    os.chroot(m)
    os.chdir(spec.get("cwd") or "/")
    if spec.get("uid") or spec.get("gid") or spec.get("groups"):
        os.setgroups(spec.get("groups") or [])
        os.setgid(spec.get("gid", 0))
        os.setuid(spec.get("uid", 0))
    argv = spec["argv"]
    env = spec.get("env") or {}
    os.execvpe(argv[0], argv, env)


def pause(pidfile):
    """PID 1 of a pod's shared PID namespace: reaps orphans until killed."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if libc.unshare(CLONE_NEWPID) != 0:
        sys.stderr.write("container: unshare: %s\n" % os.strerror(ctypes.get_errno()))
        return 127
    pid = os.fork()
    if pid == 0:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        while True:
            try:
                os.wait()
            except ChildProcessError:
                signal.pause()
            except InterruptedError:
                pass
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(pid))
    os.rename(pidfile + ".tmp", pidfile)
    signal.signal(signal.SIGTERM, lambda n, f: os.kill(pid, signal.SIGKILL))
    while True:
        try:
            os.waitpid(pid, 0)
            return 0
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--pause":
        return pause(sys.argv[2])
    # die with the kubelet's pod worker that started us (even if it is
    # SIGKILLed), and take the container along (its own PDEATHSIG below)
    parent = os.getppid()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        return 127
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    if spec.get("netns"):
        # the node's network namespace (cluster.py --node-netns), before the mount namespace is made
        try:
            fd = os.open(spec["netns"], os.O_RDONLY)
        except OSError as e:
            sys.stderr.write("container: the node's network namespace: %s\n" % e)
            return 127
        rc = libc.setns(fd, CLONE_NEWNET)
        os.close(fd)
        if rc != 0:
            sys.stderr.write("container: setns (network): %s\n" % os.strerror(ctypes.get_errno()))
            return 127
    if spec.get("pidns"):
        # the pod's shared PID namespace: children forked from here on are in it
        try:
            fd = os.open(spec["pidns"], os.O_RDONLY)
        except OSError as e:
            sys.stderr.write("container: the pod's PID namespace: %s\n" % e)
            return 127
        rc = libc.setns(fd, CLONE_NEWPID)
        os.close(fd)
        if rc != 0 or libc.unshare(CLONE_NEWNS) != 0:
            sys.stderr.write("container: setns: %s\n" % os.strerror(ctypes.get_errno()))
            return 127
    elif libc.unshare(CLONE_NEWNS | CLONE_NEWPID) != 0:
        e = ctypes.get_errno()
        sys.stderr.write("container: unshare: %s\n" % os.strerror(e))
        return 127
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # the pidfile says "ready for nsenter" only once the container has exec'd:
    # the write end is close-on-exec, so EOF on it means exec (or death)
    rfd, wfd = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            setup_and_exec(spec)
        except Exception as e:  # what the runtime reports as a failed start
            sys.stderr.write("container: %s\n" % e)
            sys.stderr.flush()
            os._exit(127)
    os.close(wfd)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, lambda n, f: os.kill(pid, n))
    while True:
        try:
            if not os.read(rfd, 1):
                break
        except InterruptedError:
            continue
    os.close(rfd)
    tmp = spec["pidfile"] + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(pid))
    os.rename(tmp, spec["pidfile"])
    while True:
        try:
            _, st = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            st = 0
            break
    sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0
    code = 128 + sig if sig else os.WEXITSTATUS(st)
    with open(spec["statusfile"], "w") as f:
        json.dump({"exitCode": code, "signal": sig}, f)
    return code


if __name__ == "__main__":
    sys.exit(main())
