// SPDX-License-Identifier: GPL-2.0
//
// windows.cocci - a PKS window opened in a function must be closed on
// every path out of it (linux/scripts/linux-audit runs it with spatch
// over every .c file the series patches).
//
// A window is a per-thread grant of access to protected device memory:
// __pgmap_mk_readwrite(), pgmap_mk_readwrite(), dax_mk_readwrite(),
// pmem's __pmem_mk_readwrite() and pks_mk_readwrite() open one, their
// *_mk_noaccess() twins close it.  A path that leaves the function with
// a window open -- a return on an error path, a goto past the close, a
// continue in a loop -- leaves the thread with pmem writable until some
// later close happens to balance it (relaxed mode) or until the leak
// check at the return to user mode reports it (docs/linux.md, "Leak
// detection"): at the next kthread work item or at task exit for a
// kernel thread, which may be never.
//
// "when strict": every path counts, error paths included (without it
// Coccinelle lets a path end in an error return unmatched).  Opens are
// paired with closes of the same expression.  A function may leave a
// window open on purpose (an open operation itself, a test hook):
// linux/VER/audit gives each report a verdict.

// every path from the open reaches a close of the same expression
@balanced@
position p1;
expression E;
identifier open = {__pgmap_mk_readwrite, pgmap_mk_readwrite, dax_mk_readwrite,
                   __pmem_mk_readwrite, pks_mk_readwrite};
identifier close = {__pgmap_mk_noaccess, pgmap_mk_noaccess, dax_mk_noaccess,
                    __pmem_mk_noaccess, pks_mk_noaccess};
@@
open@p1(E);
... when strict
close(E);

// the same condition around both: if (C) open(E); ... if (C) close(E);
@balanced_if@
position p1;
expression E, C;
identifier open = {__pgmap_mk_readwrite, pgmap_mk_readwrite, dax_mk_readwrite,
                   __pmem_mk_readwrite, pks_mk_readwrite};
identifier close = {__pgmap_mk_noaccess, pgmap_mk_noaccess, dax_mk_noaccess,
                    __pmem_mk_noaccess, pks_mk_noaccess};
@@
if (C)
  open@p1(E);
... when strict
if (C)
  close(E);

@unbalanced@
position p1 != {balanced.p1, balanced_if.p1};
expression E;
identifier fn;
identifier open = {__pgmap_mk_readwrite, pgmap_mk_readwrite, dax_mk_readwrite,
                   __pmem_mk_readwrite, pks_mk_readwrite};
@@
fn(...) {
<+...
open@p1(E);
...+>
}

@script:python@
p1 << unbalanced.p1;
fn << unbalanced.fn;
@@
print("%s:%s: %s: a path from this open leaves the function without its close" % (p1[0].file, p1[0].line, fn))
