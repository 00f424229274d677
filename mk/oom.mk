# SPDX-License-Identifier: MIT
#
# tests/test-oom: allocation-failure injection.  It is built as every
# tests/test-*.c is (linked with the static library), plus --wrap of the
# allocation calls, so that tests/failinject.h sees each one the library
# makes.  Test-only: the shipped libraries have no injection hook.

OOM_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup \
	    -Wl,--wrap=free,--wrap=mmap,--wrap=munmap

$(O)/tests/test-oom: WRAP += $(OOM_WRAP)
