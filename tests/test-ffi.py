#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test-ffi.py - the window edges out of line (src/ffi.c), called from
Python ctypes as any language without inline C calls them.  TAP.

Loads libpmguard.so ($PMGUARD_LIB, else $O/libpmguard.so with O=build),
on the backend the environment picks (the host suite: mprotect; the PKU
guest: guest/vm-ffi-check), and checks:
  - pmg_open, pmg_close, pmg_write_begin, pmg_write_end are exported
    under PMGUARD_0.3 (dlvsym);
  - a write inside pmg_write_begin/end and inside pmg_open/close lands;
  - a stray write outside a window faults: audit mode, seen by a fault
    observer (address, si_code, key, access) and the report; strict mode
    in a child process: SIGABRT, the report names the address, and the
    shared page holds what it held;
  - PMG_READ windows on a PMG_DOMAIN_NOACCESS domain; nested windows;
  - on PKU the window is the calling thread's only (another thread's
    write faults); on mprotect it is process-wide;
  - bad input: NULL, a copy of the handle, a bad kind (-EINVAL, with the
    message), an unbalanced close (-EPERM, reported);
  - the "Other languages" example of docs/api.md ($PMGUARD_API_MD, else
    docs/api.md beside this file), run as written.
"""
import errno
import mmap
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading

sys.stdout.reconfigure(line_buffering=True)

here = os.path.dirname(os.path.abspath(__file__))
build = os.environ.get("O", "build")
if not os.path.isabs(build):
    build = os.path.join(here, "..", build)
libpath = os.environ.get("PMGUARD_LIB", os.path.join(build, "libpmguard.so"))
api_md = os.environ.get("PMGUARD_API_MD",
                        os.path.join(here, "..", "docs", "api.md"))

PLAN = 15
n = 0
failed = 0


def ok(cond, name, diag=None):
    global n, failed
    n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, name))
    if not cond:
        failed += 1
        if diag:
            for line in str(diag).splitlines():
                print("#   " + line)
    return cond


def skip(name, why):
    global n
    n += 1
    print("ok %d - %s # SKIP %s" % (n, name, why))


EDGES = ("pmg_open", "pmg_close", "pmg_write_begin", "pmg_write_end")
PMG_READ, PMG_WRITE = 0, 1
PMG_DOMAIN_NOACCESS = 1
PMG_BACKEND_PKU, PMG_BACKEND_MPROTECT = 1, 2
PMG_FAULT_STRICT, PMG_FAULT_AUDIT = 0, 2
PMG_FAULT_AUDITED = 5
SEGV_ACCERR, SEGV_PKUERR = 2, 4

try:
    # ctypes needs _ctypes and libffi: a Python built without them cannot
    # run anything here
    import ctypes
except ImportError as e:
    print("1..0 # SKIP this Python has no ctypes: %s" % e)
    sys.exit(77)
try:
    libc = ctypes.CDLL(None, use_errno=True)
    pmg = ctypes.CDLL(libpath, use_errno=True)
except OSError as e:
    print("Bail out! cannot load %s: %s" % (libpath, e))
    sys.exit(1)

vp = ctypes.c_void_p


class FaultInfo(ctypes.Structure):
    """struct pmg_fault_info (include/pmguard.h, 56 bytes on x86-64)"""
    _fields_ = [("addr", vp), ("ip", vp), ("domain", vp), ("key", ctypes.c_int),
                ("access", ctypes.c_int), ("pkru", ctypes.c_uint32),
                ("tid", ctypes.c_int), ("mode", ctypes.c_int),
                ("action", ctypes.c_int), ("si_code", ctypes.c_int)]


OBSERVER = ctypes.CFUNCTYPE(None, ctypes.POINTER(FaultInfo), vp)

libc.dlvsym.restype = vp
libc.dlvsym.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p]
libc.dlsym.restype = vp
libc.dlsym.argtypes = [vp, ctypes.c_char_p]

print("1..%d" % PLAN)

# 1. the edges are the library's, under their own version node
missing = []
for f in EDGES:
    a = libc.dlvsym(pmg._handle, f.encode(), b"PMGUARD_0.3")
    if not a or a != libc.dlsym(pmg._handle, f.encode()):
        missing.append(f)
if not ok(not missing, "%s exported under PMGUARD_0.3" % ", ".join(EDGES),
          "missing or another version: %s" % missing):
    print("Bail out! %s cannot be called from ctypes" % ", ".join(missing))
    sys.exit(1)

for f in EDGES:
    getattr(pmg, f).restype = ctypes.c_int
pmg.pmg_open.argtypes = [vp, ctypes.c_int]
pmg.pmg_close.argtypes = [vp, ctypes.c_int]
pmg.pmg_write_begin.argtypes = [vp]
pmg.pmg_write_end.argtypes = [vp]
pmg.pmg_domain_new.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p,
                               ctypes.c_uint]
pmg.pmg_domain_key.argtypes = [vp]
pmg.pmg_protect.argtypes = [vp, vp, ctypes.c_size_t]
pmg.pmg_unprotect.argtypes = [vp, ctypes.c_size_t]
pmg.pmg_errormsg.restype = ctypes.c_char_p
pmg.pmg_set_fault_observer.argtypes = [OBSERVER, vp]


rc = pmg.pmg_init()
if rc != 0:
    print("Bail out! pmg_init: %d %s" % (rc, pmg.pmg_errormsg()))
    sys.exit(1)
backend = pmg.pmg_backend()
print("# backend: %s" % {1: "pku", 2: "mprotect"}.get(backend, backend))

report = tempfile.TemporaryFile(mode="w+b")
pmg.pmg_set_report_fd(report.fileno())


def report_text():
    report.seek(0)
    return report.read().decode(errors="replace")


faults = []


@OBSERVER
def observer(fi, arg):
    # A Python observer is not AS-safe in general.  Here every stray
    # access below is made by a ctypes call (memset, memmove) that has
    # released the GIL, in a thread that holds no lock of the interpreter,
    # so taking the GIL in the SIGSEGV handler is what any ctypes callback
    # from a C thread does.  Only the fields are kept.
    f = fi.contents
    faults.append((f.addr, f.si_code, f.key, f.access, f.action, f.tid))


pmg.pmg_set_fault_observer(observer, None)


def new_domain(name, flags=0):
    d = vp()
    rc = pmg.pmg_domain_new(ctypes.byref(d), name.encode(), flags)
    if rc:
        print("Bail out! pmg_domain_new(%s): %d %s"
              % (name, rc, pmg.pmg_errormsg()))
        sys.exit(1)
    return d


# MAP_SHARED (Python's default for anonymous maps): a fork child's writes
# would show in this process
page = mmap.mmap(-1, mmap.PAGESIZE)
base = ctypes.addressof(ctypes.c_char.from_buffer(page))
page[0:8] = b"original"
d = new_domain("ffi")
rc = pmg.pmg_protect(d, base, mmap.PAGESIZE)
if rc:
    print("Bail out! pmg_protect: %d %s" % (rc, pmg.pmg_errormsg()))
    sys.exit(1)
key = pmg.pmg_domain_key(d)
want_code = SEGV_PKUERR if backend == PMG_BACKEND_PKU else SEGV_ACCERR


def stray_write(addr, byte):
    """A one-byte store at addr by memset (a ctypes call: GIL released)."""
    del faults[:]
    ctypes.memset(addr, byte, 1)
    return [f for f in faults if f[4] == PMG_FAULT_AUDITED]


# 2, 3. writes inside windows land, and fault nothing
pmg.pmg_set_fault_mode(PMG_FAULT_AUDIT)
del faults[:]
rc1 = pmg.pmg_write_begin(d)
ctypes.memmove(base + 16, b"inside begin/end", 16)
rc2 = pmg.pmg_write_end(d)
got = ctypes.string_at(base + 16, 16)
audited = [f for f in faults if f[4] == PMG_FAULT_AUDITED]
ok(rc1 == 0 and rc2 == 0 and got == b"inside begin/end" and not audited,
   "a write inside pmg_write_begin/end lands, no stray access",
   "rc %d %d, data %r, audited %r" % (rc1, rc2, got, audited))

del faults[:]
rc1 = pmg.pmg_open(d, PMG_WRITE)
ctypes.memmove(base + 32, b"inside open/close", 17)
rc2 = pmg.pmg_close(d, PMG_WRITE)
got = ctypes.string_at(base + 32, 17)
audited = [f for f in faults if f[4] == PMG_FAULT_AUDITED]
ok(rc1 == 0 and rc2 == 0 and got == b"inside open/close" and not audited,
   "a write inside pmg_open/close(PMG_WRITE) lands, no stray access",
   "rc %d %d, data %r, audited %r" % (rc1, rc2, got, audited))

# 4. after the close, a write is a stray one: the observer's fields
addr = base + 100
seen = stray_write(addr, 0x41)
good = (len(seen) == 1 and seen[0][0] == addr and seen[0][1] == want_code
        and seen[0][2] == key and seen[0][3] == PMG_WRITE)
ok(good, "a write after pmg_write_end faults: address, si_code %d, key %d, "
   "write" % (want_code, key), "observed %r, want addr 0x%x" % (seen, addr))

# 5. and the report names it
text = report_text()
ok(re.search(r"audit: stray write to 0x%x in domain 'ffi' \(key %d\)"
             % (addr, key), text) is not None,
   "the audit report names the address, the domain and the key", text)

# 6. nested windows: the inner close keeps the window, the outer closes it
rc = [pmg.pmg_write_begin(d), pmg.pmg_write_begin(d)]
rc.append(pmg.pmg_write_end(d))
inner = stray_write(base + 200, 0x42)
rc.append(pmg.pmg_write_end(d))
outer = stray_write(base + 201, 0x43)
ok(rc == [0, 0, 0, 0] and not inner and len(outer) == 1
   and outer[0][0] == base + 201,
   "nested windows: open after the inner close, closed after the outer",
   "rc %r, inner %r, outer %r" % (rc, inner, outer))

# 7. strict mode: a fork child's stray write aborts it; the page is intact
report.seek(0)
report.truncate()
before = page[:]
target = base + 300
pid = os.fork()
if pid == 0:
    try:
        # no core file from the abort (RLIMIT_CORE = 4: 0, 0)
        libc.setrlimit(4, ctypes.byref((ctypes.c_ulong * 2)(0, 0)))
        pmg.pmg_set_fault_observer(OBSERVER(), None)
        pmg.pmg_set_fault_mode(PMG_FAULT_STRICT)
        ctypes.memset(target, 0x58, 1)
    finally:
        os._exit(3)  # the write went through: not aborted
_, status = os.waitpid(pid, 0)
text = report_text()
died = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGABRT
named = re.search(r"strict \(aborting\): stray write to 0x%x in domain 'ffi'"
                  % target, text) is not None
ok(died and named and page[:] == before,
   "strict: a child's stray write dies by SIGABRT, the report names 0x%x, "
   "the shared page is unchanged" % target,
   "status 0x%x, page changed: %s, report:\n%s"
   % (status, page[:] != before, text))

# 8. PMG_READ windows on a no-access domain
rpage = mmap.mmap(-1, mmap.PAGESIZE)
rbase = ctypes.addressof(ctypes.c_char.from_buffer(rpage))
rpage[0:4] = b"read"
rd = new_domain("ffi-noaccess", PMG_DOMAIN_NOACCESS)
rc = [pmg.pmg_protect(rd, rbase, mmap.PAGESIZE)]
buf = ctypes.create_string_buffer(4)
del faults[:]
rc.append(pmg.pmg_open(rd, PMG_READ))
ctypes.memmove(buf, rbase, 4)
rc.append(pmg.pmg_close(rd, PMG_READ))
inside = [f for f in faults if f[4] == PMG_FAULT_AUDITED]
got = buf.raw
del faults[:]
ctypes.memmove(buf, rbase + 8, 1)
outside = [f for f in faults if f[4] == PMG_FAULT_AUDITED]
ok(rc == [0, 0, 0] and got == b"read" and not inside and len(outside) == 1
   and outside[0][0] == rbase + 8 and outside[0][3] == PMG_READ,
   "PMG_READ window on a no-access domain: the read inside is silent, "
   "the read after faults",
   "rc %r, data %r, inside %r, outside %r" % (rc, got, inside, outside))
pmg.pmg_unprotect(rbase, mmap.PAGESIZE)

# 9. another thread, created before the window, writes while this one
# holds it: PKU faults (the window is this thread's), mprotect does not
# (process-wide)
go = threading.Event()
done = threading.Event()
other = []


def writer():
    go.wait()
    other.extend(stray_write(base + 400, 0x44))
    done.set()


t = threading.Thread(target=writer)
t.start()
rc1 = pmg.pmg_write_begin(d)
go.set()
done.wait(30)
rc2 = pmg.pmg_write_end(d)
t.join()
if backend == PMG_BACKEND_PKU:
    ok(rc1 == 0 and rc2 == 0 and len(other) == 1
       and other[0][0] == base + 400 and other[0][1] == SEGV_PKUERR,
       "PKU: another thread's write during this thread's window faults",
       "rc %d %d, observed %r" % (rc1, rc2, other))
else:
    ok(rc1 == 0 and rc2 == 0 and not other,
       "mprotect: the window is process-wide: another thread's write lands",
       "rc %d %d, observed %r" % (rc1, rc2, other))

# 10-12. bad input: -EINVAL with the message, nothing opened
rc = pmg.pmg_open(None, PMG_WRITE)
msg = pmg.pmg_errormsg().decode()
ok(rc == -errno.EINVAL and "NULL domain" in msg,
   "pmg_open(NULL): -EINVAL, 'NULL domain'", "rc %d, %r" % (rc, msg))
copy = ctypes.create_string_buffer(ctypes.string_at(d, 64), 64)
rc = [pmg.pmg_write_begin(copy), pmg.pmg_open(d, 2)]
msg = pmg.pmg_errormsg().decode()
after = stray_write(base + 500, 0x45)
ok(rc == [-errno.EINVAL, -errno.EINVAL] and "PMG_READ or PMG_WRITE" in msg
   and len(after) == 1,
   "a copy of the handle and window kind 2: -EINVAL, no window opened",
   "rc %r, %r, observed after %r" % (rc, msg, after))
report.seek(0)
report.truncate()
rc = pmg.pmg_write_end(d)
text = report_text()
ok(rc == -errno.EPERM and "unbalanced write window close on domain 'ffi'"
   in text, "an unbalanced pmg_write_end: -EPERM, reported", text)

# 13. the data written inside the windows is all still there
want = {16: b"inside begin/end", 32: b"inside open/close"}
bad = {o: ctypes.string_at(base + o, len(w)) for o, w in want.items()
       if ctypes.string_at(base + o, len(w)) != w}
ok(not bad and page[0:8] == b"original", "the page holds what was written "
   "inside the windows", "differs: %r" % bad)

pmg.pmg_set_fault_mode(PMG_FAULT_STRICT)
pmg.pmg_set_fault_observer(OBSERVER(), None)
pmg.pmg_unprotect(base, mmap.PAGESIZE)

# 14, 15. the docs' example, exactly as docs/api.md has it
try:
    with open(api_md) as f:
        md = f.read()
    sec = md.split("\n## Other languages\n", 1)[1].split("\n## ", 1)[0]
    example = re.search(r"```python\n(.*?)```", sec, re.S).group(1)
except (OSError, IndexError, AttributeError) as e:
    example = None
    ok(False, "docs/api.md has an 'Other languages' section with a python "
       "example", e)
if example is not None:
    ok(True, "docs/api.md has an 'Other languages' section with a python "
       "example")
    env = dict(os.environ)
    libdir = os.path.dirname(os.path.abspath(libpath))
    env["LD_LIBRARY_PATH"] = libdir + ":" + env.get("LD_LIBRARY_PATH", "")
    p = subprocess.run([sys.executable, "-c", example], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    out = p.stdout.decode(errors="replace")
    # the example ends by printing what it read back
    ok(p.returncode == 0 and "hello" in out,
       "the docs' example runs as written (libpmguard.so.0 from %s)" % libdir,
       "exit %d, output:\n%s" % (p.returncode, out))
else:
    skip("the docs' example runs as written", "no example found")

sys.exit(1 if failed or n != PLAN else 0)
