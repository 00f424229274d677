// SPDX-License-Identifier: MIT
/*
 * cxx-scope - pmguard from C++: the header is plain C inside extern "C",
 * its window functions are inline, and PMG_WRITE_SCOPE (the GNU cleanup
 * attribute) closes its window when the block ends, also when an exception
 * leaves the block.
 *
 * Each check watches for faults the way the test suite does: audit mode
 * lets a stray write through once and an observer counts it.
 *
 * Build: c++ -std=c++11 -Iinclude examples/cxx-scope.cc libpmguard.a \
 *        -Wl,--wrap=pthread_create -lpthread -ldl
 */
#include <pmguard.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <sys/mman.h>

namespace {

volatile int faults;	// stray writes seen by the observer (in the handler)

void count(const struct pmg_fault_info *fi, void *)
{
	if (fi->action != PMG_FAULT_SYNCED)
		faults++;
}

int n_checks, n_failed;

void check(bool ok, const char *what)
{
	std::printf("%s %d - %s\n", ok ? "ok" : "not ok", ++n_checks, what);
	if (!ok)
		n_failed++;
}

// One write to @p; true if it faulted.
bool write_faults(volatile char *p)
{
	int before = faults;

	*p = 1;
	return faults != before;
}

void scoped_write(struct pmg_domain *d, volatile char *p)
{
	PMG_WRITE_SCOPE(d);
	*p = 2;
}

void scoped_throw(struct pmg_domain *d, volatile char *p)
{
	PMG_WRITE_SCOPE(d);
	*p = 3;
	throw std::runtime_error("leaving the scope by an exception");
}

} // namespace

int main()
{
	struct pmg_domain *d = nullptr;
	const size_t len = 4096;
	void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile char *p = static_cast<volatile char *>(m);

	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	if (m == MAP_FAILED || pmg_domain_new(&d, "cxx", 0) ||
	    pmg_protect(d, m, len)) {
		std::printf("Bail out! setup: %s\n", pmg_errormsg());
		return 1;
	}
	pmg_set_report_fd(-1);
	pmg_set_fault_observer(count, nullptr);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	std::printf("1..6\n# backend: %s\n", pmg_backend_name(pmg_backend()));

	check(write_faults(p), "a write outside any window faults");

	pmg_write_begin(d);
	bool in = write_faults(p);
	pmg_write_end(d);
	check(!in && write_faults(p),
	      "pmg_write_begin/end: no fault inside, fault after");

	int f = faults;
	scoped_write(d, p);
	check(faults == f && write_faults(p),
	      "PMG_WRITE_SCOPE: no fault inside, window closed at the end");

	f = faults;
	try {
		scoped_throw(d, p);
	} catch (const std::exception &) {
	}
	check(faults == f && write_faults(p),
	      "PMG_WRITE_SCOPE: window closed when an exception leaves it");

	f = faults;
	PMG_WITH_WRITE(d) {
		*p = 4;
	}
	check(faults == f && write_faults(p), "PMG_WITH_WRITE block");

	check(pmg_open(d, PMG_READ) == 0 && pmg_close(d, PMG_READ) == 0 &&
	      pmg_close(d, PMG_WRITE) == -EPERM,
	      "pmg_open/pmg_close kinds; unbalanced close is -EPERM");

	pmg_set_fault_mode(PMG_FAULT_RELAXED);
	pmg_set_fault_observer(nullptr, nullptr);
	pmg_unprotect(m, len);
	pmg_domain_delete(&d);
	munmap(m, len);
	return n_failed ? 1 : 0;
}
