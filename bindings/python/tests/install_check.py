#!/usr/bin/env python3
"""`cmake --install --prefix P` of the library and of component python into a scratch
prefix, then import the installed package from P (not the build tree) with no
LD_LIBRARY_PATH (the extension's RUNPATH is relative: $ORIGIN/...) and plan with it.

usage: install_check.py BUILD_DIR PYTHON_INSTALL_DIR LIBDIR
(PYTHON_INSTALL_DIR and LIBDIR as CMake was configured with: relative ones are under
the prefix; an absolute PYTHON_INSTALL_DIR is installed under a DESTDIR instead, so
the real site-packages is never touched, and found there through LD_LIBRARY_PATH.)
"""

import glob
import os
import subprocess
import sys
import tempfile

SCRIPT = r"""
import json, os, sys, turnfleet
assert turnfleet.__file__.startswith(os.environ["TF_INSTALLED"]), turnfleet.__file__
src = os.environ["TF_SOURCE_DIR"]
with turnfleet.Pool.load(f"{src}/examples/pools/loopback.yaml") as pool, \
        turnfleet.Nodes.load(f"{src}/examples/nodes/loopback.json") as nodes, turnfleet.plan(pool, nodes) as plan:
    print(turnfleet.__version__, plan.pool_name, len(plan.relays), json.loads(plan.to_json())["placeable"])
"""


def main():
    build, pydir, libdir = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="tf-py-install-") as dest:
        env = dict(os.environ, TF_INSTALLED=dest)
        env.pop("LD_LIBRARY_PATH", None)
        relative = not os.path.isabs(pydir)
        if relative:
            where, pkg_root = ["--prefix", dest], os.path.join(dest, pydir)
        else:
            where, pkg_root = [], dest + pydir
            env["DESTDIR"] = dest
        for component in ("Unspecified", "python"):
            subprocess.run(["cmake", "--install", build, "--component", component, *where], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        pkg = os.path.join(pkg_root, "turnfleet")
        files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(pkg, "*")))
        print("installed:", pkg.replace(dest, "$P"), files)
        for want in ("__init__.py", "core.py", "stun.py", "_errors.py"):
            if want not in files:
                print(f"{want} was not installed", file=sys.stderr)
                return 1
        if not any(f.startswith("_core.") and f.endswith(".so") for f in files):
            print("the extension _core was not installed", file=sys.stderr)
            return 1
        env.update(PYTHONPATH=pkg_root, PYTHONNOUSERSITE="1")
        if not relative:  # the RUNPATH names the absolute libdir, here under DESTDIR
            env["LD_LIBRARY_PATH"] = dest + libdir
        # run from the scratch directory: "-c" puts the working directory first on sys.path
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=dest, capture_output=True, text=True)
        print(out.stdout, end="")
        if out.returncode != 0 or " demo 3 3" not in out.stdout:
            print(out.stderr, file=sys.stderr)
            return 1
        so = glob.glob(os.path.join(pkg, "_core.*.so"))[0]
        dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
        want = "$ORIGIN/" if relative else libdir
        if not any(("RUNPATH" in line or "RPATH" in line) and want in line for line in dyn.splitlines()):
            print(f"_core has no RUNPATH {want}...:\n{dyn}", file=sys.stderr)
            return 1
        print("RUNPATH:", [line.split("[")[-1].rstrip("]") for line in dyn.splitlines() if "RUNPATH" in line])
    return 0


if __name__ == "__main__":
    sys.exit(main())
