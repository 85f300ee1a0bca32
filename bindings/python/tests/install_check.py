#!/usr/bin/env python3
"""`cmake --install` of the library and of component python into a DESTDIR, then
import the installed package from there (not the build tree) and plan with it.

usage: install_check.py BUILD_DIR PYTHON_INSTALL_DIR LIBDIR
(PYTHON_INSTALL_DIR and LIBDIR are the absolute install destinations CMake was
configured with; DESTDIR puts them under a scratch directory, so the real
site-packages is never touched.)
"""

import glob
import os
import subprocess
import sys
import tempfile

SCRIPT = r"""
import json, os, sys, turnfleet
assert turnfleet.__file__.startswith(os.environ["DESTDIR"]), turnfleet.__file__
src = os.environ["TF_SOURCE_DIR"]
with turnfleet.Pool.load(f"{src}/examples/pools/loopback.yaml") as pool, \
        turnfleet.Nodes.load(f"{src}/examples/nodes/loopback.json") as nodes, turnfleet.plan(pool, nodes) as plan:
    print(turnfleet.__version__, plan.pool_name, len(plan.relays), json.loads(plan.to_json())["placeable"])
"""


def main():
    build, pydir, libdir = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="tf-py-install-") as dest:
        env = dict(os.environ, DESTDIR=dest)
        for component in ("Unspecified", "python"):
            subprocess.run(["cmake", "--install", build, "--component", component], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        pkg = dest + os.path.join(pydir, "turnfleet")
        files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(pkg, "*")))
        print("installed:", pkg.replace(dest, "$DESTDIR"), files)
        for want in ("__init__.py", "core.py", "stun.py", "_errors.py"):
            if want not in files:
                print(f"{want} was not installed", file=sys.stderr)
                return 1
        if not any(f.startswith("_core.") and f.endswith(".so") for f in files):
            print("the extension _core was not installed", file=sys.stderr)
            return 1
        # the installed extension finds the installed library (RUNPATH = LIBDIR,
        # here under DESTDIR: point the loader there)
        env.update(PYTHONPATH=dest + pydir, LD_LIBRARY_PATH=dest + libdir, PYTHONNOUSERSITE="1")
        # run from the scratch directory: "-c" puts the working directory first on sys.path
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=dest, capture_output=True, text=True)
        print(out.stdout, end="")
        if out.returncode != 0 or " demo 3 3" not in out.stdout:
            print(out.stderr, file=sys.stderr)
            return 1
        # the RUNPATH names the install libdir
        so = glob.glob(os.path.join(pkg, "_core.*.so"))[0]
        dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
        if libdir not in dyn:
            print(f"_core has no RUNPATH {libdir}:\n{dyn}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
