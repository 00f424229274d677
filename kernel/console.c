// SPDX-License-Identifier: MIT
/*
 * Serial console on COM1 and a small printf.
 *
 * The test output is TAP, so every kernel log line (printk) goes out as a
 * TAP diagnostic ("# " prefix) and only the test runner writes raw TAP
 * lines (tap_printf).  The raw serial log is therefore a valid TAP stream
 * even when a fault report or an oops lands in the middle of it.
 */
#include "../core/pmg_core.h"
#include "kernel.h"
#include "x86.h"

#define COM1 0x3f8

static spinlock_t console_lock;
static bool console_busted;
static bool at_line_start = true;

void console_init(void)
{
	outb(COM1 + 1, 0x00);	/* no interrupts: we poll */
	outb(COM1 + 3, 0x80);	/* DLAB */
	outb(COM1 + 0, 0x01);	/* 115200 baud */
	outb(COM1 + 1, 0x00);
	outb(COM1 + 3, 0x03);	/* 8N1 */
	outb(COM1 + 2, 0xc7);	/* FIFO on, cleared */
	outb(COM1 + 4, 0x03);
}

static void serial_putc(char ch)
{
	while (!(inb(COM1 + 5) & 0x20))
		cpu_relax();
	outb(COM1, (u8)ch);
}

static void console_write(const char *s, size_t n, bool diag)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (at_line_start && diag) {
			serial_putc('#');
			serial_putc(' ');
		}
		if (s[i] == '\n')
			serial_putc('\r');
		serial_putc(s[i]);
		at_line_start = s[i] == '\n';
	}
}

/* An oops must get its report out even if the console lock is held. */
void console_bust_locks(void)
{
	console_busted = true;
}

static void console_emit(const char *buf, int len, bool diag)
{
	unsigned long flags = local_irq_save();

	if (!console_busted)
		spin_lock(&console_lock);
	/* A raw TAP line must start a line of its own. */
	if (!diag && !at_line_start)
		console_write("\n", 1, false);
	console_write(buf, (size_t)len, diag);
	if (!console_busted)
		spin_unlock(&console_lock);
	local_irq_restore(flags);
}

/* Format into a line buffer and emit it: a diagnostic or a raw TAP line. */
static __printf(2, 0) void console_vprintf(bool diag, const char *fmt,
					   va_list ap)
{
	char buf[512];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);

	console_emit(buf, min(n, (int)sizeof(buf) - 1), diag);
}

void printk(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	console_vprintf(true, fmt, ap);
	va_end(ap);
}

void tap_printf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	console_vprintf(false, fmt, ap);
	va_end(ap);
}

/* ---- vsnprintf: %[-0][width][l|ll|z](d|i|u|x|X|p|s|c|%) ---- */

struct outbuf {
	char *buf;
	size_t size;
	size_t len;
};

static void out_c(struct outbuf *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static void out_pad(struct outbuf *o, const char *s, size_t n, int width,
		    bool left, char pad)
{
	int fill = width > (int)n ? width - (int)n : 0;
	size_t i;

	if (!left)
		while (fill-- > 0)
			out_c(o, pad);
	for (i = 0; i < n; i++)
		out_c(o, s[i]);
	if (left)
		while (fill-- > 0)
			out_c(o, ' ');
}

int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct outbuf o = { buf, size, 0 };
	char num[32];

	for (; *fmt; fmt++) {
		bool left = false, neg = false;
		char pad = ' ';
		int width = 0, lng = 0;
		unsigned long long v;
		const char *s;
		size_t n;

		if (*fmt != '%') {
			out_c(&o, *fmt);
			continue;
		}
		fmt++;
		for (;; fmt++) {
			if (*fmt == '-')
				left = true;
			else if (*fmt == '0')
				pad = '0';
			else
				break;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l' || *fmt == 'z') {
			lng++;
			fmt++;
		}
		switch (*fmt) {
		case 'd':
		case 'i': {
			long long sv = lng ? va_arg(ap, long long)
					   : va_arg(ap, int);

			neg = sv < 0;
			v = neg ? 0ULL - (unsigned long long)sv
				: (unsigned long long)sv;
			n = pmg_utoa(v, 10, num + 1, sizeof(num) - 1);
			if (neg) {
				num[0] = '-';
				out_pad(&o, num, n + 1, width, left, ' ');
			} else {
				out_pad(&o, num + 1, n, width, left, pad);
			}
			break;
		}
		case 'u':
		case 'x':
		case 'X':
			v = lng ? va_arg(ap, unsigned long long)
				: va_arg(ap, unsigned int);
			n = pmg_utoa(v, *fmt == 'u' ? 10 : 16, num,
				     sizeof(num));
			out_pad(&o, num, n, width, left, pad);
			break;
		case 'p':
			v = (unsigned long)va_arg(ap, void *);
			num[0] = '0';
			num[1] = 'x';
			n = pmg_utoa(v, 16, num + 2, sizeof(num) - 2);
			out_pad(&o, num, n + 2, width, left, ' ');
			break;
		case 's':
			s = va_arg(ap, const char *);
			if (!s)
				s = "(null)";
			out_pad(&o, s, strlen(s), width, left, ' ');
			break;
		case 'c':
			num[0] = (char)va_arg(ap, int);
			out_pad(&o, num, 1, width, left, ' ');
			break;
		case '%':
			out_c(&o, '%');
			break;
		default:
			out_c(&o, '%');
			if (*fmt)
				out_c(&o, *fmt);
			else
				fmt--;
			break;
		}
	}
	if (o.size)
		o.buf[o.len < o.size ? o.len : o.size - 1] = '\0';
	return (int)o.len;
}

int snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}
