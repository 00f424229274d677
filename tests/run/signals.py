# SPDX-License-Identifier: MIT
"""signals.py SCENARIO PMGUARD [PY]: `pmguard run` as PROG's parent is
transparent for signals and job control.  Exit 0:
as without pmguard; 1: not (says why on stdout); 77: cannot apply here.

  forward-alrm, forward-rtmin  a signal outside the common few, sent to
        pmguard, reaches PROG (PROG handles it, exits 0), never kills
        pmguard and, through it, PROG
  self-stop   PROG stops itself (kill(getpid(), SIGTSTP), as less and vi
        do): pmguard stops too, so the shell sees the job stopped; SIGCONT
        to pmguard resumes both, exit 0
  tstp        SIGTSTP sent to pmguard (kill, not the terminal) stops PROG
        and pmguard; SIGCONT to pmguard resumes both
  parent      PROG, in a process group of its own, signals its parent
        (SIGUSR1 to getppid(), a readiness notice): the signal reaches
        pmguard's parent and does not come back to kill PROG
  parent-same-group  the same from PROG in pmguard's group: PROG is not
        killed; pmguard cannot tell it from a signal to the whole group, so
        it passes it nowhere
  group       PROG signals its whole group (kill(0, SIGUSR1), as scripts'
        `trap 'kill 0' EXIT` do): PROG gets it once, pmguard's parent (in
        another group, an interactive shell) never
  stopped-start STOPPROG  STOPPROG (stopinit-prog) stops in a library
        constructor, before the preload confirmed it loaded (^Z at
        start-up): pmguard stops too, and the time stopped (longer than
        the confirmation timeout, PMGUARD_RUN_CONFIRM_S=3) does not count:
        SIGCONT resumes it, exit 0, never killed as "did not load"
  stop-cont-prog  without a terminal, SIGSTOP then SIGCONT sent to PROG
        alone (a debugger, a scheduler): pmguard does not stop (no one
        would continue it), PROG runs on and pmguard ends with it
  int-at-start STOPPROG  ^C (SIGINT to the job's group) while STOPPROG's
        library constructor runs, before the preload confirmed: PROG dies
        of SIGINT, and so does pmguard (not exit 127, "did not load")
  slow-start STOPPROG  STOPPROG's library constructor takes 5 s (a slow
        machine), longer than the timeout (3 s): ld.so has mapped the
        library, so pmguard waits for its confirmation, exit 0
"""
import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

scen, pmg = sys.argv[1], sys.argv[2]
py = sys.argv[3] if len(sys.argv) > 3 else sys.executable
tmp = tempfile.mkdtemp(prefix="pmg-sig.")
atexit.register(shutil.rmtree, tmp, True)
ready = os.path.join(tmp, "ready")


def prog(code):
    """pmguard run -- python -c CODE, stdout/stderr to files, in a process
    group of its own whose parent (this script) is in another group of the
    session: not an orphaned group, where the kernel discards SIGTSTP
    (the guest's suite runs in one)"""
    out = open(os.path.join(tmp, "out"), "w")
    return subprocess.Popen([pmg, "run", "--", py, "-c", code, ready],
                            stdout=out, stderr=subprocess.STDOUT,
                            preexec_fn=os.setpgrp)


def wait_ready(p, t=20):
    t0 = time.time()
    while not os.path.exists(ready):
        if p.poll() is not None or time.time() - t0 > t:
            return False
        time.sleep(0.02)
    return True


def out():
    try:
        with open(os.path.join(tmp, "out")) as f:
            return f.read()
    except OSError:
        return ""


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
elif scen in ("parent", "parent-same-group", "group"):
    got = []
    signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
    p = prog("""
import os, signal, sys, time
n = []
signal.signal(signal.SIGUSR1, lambda *a: n.append(1))
if "%s" == "parent":
    os.setpgid(0, 0)
os.kill(%s, signal.SIGUSR1)
time.sleep(0.5)
print("alive", len(n), flush=True)
""" % (scen, "0" if scen == "group" else "os.getppid()"))
    rc = p.wait(20)
    if rc != 0:
        fail("PROG signalled its %s: exit %d (as without pmguard: 0)"
             % ("group" if scen == "group" else "parent", rc))
    if scen == "parent" and not got:
        fail("PROG in a group of its own signalled its parent: pmguard's "
             "parent never got it")
    if scen != "parent" and got:
        fail("PROG signalled %s: pmguard's parent, in another group, got "
             "it" % ("its group" if scen == "group" else "pmguard"))
    if scen == "group" and "alive 1" not in out():
        fail("PROG signalled its group: PROG got it %s times, not once"
             % out())
elif scen == "stop-cont-prog":
    out_f = open(os.path.join(tmp, "out"), "w")
    p = subprocess.Popen([pmg, "run", "--", py, "-c", """
import sys, time
open(sys.argv[1], "w").close()
time.sleep(1.5)
print("done", flush=True)
""", ready], stdout=out_f, stderr=subprocess.STDOUT, preexec_fn=os.setsid)
    if not wait_ready(p):
        fail("PROG did not start", p)
    c = child_of(p.pid)
    if not c:
        fail("PROG, pmguard's child, not found in /proc", p)
    os.kill(c, signal.SIGSTOP)
    time.sleep(1)
    if state(p.pid) in ("T", "t"):
        os.kill(c, signal.SIGCONT)
        os.kill(p.pid, signal.SIGCONT)
        fail("SIGSTOP sent to PROG alone (no terminal): pmguard stopped "
             "too, and would not be continued by a SIGCONT to PROG", p)
    os.kill(c, signal.SIGCONT)
    try:
        rc = p.wait(15)
    except subprocess.TimeoutExpired:
        fail("SIGSTOP, SIGCONT to PROG: pmguard did not end", p)
    if rc != 0 or "done" not in out():
        fail("SIGSTOP, SIGCONT to PROG: exit %d" % rc)
elif scen == "int-at-start":
    env = dict(os.environ, STOPINIT="sleep5")
    o = open(os.path.join(tmp, "out"), "w")

    def job():
        # a job of its own with SIGINT at its default (a suite run in
        # the background by sh inherits it ignored)
        os.setpgrp()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    p = subprocess.Popen([pmg, "run", "--", sys.argv[4]], env=env,
                         stdout=o, stderr=subprocess.STDOUT,
                         preexec_fn=job)
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGINT)
    try:
        rc = p.wait(20)
    except subprocess.TimeoutExpired:
        fail("^C at start-up: pmguard did not end", p)
    if rc != -signal.SIGINT:
        fail("^C at start-up (before the library confirmed): exit %d, "
             "not killed by SIGINT as PROG was" % rc)
elif scen == "slow-start":
    env = dict(os.environ, STOPINIT="sleep5", PMGUARD_RUN_CONFIRM_S="3")
    with open(os.path.join(tmp, "out"), "w") as o:
        rc = subprocess.call([pmg, "run", "--", sys.argv[4]], env=env,
                             stdout=o, stderr=subprocess.STDOUT, timeout=60)
    if rc != 0 or "main 1" not in out():
        fail("a 5 s library constructor (timeout 3 s): exit %d" % rc)
elif scen == "stopped-start":
    env = dict(os.environ, STOPINIT="stop", PMGUARD_RUN_CONFIRM_S="3")
    o = open(os.path.join(tmp, "out"), "w")
    p = subprocess.Popen([pmg, "run", "--", sys.argv[4]], env=env,
                         stdout=o, stderr=subprocess.STDOUT,
                         preexec_fn=os.setpgrp)
    if not stopped(p.pid, 10):
        c = child_of(p.pid)
        st = state(c) if c else "?"
        if c:
            os.kill(c, signal.SIGCONT)
        fail("PROG stopped before confirming (state %s): pmguard did "
             "not stop" % st, p)
    time.sleep(5)
    os.kill(p.pid, signal.SIGCONT)
    try:
        rc = p.wait(20)
    except subprocess.TimeoutExpired:
        fail("SIGCONT to pmguard: not resumed in 20 s", p)
    if rc != 0 or "main 1" not in out():
        fail("stopped 5 s before confirming (timeout 3 s): exit %d" % rc)
else:
    print("unknown scenario " + scen)
    sys.exit(2)
sys.exit(0)
