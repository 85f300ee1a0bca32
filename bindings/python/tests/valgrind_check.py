#!/usr/bin/env python3
"""Run the Python suite under valgrind (memcheck) and fail on any leak or memory
error that has a frame in libturnfleet or in the extension turnfleet/_core.

- PYTHONMALLOC=malloc, so that valgrind sees every allocation;
- only "definitely lost" and "indirectly lost" leak records count, and only
  those with one of our frames: CPython keeps much memory reachable at exit,
  and that is not ours;
- invalid reads/writes/frees and uses of uninitialised values count when the
  innermost frame outside the system libraries (libc, OpenSSL, libyaml, cJSON)
  is ours: CPython 3.11 itself reports uninitialised values (small ints) that
  may surface while it runs code our wrapper called;
- valgrind.supp suppresses the one known leak of SWIG 4.1.0's own runtime;
- the suite runs with TF_PY_VALGRIND=1 (longer probe deadlines, fewer
  repetitions), including test_probe against a real turnserver (not traced);
- first, a self-test: a snippet that leaks a string of libturnfleet on purpose
  (through ctypes, bypassing the bindings) must be reported, so a silent
  checker cannot pass.

usage: valgrind_check.py [MODULE ...]   (default: every tests/test_*.py)
Environment as for the other Python tests (PYTHONPATH to the build tree's package).
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
OURS = ("libturnfleet.so", "/turnfleet/_core.")
# libraries the library calls into: an error there is charged to their caller
SYSTEM = ("vgpreload_", "/libc.so", "/libc-", "/ld-linux", "/libm.so", "libcrypto.so", "libssl.so", "libyaml",
          "libcjson", "libz.so")
LEAKS = {"Leak_DefinitelyLost", "Leak_IndirectlyLost"}

LEAK_ON_PURPOSE = r"""
import ctypes
import turnfleet  # loads libturnfleet: ctypes finds it by its soname
tf = ctypes.CDLL("libturnfleet.so." + ".".join(turnfleet.__version__.split(".")[:2]))
tf.tf_cred_mint.argtypes = [ctypes.POINTER(ctypes.c_char_p)] * 2 + [ctypes.c_char_p] * 2 + [ctypes.c_int64, ctypes.c_int]
user, pw = ctypes.c_char_p(), ctypes.c_char_p()
assert tf.tf_cred_mint(ctypes.byref(user), ctypes.byref(pw), b"secret", b"user", 100, 0) == 0
del user, pw  # never tf_free()d: two strings definitely lost in libturnfleet
"""


def run(valgrind, argv, xml_path, env):
    cmd = [
        valgrind,
        "--tool=memcheck",
        "--leak-check=full",
        "--show-leak-kinds=definite,indirect",
        "--errors-for-leak-kinds=definite,indirect",
        "--num-callers=50",
        f"--suppressions={os.path.join(HERE, 'valgrind.supp')}",
        "--xml=yes",
        f"--xml-file={xml_path}",
        sys.executable,
        *argv,
    ]
    return subprocess.run(cmd, cwd=HERE, env=env).returncode


def frames(error):
    for frame in error.iter("frame"):
        yield (frame.findtext("obj") or "", frame.findtext("fn") or "?", frame.findtext("file"), frame.findtext("line"))


def is_ours(obj):
    return any(o in obj for o in OURS)


def ours(error):
    """A leak with one of our frames in its allocation stack; another error whose innermost
    frame outside the system libraries is ours."""
    stack = list(frames(error))
    if (error.findtext("kind") or "").startswith("Leak_"):
        return any(is_ours(obj) for obj, *_ in stack)
    for obj, *_ in stack:
        if any(s in obj for s in SYSTEM):
            continue
        return is_ours(obj)
    return False


def describe(error):
    what = error.find("xwhat")
    text = what.findtext("text") if what is not None else error.findtext("what")
    lines = [f"{error.findtext('kind')}: {text}"]
    for obj, fn, file, line in frames(error):
        where = f"{file}:{line}" if file else os.path.basename(obj)
        lines.append(f"    {fn} ({where})")
    return "\n".join(lines)


def findings(xml_path):
    """(errors with one of our frames, count of all error records)."""
    if not os.path.exists(xml_path) or os.path.getsize(xml_path) == 0:
        raise SystemExit(f"valgrind wrote no report ({xml_path})")
    root = ET.parse(xml_path).getroot()
    errors = root.findall("error")
    bad = []
    for e in errors:
        kind = e.findtext("kind") or ""
        if kind.startswith("Leak_") and kind not in LEAKS:
            continue
        if ours(e):
            bad.append(e)
    return bad, len(errors)


def main():
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print("valgrind not found: install it (tools/dev/install-deps.sh)", file=sys.stderr)
        return 1
    modules = sys.argv[1:] or sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(HERE, "test_*.py")))
    env = dict(os.environ, PYTHONMALLOC="malloc", TF_PY_VALGRIND="1", PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory(prefix="tf-py-valgrind-") as d:
        # 1. the checker sees a leak in libturnfleet
        xml_path = os.path.join(d, "selftest.xml")
        rc = run(valgrind, ["-c", LEAK_ON_PURPOSE], xml_path, env)
        bad, _ = findings(xml_path)
        leaks = [e for e in bad if e.findtext("kind") in LEAKS]
        if rc != 0 or not leaks:
            print(f"self-test: the deliberate leak was not reported (exit {rc}, {len(bad)} findings)", file=sys.stderr)
            return 1
        print(f"self-test: the deliberate leak is reported ({len(leaks)} record(s)), e.g.\n{describe(leaks[0])}\n")

        # 2. the suite
        xml_path = os.path.join(d, "suite.xml")
        print(f"valgrind: python3 -m unittest {' '.join(modules)}", flush=True)
        rc = run(valgrind, ["-m", "unittest", *modules], xml_path, env)
        bad, total = findings(xml_path)
        for e in bad:
            print(describe(e), file=sys.stderr)
        print(f"valgrind: {total} error/leak record(s) in all, {len(bad)} in libturnfleet or _core; "
              f"unittest exit status {rc}")
        if rc != 0:
            print("the suite failed under valgrind", file=sys.stderr)
            return 1
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
