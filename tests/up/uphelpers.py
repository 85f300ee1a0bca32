"""What the `turnfleet up` end-to-end tests share."""
import os
import time


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours is not alive
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(what, cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def write_watched(path, text):
    """Replace a file `up` watches at once (no half-written file), with a new mtime even within one clock tick."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1000000))


def stop_all(procs):
    """Kill and reap every process of @p procs (Popen with a stdout pipe) still running; close their pipes."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
