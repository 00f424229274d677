#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test-systemd.py BUILD_DIR - the systemd examples (examples/systemd/) run
as systemd would run them, without systemd (make examples-check; TAP).

`make install DESTDIR=ROOT prefix=/usr` stages an install; the daemon of
example-lmdb.service (tests/examples/lmdb-daemon) is put at the path the
unit names.  For the unit with each drop-in (pmguard-run.conf,
pmguard-preload.conf), the service's ExecStart= and Environment= are worked
out as systemd does (an empty ExecStart= clears the list; Environment=
assignments accumulate, later ones win; quoting as systemd's, a %-specifier
or $-variable is refused), every absolute path in them is moved under ROOT
(and the paths the unit's *Directory= settings create are made there), and
the command is started with only that environment, in a process group of
its own, and stopped as systemd stops a service (SIGTERM to the group).
Checks, for each drop-in: the files it names exist in the staged install
(the LD_PRELOAD path is where `make install` puts the library); the
daemon runs, is protected by the staged libpmguard-run.so (the report's
module lines) and reports no stray write; stopped, it exits 0 and its
database is intact.  Then with the wild-write injector
(tests/run/wild.c) preloaded as a unit's Environment=LD_PRELOAD= would:
under pmguard-run.conf (strict) the daemon is aborted at the wild write
and the committed records are intact; under pmguard-preload.conf
(contain) the write is undone, the daemon runs on and stops cleanly with
every record intact.  The control: the unit alone with the injector
(no pmguard) corrupts the database, so the checks above can fail.
"""
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

O = sys.argv[1] if len(sys.argv) > 1 else "build"
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EX = os.path.join(TOP, "examples", "systemd")
UNIT = "example-lmdb.service"
n = 0
failed = 0


def ok(cond, name, diag=""):
    global n, failed
    n += 1
    if cond:
        print(f"ok {n} - {name}")
    else:
        failed += 1
        print(f"not ok {n} - {name}")
        for line in str(diag).splitlines()[-30:]:
            print(f"# {line}")
    sys.stdout.flush()
    return cond


def finish(code=None):
    print(f"1..{n}")
    sys.exit(code if code is not None else (1 if failed else 0))


def parse(paths):
    """ExecStart= argv and Environment= dict of the [Service] sections of
    the files, in order, with systemd's list semantics."""
    execs, env, dirs = [], {}, []
    for p in paths:
        section = None
        cont = ""
        for raw in open(p):
            line = raw.rstrip("\n")
            if cont:
                line, cont = cont + line, ""
            if line.endswith("\\"):
                cont = line[:-1] + " "
                continue
            s = line.strip()
            if not s or s[0] in "#;":
                continue
            if s.startswith("["):
                section = s
                continue
            if section != "[Service]":
                continue
            key, _, val = s.partition("=")
            key, val = key.strip(), val.strip()
            if "%" in val.replace("%%", "") or "$" in val:
                raise ValueError(f"{p}: {key}= uses a specifier or variable "
                                 f"this test does not expand: {val}")
            val = val.replace("%%", "%")
            if key == "ExecStart":
                if val:
                    execs.append(shlex.split(val))
                else:
                    execs = []
            elif key == "Environment":
                for a in shlex.split(val):
                    k, _, v = a.partition("=")
                    env[k] = v
            elif key in ("StateDirectory", "LogsDirectory",
                         "RuntimeDirectory", "CacheDirectory"):
                base = {"StateDirectory": "/var/lib",
                        "LogsDirectory": "/var/log",
                        "RuntimeDirectory": "/run",
                        "CacheDirectory": "/var/cache"}[key]
                dirs += [os.path.join(base, d) for d in val.split()]
    return execs, env, dirs


def under(root, word):
    """word with each absolute path in it (a whole word, or after '=' or
    ':' or a blank, as in LD_PRELOAD lists) moved under root"""
    return re.sub(r"(^|[=: ])(/(?:usr|var|etc|run)/)",
                  lambda m: m.group(1) + root + m.group(2), word)


def main():
    print("TAP version 13")
    tmp = tempfile.mkdtemp(prefix="pmguard-systemd.")
    try:
        run_tests(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


def run_tests(tmp):
    root = os.path.join(tmp, "root")
    daemon = os.path.join(O, "tests", "examples", "lmdb-daemon")
    wild = os.path.abspath(os.path.join(O, "tests", "run", "libwild.so"))
    make = os.environ.get("MAKE", "make")
    r = subprocess.run([make, "--no-print-directory", "install",
                        "DESTDIR=" + root, "prefix=/usr", "O=" + O],
                       cwd=TOP, capture_output=True, text=True)
    if not ok(r.returncode == 0, "make install DESTDIR=ROOT prefix=/usr",
              r.stdout + r.stderr):
        finish()
    base_exec, base_env, base_dirs = parse([os.path.join(EX, UNIT)])
    # the unit's daemon, where the unit says it is
    dpath = base_exec[-1][0]
    os.makedirs(os.path.dirname(root + dpath), exist_ok=True)
    shutil.copy(daemon, root + dpath)

    for dropin, mode in (("pmguard-run.conf", "strict"),
                         ("pmguard-preload.conf", "contain"),
                         (None, None)):
        if dropin is None:
            # the control: the unit as it is, the injector, no pmguard
            cmd = [under(root, a) for a in base_exec[-1]]
            for d in base_dirs:
                shutil.rmtree(root + d, ignore_errors=True)
                os.makedirs(root + d)
            e = {k: under(root, v) for k, v in base_env.items()}
            e.update(PATH="/usr/sbin:/usr/bin:/sbin:/bin", WILD_AFTER="20",
                     LD_PRELOAD=wild)
            one(UNIT, None, cmd, e, os.path.join(tmp, "none"),
                root, True, tmp)
            continue
        try:
            execs, env, dirs = parse([os.path.join(EX, UNIT),
                                      os.path.join(EX, dropin)])
        except ValueError as e:
            ok(False, f"{dropin}: parsed", e)
            continue
        argv = execs[-1] if len(execs) == 1 else None
        if not ok(argv is not None,
                  f"{dropin}: one ExecStart= command with the unit",
                  f"ExecStart= commands: {execs}"):
            continue
        print(f"# {dropin}: ExecStart={shlex.join(argv)}")
        for k, v in env.items():
            print(f"# {dropin}: Environment={k}={v}")
        named = ([a for a in argv[:1] if a != dpath] +
                 [v for k, v in env.items() if k == "LD_PRELOAD"])
        missing = [p for p in named if not os.path.exists(root + p)]
        ok(not missing, f"{dropin}: {', '.join(named)} installed there "
           f"by make install prefix=/usr", f"not in the staged install: "
           f"{missing}")
        # the report file the drop-in names
        rep = ([a for a in argv if a.startswith("/var/log/")] +
               [v for k, v in env.items() if k == "PMGUARD_RUN_REPORT"])
        if not ok(len(rep) == 1, f"{dropin}: names one report file", rep):
            continue
        rep = root + rep[0]
        for wild_on in (False, True):
            for d in dirs:
                shutil.rmtree(root + d, ignore_errors=True)
                os.makedirs(root + d)
            e = {k: under(root, v) for k, v in env.items()}
            e["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
            if wild_on:
                # as a unit's Environment=LD_PRELOAD= would, before ours
                e["LD_PRELOAD"] = (wild + " " + e.get("LD_PRELOAD", "")).strip()
                e["WILD_AFTER"] = "20"
            cmd = [under(root, a) for a in argv]
            one(dropin, mode, cmd, e, rep, root, wild_on, tmp)


def one(dropin, mode, cmd, env, rep, root, wild_on, tmp):
    what = f"{dropin}{' + wild write' if wild_on and mode else ''}"
    out = os.path.join(tmp, "out")
    dbdir = cmd[-1]
    with open(out, "w") as f:
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                             stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True, cwd=tmp,
                             preexec_fn=lambda: resource.setrlimit(
                                 resource.RLIMIT_CORE, (0, 0)))
    t0 = time.time()
    text = ""

    def log():
        return open(out).read()

    # ready, then 60 records' worth of time (the wild write comes after
    # the 20th commit), or an early exit
    while time.time() - t0 < 30 and p.poll() is None:
        text = log()
        if "ready" in text:
            break
        time.sleep(0.05)
    if p.poll() is None and "ready" in text:
        time.sleep(1.0)
    early = p.poll()
    if early is None:
        # systemctl stop: SIGTERM to every process of the service
        os.killpg(p.pid, signal.SIGTERM)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
    else:
        rc = early
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    text = log()
    report = open(rep).read() if os.path.exists(rep) else "(no report file)"
    diag = f"exit {rc}\n{text}\n--- report\n{report}"
    ver = subprocess.run([root + "/usr/local/bin/lmdb-daemon", "verify",
                          dbdir, "1"], capture_output=True, text=True)
    intact = ver.returncode == 0
    diag += "\n--- verify\n" + ver.stdout + ver.stderr
    staged = re.search(r"^pmguard: module \S+ \S+ " +
                       re.escape(root + "/usr/lib/pmguard/libpmguard-run.so")
                       + "$", report, re.M) is not None
    stray = "stray write" in report
    if mode is None:
        ok(not intact, f"{what} + wild write, no pmguard (the control): the database "
           f"is corrupted", diag)
    elif not wild_on:
        ok(early is None and rc == 0 and "stopped after" in text,
           f"{what}: starts, runs, stops on SIGTERM with exit 0", diag)
        ok(staged and not stray,
           f"{what}: the staged libpmguard-run.so protects it, no stray "
           f"write reported", diag)
        ok(intact, f"{what}: its database is intact", diag)
    elif mode == "strict":
        ok(rc == -signal.SIGABRT and
           "strict (aborting): stray write" in report,
           f"{what}: strict aborts the daemon at the wild write "
           f"(the service fails, Restart= restarts it)", diag)
        ok(intact, f"{what}: the committed records are intact", diag)
    else:
        c = report.count("contain: stray write by")
        ok(early is None and rc == 0 and c >= 1 and
           "stopped after" in text,
           f"{what}: contain undoes it ({c} contained), the daemon runs on "
           f"and stops with exit 0", diag)
        ok(intact, f"{what}: every record intact", diag)


if __name__ == "__main__":
    main()
