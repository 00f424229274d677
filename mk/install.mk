# SPDX-License-Identifier: MIT
#
# Install, uninstall, pkg-config file, man pages and their checks.
# Included by the top-level Makefile (it includes every mk/*.mk).
#
# needs: pkg-config mandoc
#   (pkg-config: install-check; mandoc: man-check, install-check.  groff,
#   man-db, binutils and a static libc (libc6-dev) come with build-essential
#   and Debian's base system.)
#
# Targets:
#   install         library (static, shared + soname and dev links), header,
#                   libpmguard.pc, the CLI, `pmguard run`'s
#                   libpmguard-run.so (in pkglibdir: not a library to link
#                   with, no soname), man pages (section 3 aliases as
#                   symlinks); runs version-check first
#   install-bins    build what install installs, nothing else (debian/rules)
#   uninstall       remove exactly what install installed (files and links;
#                   directories are left alone: they may be shared)
#   version-check   header, Makefile VERSION/SOVER, .pc and man page versions
#                   agree, SOVER == PMG_VERSION_MAJOR
#   man-check       mandoc and groff lint clean; every public function and
#                   function-like macro of include/pmguard.h has a page
#   install-check   tests/install/test-install.sh: install into a temporary
#                   DESTDIR, build and run programs against it (shared and
#                   static, via pkg-config), uninstall, nothing left
#   pc              just generate $(O)/libpmguard.pc
#
# Variables (GNU conventions; all may be set on the command line):
#   DESTDIR  staging root, prepended to every installed path (default empty)
#   prefix   /usr/local      exec_prefix  $(prefix)
#   libdir   $(exec_prefix)/lib           bindir  $(exec_prefix)/bin
#   pkglibdir $(libdir)/pmguard  (libpmguard-run.so; `pmguard run` looks
#            there relative to its own directory: the path from bindir to
#            pkglibdir is compiled into the CLI, $(O)/gen/pmg_paths.h, which
#            is rewritten, and the CLI rebuilt, when bindir or pkglibdir
#            change between `make` and `make install`)
#   includedir $(prefix)/include          mandir  $(datarootdir)/man
#   pkgconfigdir $(libdir)/pkgconfig
# The shared library is not registered with ldconfig: run `ldconfig` after
# `make install` into a directory the loader caches (e.g. /usr/local/lib).

prefix       ?= /usr/local
exec_prefix  ?= $(prefix)
libdir       ?= $(exec_prefix)/lib
bindir       ?= $(exec_prefix)/bin
includedir   ?= $(prefix)/include
datarootdir  ?= $(prefix)/share
mandir       ?= $(datarootdir)/man
pkgconfigdir ?= $(libdir)/pkgconfig
pkglibdir    ?= $(libdir)/pmguard
man1dir      ?= $(mandir)/man1
man3dir      ?= $(mandir)/man3
man7dir      ?= $(mandir)/man7
INSTALL      ?= install

PMG_PC    := $(O)/libpmguard.pc
PMG_MAN1  := $(sort $(wildcard man/*.1))
PMG_MAN3  := $(sort $(wildcard man/*.3))
PMG_MAN7  := $(sort $(wildcard man/*.7))

# The names a section-3 page documents: its NAME line (one line, names
# separated by commas, then "\-").  Each name other than the page's own
# is installed as a symlink to the page, so `man pmg_close` finds
# pmg_open.3.  Usage: $(pmg_man_names) FILE
pmg_man_names = sed -n '/^\.SH NAME/{n;s/[[:space:]]*\\-.*//;s/,/ /g;p;q;}'

# Every path install creates under $(DESTDIR), one list for install's
# checks and uninstall (the section-3 aliases are derived the same way in
# both recipes, from the pages' NAME lines).
pmg_inst_files = \
	$(libdir)/libpmguard.a \
	$(libdir)/libpmguard.so.$(VERSION) \
	$(libdir)/libpmguard.so.$(SOVER) \
	$(libdir)/libpmguard.so \
	$(includedir)/pmguard.h \
	$(pkgconfigdir)/libpmguard.pc \
	$(bindir)/pmguard \
	$(pkglibdir)/libpmguard-run.so \
	$(addprefix $(man1dir)/,$(notdir $(PMG_MAN1))) \
	$(addprefix $(man3dir)/,$(notdir $(PMG_MAN3))) \
	$(addprefix $(man7dir)/,$(notdir $(PMG_MAN7)))

.PHONY: install install-bins uninstall version-check man-check \
	install-check pc _pmg_pc_always

# ---- pkg-config file ------------------------------------------------------

# Paths under $(prefix) are written as ${prefix}/..., so that
# `pkg-config --define-prefix` can relocate an unpacked tree.
pmg_pc_rel = $(if $(filter $(prefix),$(1)),$${prefix},$(pmg_pc_sub))
pmg_pc_sub = $(patsubst $(prefix)/%,$${prefix}/%,$(1))

pc: $(PMG_PC)

# Regenerated on every run: prefix and libdir may differ from the last one.
$(PMG_PC): libpmguard.pc.in _pmg_pc_always
	@mkdir -p $(dir $@)
	@sed -e 's|@prefix@|$(prefix)|g' \
	     -e 's|@exec_prefix@|$(call pmg_pc_rel,$(exec_prefix))|g' \
	     -e 's|@libdir@|$(call pmg_pc_rel,$(libdir))|g' \
	     -e 's|@includedir@|$(call pmg_pc_rel,$(includedir))|g' \
	     -e 's|@VERSION@|$(VERSION)|g' $< > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; \
		echo "  GEN     $@"; fi

_pmg_pc_always:

# The CLI's path from bindir to pkglibdir (tools/run.c, find_lib()).
$(O)/gen/pmg_paths.h: _pmg_pc_always
	@mkdir -p $(dir $@)
	@r=$$(realpath -m --relative-to="$(bindir)" "$(pkglibdir)") && \
	printf '/* generated by mk/install.mk */\n#define PMG_RUN_LIBREL "%s"\n' \
		"$$r" > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; \
		echo "  GEN     $@"; fi

# ---- version check ---------------------------------------------------------

# Fails unless these all say the same version:
#   include/pmguard.h  PMG_VERSION_MAJOR.MINOR.PATCH and PMG_VERSION_STRING
#   Makefile           VERSION, and SOVER == PMG_VERSION_MAJOR (0.1.0 has
#                      soname libpmguard.so.0; an ABI break bumps MAJOR)
#   $(PMG_PC)          Version: (generated from libpmguard.pc.in)
#   man/*.[137]        .TH source field "pmguard VERSION"
version-check: $(PMG_PC)
	@h=include/pmguard.h; bad=0; \
	def() { sed -n "s/^#define $$1[[:space:]][[:space:]]*\"\{0,1\}\([^\"[:space:]]*\)\"\{0,1\}.*/\1/p" $$h; }; \
	maj=$$(def PMG_VERSION_MAJOR); min=$$(def PMG_VERSION_MINOR); \
	pat=$$(def PMG_VERSION_PATCH); str=$$(def PMG_VERSION_STRING); \
	pc=$$(sed -n 's/^Version:[[:space:]]*//p' $(PMG_PC)); \
	say() { echo "version-check: $$*" >&2; bad=1; }; \
	[ "$$maj.$$min.$$pat" = "$(VERSION)" ] || say "$$h PMG_VERSION_MAJOR.MINOR.PATCH is '$$maj.$$min.$$pat', Makefile VERSION is '$(VERSION)'"; \
	[ "$$str" = "$(VERSION)" ] || say "$$h PMG_VERSION_STRING is '$$str', Makefile VERSION is '$(VERSION)'"; \
	[ "$(SOVER)" = "$$maj" ] || say "Makefile SOVER is '$(SOVER)', but PMG_VERSION_MAJOR is '$$maj' (the rule: SOVER == MAJOR)"; \
	[ "$$pc" = "$(VERSION)" ] || say "$(PMG_PC) Version is '$$pc', Makefile VERSION is '$(VERSION)'"; \
	for m in $(PMG_MAN1) $(PMG_MAN3) $(PMG_MAN7); do \
		grep -q '^\.TH [^ ]* [0-9] [^ ]* "pmguard $(VERSION)"' $$m || \
			say "$$m: .TH does not say \"pmguard $(VERSION)\""; \
	done; \
	[ $$bad = 0 ] && echo "version-check: $(VERSION) (soname libpmguard.so.$(SOVER)) everywhere"

# ---- man pages -------------------------------------------------------------

man-check:
	@tests/install/check-man.sh

# ---- install / uninstall ---------------------------------------------------

install-bins: $(STATIC) $(SHARED) $(O)/pmguard $(PMG_PC) \
	$(O)/libpmguard-run.so

install: version-check install-bins
	$(INSTALL) -d $(DESTDIR)$(libdir) $(DESTDIR)$(pkgconfigdir) \
		$(DESTDIR)$(includedir) $(DESTDIR)$(bindir) \
		$(DESTDIR)$(pkglibdir) \
		$(DESTDIR)$(man1dir) $(DESTDIR)$(man3dir) $(DESTDIR)$(man7dir)
	$(INSTALL) -m 644 $(STATIC) $(DESTDIR)$(libdir)/libpmguard.a
	$(INSTALL) -m 755 $(SHARED) $(DESTDIR)$(libdir)/libpmguard.so.$(VERSION)
	ln -sf libpmguard.so.$(VERSION) $(DESTDIR)$(libdir)/libpmguard.so.$(SOVER)
	ln -sf libpmguard.so.$(SOVER) $(DESTDIR)$(libdir)/libpmguard.so
	$(INSTALL) -m 644 include/pmguard.h $(DESTDIR)$(includedir)/pmguard.h
	$(INSTALL) -m 644 $(PMG_PC) $(DESTDIR)$(pkgconfigdir)/libpmguard.pc
	$(INSTALL) -m 755 $(O)/pmguard $(DESTDIR)$(bindir)/pmguard
	$(INSTALL) -m 755 $(O)/libpmguard-run.so $(DESTDIR)$(pkglibdir)/libpmguard-run.so
	$(INSTALL) -m 644 $(PMG_MAN1) $(DESTDIR)$(man1dir)
	$(INSTALL) -m 644 $(PMG_MAN3) $(DESTDIR)$(man3dir)
	$(INSTALL) -m 644 $(PMG_MAN7) $(DESTDIR)$(man7dir)
	@for p in $(PMG_MAN3); do \
		page=$${p##*/}; \
		for n in $$($(pmg_man_names) $$p); do \
			[ -f man/$$n.3 ] && continue; \
			echo "ln -sf $$page $(DESTDIR)$(man3dir)/$$n.3"; \
			ln -sf $$page $(DESTDIR)$(man3dir)/$$n.3 || exit 1; \
		done; \
	done

uninstall:
	@for p in $(PMG_MAN3); do \
		page=$${p##*/}; \
		for n in $$($(pmg_man_names) $$p); do \
			[ -f man/$$n.3 ] && continue; \
			echo "rm -f $(DESTDIR)$(man3dir)/$$n.3"; \
			rm -f $(DESTDIR)$(man3dir)/$$n.3 || exit 1; \
		done; \
	done
	rm -f $(addprefix $(DESTDIR),$(pmg_inst_files))

# ---- tests -----------------------------------------------------------------

install-check: lib cli
	@MAKE="$(MAKE)" O="$(O)" CC="$(CC)" tests/install/test-install.sh
