# SPDX-License-Identifier: MIT
"""signals.py SCENARIO PMGUARD [PY]: `pmguard run` as PROG's parent is
transparent for signals and job control (issue 21, third pass).  Exit 0:
as without pmguard; 1: not (says why on stdout); 77: cannot apply here.

  forward-alrm, forward-rtmin  a signal outside the common few, sent to
        pmguard, reaches PROG (PROG handles it, exits 0), never kills
        pmguard and, through it, PROG
  self-stop   PROG stops itself (kill(getpid(), SIGTSTP), as less and vi
        do): pmguard stops too, so the shell sees the job stopped; SIGCONT
        to pmguard resumes both, exit 0
  tstp        SIGTSTP sent to pmguard (kill, not the terminal) stops PROG
        and pmguard; SIGCONT to pmguard resumes both
  parent      PROG signals its parent (SIGUSR1 to getppid(), a readiness
        notice): the signal reaches pmguard's parent and does not come back
        to kill PROG
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

scen, pmg = sys.argv[1], sys.argv[2]
py = sys.argv[3] if len(sys.argv) > 3 else sys.executable
tmp = tempfile.mkdtemp(prefix="pmg-sig.")
ready = os.path.join(tmp, "ready")


def prog(code):
    """pmguard run -- python -c CODE, stdout/stderr to files"""
    out = open(os.path.join(tmp, "out"), "w")
    return subprocess.Popen([pmg, "run", "--", py, "-c", code, ready],
                            stdout=out, stderr=subprocess.STDOUT)


def wait_ready(p, t=20):
    t0 = time.time()
    while not os.path.exists(ready):
        if p.poll() is not None or time.time() - t0 > t:
            return False
        time.sleep(0.02)
    return True


def out():
    with open(os.path.join(tmp, "out")) as f:
        return f.read()


def fail(msg, p=None):
    print(msg)
    print("# PROG's output: " + out().replace("\n", "\n# "))
    if p and p.poll() is None:
        p.kill()
        p.wait()
    sys.exit(1)


def child_of(pid):
    """pid's child (from /proc/*/stat: no CONFIG_PROC_CHILDREN needed)"""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        return int(d)
            except (OSError, ValueError, IndexError):
                pass
    return None


def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


def stopped(pid, t=5):
    """wait (WUNTRACED) up to t seconds for pid to stop: True/False"""
    t0 = time.time()
    while time.time() - t0 < t:
        r, st = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
        if r and os.WIFSTOPPED(st):
            return True
        if r:
            return False
        time.sleep(0.02)
    return False


HANDLE = """
import signal, sys, time
signal.signal(signal.%s, lambda *a: sys.exit(0))
open(sys.argv[1], "w").close()
time.sleep(20)
sys.exit(3)
"""

if scen in ("forward-alrm", "forward-rtmin"):
    sig = {"forward-alrm": "SIGALRM", "forward-rtmin": "SIGRTMIN"}[scen]
    p = prog(HANDLE % sig)
    if not wait_ready(p):
        fail("PROG did not start", p)
    os.kill(p.pid, getattr(signal, sig))
    try:
        rc = p.wait(10)
    except subprocess.TimeoutExpired:
        fail("%s to pmguard: PROG did not get it in 10 s" % sig, p)
    if rc != 0:
        fail("%s to pmguard: exit %d (PROG's would be 0)" % (sig, rc))
elif scen in ("self-stop", "tstp"):
    code = """
import os, signal, sys, time
open(sys.argv[1], "w").close()
%s
print("resumed", flush=True)
"""
    if scen == "self-stop":
        p = prog(code % "os.kill(os.getpid(), signal.SIGTSTP)")
    else:
        p = prog(code % "time.sleep(1.5)")
    if not wait_ready(p):
        fail("PROG did not start", p)
    c = child_of(p.pid)
    if not c:
        fail("PROG, pmguard's child, not found in /proc", p)
    if scen == "tstp":
        os.kill(p.pid, signal.SIGTSTP)
    if not stopped(p.pid):
        st = state(c)
        os.kill(c, signal.SIGCONT)
        fail("pmguard did not stop (PROG's state: %s)" % st, p)
    time.sleep(2)
    if state(c) not in ("T", "t"):
        os.kill(p.pid, signal.SIGCONT)
        fail("pmguard stopped, PROG did not (state %s)" % state(c), p)
    os.kill(p.pid, signal.SIGCONT)
    try:
        rc = p.wait(10)
    except subprocess.TimeoutExpired:
        fail("SIGCONT to pmguard: not resumed in 10 s", p)
    if rc != 0 or "resumed" not in out():
        fail("resumed: exit %d" % rc)
elif scen == "parent":
    got = []
    signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
    p = prog("""
import os, signal, sys, time
os.kill(os.getppid(), signal.SIGUSR1)
time.sleep(0.5)
print("alive", flush=True)
""")
    rc = p.wait(20)
    if rc != 0:
        fail("PROG signalled its parent: exit %d (as without pmguard: 0)"
             % rc)
    if not got:
        fail("the parent never got PROG's SIGUSR1")
else:
    print("unknown scenario " + scen)
    sys.exit(2)
sys.exit(0)
