"""The process tree a test leaves behind, from /proc: what a launcher started, and which of those
still run (a PID is the same process only with the same start time)."""
import os


def proc_table():
    """pid -> (ppid, start time) of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open("/proc/%s/stat" % d).read()
            rest = st[st.rindex(")") + 2:].split()
            out[int(d)] = (int(rest[1]), rest[19])
        except (OSError, ValueError, IndexError):
            pass
    return out


def descendants(root):
    """pid -> start time of every process below @p root."""
    table, kids, todo = proc_table(), {}, [root]
    while todo:
        p = todo.pop()
        for pid, (ppid, start) in table.items():
            if ppid == p and pid not in kids:
                kids[pid] = start
                todo.append(pid)
    return kids


def running(kids):
    """Those of @p kids (descendants()) still alive: (pid, state letter, command line), zombies included."""
    now, out = proc_table(), []
    for pid, start in kids.items():
        if pid in now and now[pid][1] == start:
            try:
                state = [l.split()[1] for l in open("/proc/%d/status" % pid) if l.startswith("State:")][0]
                cmd = open("/proc/%d/cmdline" % pid).read().replace("\0", " ")
            except (OSError, IndexError):
                continue
            out.append((pid, state, cmd))
    return out
