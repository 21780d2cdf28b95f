/*
 * pslite van kit: header-only helpers for what the van ABI (pslite/van.h)
 * itself defines, so that every van does these things the same way:
 *
 *   - the greeting a van that listens on a port of its own writes first
 *     ("PSLVAN1 <name>\n"), built and classified;
 *   - integer and boolean settings read through psl_van_host.param, with the
 *     standard one-line error naming the setting, its value and what was
 *     expected;
 *   - the defaults every van shares (PS_BUSY_POLL_US);
 *   - a monotonic clock and absolute deadlines for timed waits;
 *   - little-endian byte helpers for a van's own wire records;
 *   - the job secret on a connection (PS_JOB_SECRET, van ABI 1.2): a fresh
 *     nonce and the proof of it a connector sends, its check by the
 *     acceptor, and a memory of recent nonces against replays;
 *   - a cache of the records a van makes per message, so that steady
 *     traffic allocates none;
 *   - PS_BUSY_POLL's window, which stops polling where the CPUs are wanted.
 *
 * Everything here is static inline: a van includes this header and links
 * nothing of pslite's. Installed beside van.h.
 */
#ifndef PSLITE_VAN_UTIL_H
#define PSLITE_VAN_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <pslite/van.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ defaults -- */

/* PS_BUSY_POLL=1: how long a van keeps polling after a completion (us). */
#define PSL_VAN_BUSY_POLL_US_DEFAULT 200

/* ------------------------------------------------------------ greeting -- */

/* Longest van name (without its NUL) a greeting may carry. */
#define PSL_VAN_NAME_LEN_MAX 63
/* Bytes a whole greeting can take: "PSLVAN1 " + name + '\n'. */
#define PSL_VAN_GREETING_LEN_MAX (sizeof(PSL_VAN_GREETING) - 1 + PSL_VAN_NAME_LEN_MAX + 1)

/* What the first bytes from a peer are (psl_van_greeting_parse). */
enum psl_van_greet {
	PSL_VAN_GREET_MORE = 0,	 /* not enough bytes yet to tell */
	PSL_VAN_GREET_OK = 1,	 /* a pslite van's greeting: name copied out */
	PSL_VAN_GREET_ZMTP = 2,	 /* a ZeroMQ peer (van zmq or C++ ps-lite): ZMTP's
				    signature, 0xFF, 8 bytes, 0x7F */
	PSL_VAN_GREET_OTHER = 3, /* something else */
};

static inline bool psl__van_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

/* Writes "PSLVAN1 <name>\n" (no NUL) into buf. Returns its length, or 0 when
 * name is empty, too long, has characters other than [A-Za-z0-9_-], or the
 * greeting does not fit in cap bytes. */
static inline size_t psl_van_greeting_build(char *buf, size_t cap, const char *name)
{
	size_t glen = sizeof(PSL_VAN_GREETING) - 1, nlen = name ? strlen(name) : 0, i;

	if (nlen == 0 || nlen > PSL_VAN_NAME_LEN_MAX || glen + nlen + 1 > cap)
		return 0;
	for (i = 0; i < nlen; i++)
		if (!psl__van_name_char((unsigned char)name[i]))
			return 0;
	memcpy(buf, PSL_VAN_GREETING, glen);
	memcpy(buf + glen, name, nlen);
	buf[glen + nlen] = '\n';
	return glen + nlen + 1;
}

/* Classifies the first len bytes received on a connection. On
 * PSL_VAN_GREET_OK the van's name is copied into name (NUL-terminated; a
 * name that does not fit in name_cap makes it PSL_VAN_GREET_OTHER) and *used
 * is the greeting's length (bytes after it belong to the van's own protocol).
 * May be called again with more bytes after PSL_VAN_GREET_MORE. */
static inline int psl_van_greeting_parse(const void *buf, size_t len, char *name,
					 size_t name_cap, size_t *used)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t glen = sizeof(PSL_VAN_GREETING) - 1, i;

	if (len == 0)
		return PSL_VAN_GREET_MORE;
	if (b[0] == 0xff) /* ZMTP's signature: 0xFF, 8 bytes, 0x7F */
		return len < 10 ? PSL_VAN_GREET_MORE
				: (b[9] == 0x7f ? PSL_VAN_GREET_ZMTP : PSL_VAN_GREET_OTHER);
	for (i = 0; i < len && i < glen; i++)
		if (b[i] != (unsigned char)PSL_VAN_GREETING[i])
			return PSL_VAN_GREET_OTHER;
	for (i = glen; i < len; i++) {
		size_t nlen = i - glen;
		if (b[i] == '\n') {
			if (nlen == 0 || nlen + 1 > name_cap)
				return PSL_VAN_GREET_OTHER;
			memcpy(name, b + glen, nlen);
			name[nlen] = '\0';
			if (used)
				*used = i + 1;
			return PSL_VAN_GREET_OK;
		}
		if (nlen >= PSL_VAN_NAME_LEN_MAX || !psl__van_name_char(b[i]))
			return PSL_VAN_GREET_OTHER;
	}
	return PSL_VAN_GREET_MORE;
}

/* A short description of what a peer sent, for messages: "van <name>",
 * "ZeroMQ (van zmq, or a C++ ps-lite node)" or "an unknown protocol". */
static inline const char *psl_van_greeting_what(int kind, const char *name, char *buf,
						size_t cap)
{
	switch (kind) {
	case PSL_VAN_GREET_OK:
		snprintf(buf, cap, "van %s", name);
		return cap ? buf : "a pslite van";
	case PSL_VAN_GREET_ZMTP:
		return "ZeroMQ (van zmq, or a C++ ps-lite node)";
	default:
		return "an unknown protocol";
	}
}

/* ------------------------------------------------------------ settings -- */

/* The value of a setting as the core sees it, or NULL when unset or empty. */
static inline const char *psl_van_param(const struct psl_van_host *host, const char *name)
{
	const char *s = host && host->param ? host->param(host->ctx, name) : NULL;
	return s && *s ? s : NULL;
}

/* Reads integer setting name into *out: def when unset or empty; a value
 * that is not an integer from min to max is an error, logged as one line
 * naming the setting, its value and what was expected ("expected 0 or 1",
 * or "expected <unit> from <min> to <max>"), and -EINVAL. unit may be NULL
 * ("an integer"). van is the van's name, as for psl_van_log. */
static inline int psl_van_param_long(const struct psl_van_host *host, const char *van,
				     const char *name, long def, long min, long max,
				     const char *unit, long *out)
{
	const char *s = psl_van_param(host, name);
	char *end;
	long x;

	if (!s) {
		*out = def;
		return 0;
	}
	errno = 0;
	x = strtol(s, &end, 10);
	if (errno || end == s || *end || x < min || x > max) {
		if (max - min == 1)
			psl_van_log(host, PSL_VAN_LOG_ERROR, van, "%s=%s: expected %ld or %ld",
				    name, s, min, max);
		else
			psl_van_log(host, PSL_VAN_LOG_ERROR, van,
				    "%s=%s: expected %s from %ld to %ld", name, s,
				    unit ? unit : "an integer", min, max);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

/* A 0/1 setting (as ps-lite's are): def when unset or empty, -EINVAL with
 * the standard line for anything but 0 or 1. */
static inline int psl_van_param_bool(const struct psl_van_host *host, const char *van,
				     const char *name, bool def, bool *out)
{
	long x;
	int rc = psl_van_param_long(host, van, name, def ? 1 : 0, 0, 1, NULL, &x);
	if (rc == 0)
		*out = x != 0;
	return rc;
}

/* --------------------------------------------------------------- clock -- */

/* Monotonic time in nanoseconds / milliseconds. */
static inline int64_t psl_van_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t psl_van_now_ms(void)
{
	return psl_van_now_ns() / 1000000;
}

/* The absolute CLOCK_MONOTONIC time ms milliseconds from now, for
 * pthread_cond_timedwait on a condition variable whose clock was set to
 * CLOCK_MONOTONIC (pthread_condattr_setclock). */
static inline struct timespec psl_van_deadline(int64_t ms)
{
	int64_t t = psl_van_now_ns() + (ms > 0 ? ms : 0) * 1000000;
	struct timespec ts;
	ts.tv_sec = (time_t)(t / 1000000000);
	ts.tv_nsec = (long)(t % 1000000000);
	return ts;
}

/* ------------------------------------------------- PS_BUSY_POLL window -- */

/*
 * After a message a polling van keeps polling for a window (PS_BUSY_POLL_US)
 * instead of sleeping, giving the CPU away between polls (sched_yield) so
 * that the peer or the caller can run on a small machine. That pays only
 * while the CPUs are not wanted by others: where they are, a yield hands the
 * CPU to another runnable thread until the scheduler's next tick (1-4 ms),
 * and a request whose answer comes meanwhile waits that long, where a
 * sleeping thread would have been woken at once. So the window times its
 * own yields. One that comes back late (PSL_VAN_SPIN_LATE_NS) ends the
 * window; PSL_VAN_SPIN_STRIKES late ones in a row, each within
 * PSL_VAN_SPIN_STRIKE_GAP_NS of the one before, mean the CPUs are wanted:
 * then no window opens for a pause that doubles each time
 * (PSL_VAN_SPIN_PAUSE_MIN_NS .. _MAX_NS), and PSL_VAN_SPIN_CLEAN windows in
 * a row without a late yield bring it back to its minimum. A lone late
 * yield (the VM's CPU taken away for a moment, an interrupt) only ends its
 * window. The cost where the CPUs are wanted is a few late yields per
 * pause, not one per request; on a machine with CPUs to spare nothing
 * changes.
 *
 * Use: psl_van_spin_init once; psl_van_spin_hit(s, now) after each message;
 * while psl_van_spinning(s, now) poll again, with psl_van_spin_yield(s)
 * between polls that found nothing. One thread per struct.
 */
#define PSL_VAN_SPIN_LATE_NS 200000LL		/* 0.2 ms: a yield that lost a tick */
#define PSL_VAN_SPIN_STRIKES 3
#define PSL_VAN_SPIN_STRIKE_GAP_NS 50000000LL	/* 50 ms */
#define PSL_VAN_SPIN_PAUSE_MIN_NS 100000000LL	/* 100 ms */
#define PSL_VAN_SPIN_PAUSE_MAX_NS 3200000000LL	/* 3.2 s */
#define PSL_VAN_SPIN_CLEAN 64

struct psl_van_spin {
	int64_t window_ns; /* PS_BUSY_POLL_US in ns; 0: never poll */
	int64_t until;	   /* the open window ends */
	int64_t paused;	   /* no window before this */
	int64_t pause_ns;  /* the next pause */
	int64_t last_late; /* when the last late yield came back */
	unsigned strikes;  /* late yields in a row, each soon after the last */
	unsigned clean;	   /* windows in a row without a late yield */
	bool open;
	uint64_t lates;	   /* late yields so far (for a van's log) */
	uint64_t pauses;   /* pauses so far */
};

static inline void psl_van_spin_init(struct psl_van_spin *s, int64_t window_ns)
{
	memset(s, 0, sizeof(*s));
	s->window_ns = window_ns > 0 ? window_ns : 0;
	s->pause_ns = PSL_VAN_SPIN_PAUSE_MIN_NS;
}

/* A message came (sent or received): open the window, or push its end. */
static inline void psl_van_spin_hit(struct psl_van_spin *s, int64_t now_ns)
{
	if (!s->window_ns || now_ns < s->paused)
		return;
	s->until = now_ns + s->window_ns;
	s->open = true;
}

/* Whether to poll again rather than sleep. */
static inline bool psl_van_spinning(struct psl_van_spin *s, int64_t now_ns)
{
	if (!s->open)
		return false;
	if (now_ns < s->until)
		return true;
	s->open = false; /* ran its length: a clean window */
	if (++s->clean >= PSL_VAN_SPIN_CLEAN) {
		s->clean = 0;
		s->pause_ns = PSL_VAN_SPIN_PAUSE_MIN_NS;
	}
	return false;
}

/* A yield that began at t0 ended at t1 (ns): false when that was late,
 * which ended the window (and, after PSL_VAN_SPIN_STRIKES, paused the next
 * ones). */
static inline bool psl_van_spin_yielded(struct psl_van_spin *s, int64_t t0, int64_t t1)
{
	if (t1 - t0 < PSL_VAN_SPIN_LATE_NS)
		return true;
	s->open = false;
	s->clean = 0;
	s->lates++;
	if (s->strikes && t1 - s->last_late < PSL_VAN_SPIN_STRIKE_GAP_NS)
		s->strikes++;
	else
		s->strikes = 1;
	s->last_late = t1;
	if (s->strikes >= PSL_VAN_SPIN_STRIKES) {
		s->strikes = 0;
		s->pauses++;
		s->paused = t1 + s->pause_ns;
		if (s->pause_ns < PSL_VAN_SPIN_PAUSE_MAX_NS)
			s->pause_ns *= 2;
	}
	return false;
}

/* At the end of a van's thread: one DEBUG line when yields came back late. */
static inline void psl_van_spin_report(const struct psl_van_host *host, const char *van,
				       const struct psl_van_spin *s)
{
	if (s->pauses)
		psl_van_log(host, PSL_VAN_LOG_DEBUG, van,
			    "PS_BUSY_POLL: polling paused %llu time%s: the CPUs were wanted by "
			    "other threads (%llu poll windows ended by a late yield)",
			    (unsigned long long)s->pauses, s->pauses == 1 ? "" : "s",
			    (unsigned long long)s->lates);
	else if (s->lates)
		psl_van_log(host, PSL_VAN_LOG_DEBUG, van,
			    "PS_BUSY_POLL: %llu poll window%s ended by a late yield",
			    (unsigned long long)s->lates, s->lates == 1 ? "" : "s");
}

/* Between two polls that found nothing: gives the CPU away. Returns false
 * when the CPU came back late, which ended the window (sleep then). */
static inline bool psl_van_spin_yield(struct psl_van_spin *s)
{
	int64_t t0 = psl_van_now_ns();
	sched_yield();
	return psl_van_spin_yielded(s, t0, psl_van_now_ns());
}

/* ------------------------------------------- PS_BUSY_POLL=auto window -- */

/*
 * PS_BUSY_POLL=auto sizes the window from the gaps between messages, so
 * that a thread whose messages come back to back (a server answering one
 * worker's requests in turn) keeps polling between them instead of arming
 * the transport, sleeping and being woken for each, while one whose
 * messages are far apart sleeps as with PS_BUSY_POLL=0. A gap runs from the
 * last message before a round found nothing to the next message (measured
 * while the thread slept it includes the wake-up). Once PSL_VAN_AUTO_GAPS
 * gaps are known and the second longest of them is at most
 * PSL_VAN_AUTO_GAP_MAX_NS, a window twice that gap opens after each
 * message, at most the cap (PS_BUSY_POLL_US when set, else
 * PSL_VAN_BUSY_POLL_AUTO_US); otherwise none. PSL_VAN_AUTO_MISSES windows
 * in a row that ran their length without a message close the windows for
 * the next PSL_VAN_AUTO_REST gaps. psl_van_spin's late yields end windows
 * and pause them as with PS_BUSY_POLL=1.
 *
 * Use: psl_van_spin_auto_init once (on false: PS_BUSY_POLL=0 or 1, the
 * calls below are psl_van_spin's); psl_van_spin_auto_hit after each
 * message; psl_van_spin_auto_spinning where psl_van_spinning was.
 */
#define PSL_VAN_BUSY_POLL_AUTO_US 50
#define PSL_VAN_AUTO_GAPS 4
#define PSL_VAN_AUTO_GAP_MAX_NS 200000LL /* 0.2 ms */
#define PSL_VAN_AUTO_MISSES 4
#define PSL_VAN_AUTO_REST 64

struct psl_van_spin_auto {
	bool on;		/* PS_BUSY_POLL=auto */
	bool idle;		/* a round found nothing since the last message */
	int64_t cap_ns;		/* the longest window */
	int64_t last;		/* the last message (0: none yet) */
	int64_t gaps[PSL_VAN_AUTO_GAPS];
	unsigned n, at;		/* gaps known (up to PSL_VAN_AUTO_GAPS), next slot */
	unsigned misses;	/* windows in a row that ran out */
	unsigned rest;		/* gaps left without windows */
	uint64_t seen, caught;	/* gaps, and those a window covered (log) */
	uint64_t ran_out, rests; /* windows that ran out, rests begun (log) */
};

/* PS_BUSY_POLL (0, 1 or auto) and PS_BUSY_POLL_US: *mode 0, 1 or 2 (auto),
 * *window_ns the window (1) or its cap (auto). -EINVAL with a line naming
 * the setting on anything else. */
static inline int psl_van_busy_poll_settings(const struct psl_van_host *host, const char *van,
					     int *mode, int64_t *window_ns)
{
	const char *s = psl_van_param(host, "PS_BUSY_POLL");
	long x, def = PSL_VAN_BUSY_POLL_US_DEFAULT;

	*mode = 0;
	if (s && !strcmp(s, "auto")) {
		*mode = 2;
		def = PSL_VAN_BUSY_POLL_AUTO_US;
	} else if (s && *s && strcmp(s, "0")) {
		if (strcmp(s, "1")) {
			psl_van_log(host, PSL_VAN_LOG_ERROR, van,
				    "PS_BUSY_POLL=%s: expected 0, 1 or auto", s);
			return -EINVAL;
		}
		*mode = 1;
	}
	if (psl_van_param_long(host, van, "PS_BUSY_POLL_US", def, 0, 1000000, "microseconds",
			       &x))
		return -EINVAL;
	*window_ns = (int64_t)x * 1000;
	return 0;
}

/* The same for a van without an automatic window (vans zmq, ibverbs):
 * PS_BUSY_POLL=auto sleeps between messages as 0 does, and says so at
 * INFO. *busy: PS_BUSY_POLL=1; *window_ns as above. */
static inline int psl_van_busy_poll_plain(const struct psl_van_host *host, const char *van,
					  bool *busy, int64_t *window_ns)
{
	int mode, rc = psl_van_busy_poll_settings(host, van, &mode, window_ns);
	if (rc)
		return rc;
	if (mode == 2)
		psl_van_log(host, PSL_VAN_LOG_INFO, van,
			    "PS_BUSY_POLL=auto: this van has no automatic poll window (vans ucx and "
			    "fabric have); it sleeps between messages, as with PS_BUSY_POLL=0");
	*busy = mode == 1;
	return 0;
}

/* mode and window_ns as psl_van_busy_poll_settings gave them (mode 0 where
 * the van never polls). Returns whether the window is auto. */
static inline bool psl_van_spin_auto_init(struct psl_van_spin *s, struct psl_van_spin_auto *a,
					  int mode, int64_t window_ns)
{
	memset(a, 0, sizeof(*a));
	a->on = mode == 2 && window_ns > 0;
	a->cap_ns = window_ns;
	psl_van_spin_init(s, mode == 1 ? window_ns : 0);
	return a->on;
}

/* The window the known gaps ask for (0: none). */
static inline int64_t psl_van_spin_auto_window(const struct psl_van_spin_auto *a)
{
	int64_t first = 0, second = 0, w;
	unsigned i;

	if (a->n < PSL_VAN_AUTO_GAPS || a->rest)
		return 0;
	for (i = 0; i < PSL_VAN_AUTO_GAPS; i++) {
		if (a->gaps[i] > first) {
			second = first;
			first = a->gaps[i];
		} else if (a->gaps[i] > second) {
			second = a->gaps[i];
		}
	}
	if (second > PSL_VAN_AUTO_GAP_MAX_NS)
		return 0;
	w = 2 * second;
	return w < a->cap_ns ? w : a->cap_ns;
}

/* A message came at now_ns: note the gap before it, open the window. */
static inline void psl_van_spin_auto_hit(struct psl_van_spin *s, struct psl_van_spin_auto *a,
					 int64_t now_ns)
{
	if (!a->on) {
		psl_van_spin_hit(s, now_ns);
		return;
	}
	if (a->idle) {
		a->seen++;
		if (s->open && now_ns < s->until) {
			a->caught++;
			a->misses = 0;
		}
		if (a->rest)
			a->rest--;
		if (a->last) {
			a->gaps[a->at] = now_ns - a->last;
			a->at = (a->at + 1) % PSL_VAN_AUTO_GAPS;
			if (a->n < PSL_VAN_AUTO_GAPS)
				a->n++;
		}
		a->idle = false;
	}
	a->last = now_ns;
	s->window_ns = psl_van_spin_auto_window(a);
	psl_van_spin_hit(s, now_ns);
}

/* Whether to poll again rather than sleep (a round found nothing). */
static inline bool psl_van_spin_auto_spinning(struct psl_van_spin *s,
					      struct psl_van_spin_auto *a, int64_t now_ns)
{
	bool was = s->open;

	if (!a->on)
		return psl_van_spinning(s, now_ns);
	a->idle = true;
	if (psl_van_spinning(s, now_ns))
		return true;
	a->ran_out += was;
	if (was && ++a->misses >= PSL_VAN_AUTO_MISSES) {
		a->rests++;
		a->misses = 0;
		a->rest = PSL_VAN_AUTO_REST;
	}
	return false;
}

/* At the end of a van's thread: one DEBUG line on what auto did. */
static inline void psl_van_spin_auto_report(const struct psl_van_host *host, const char *van,
					    const struct psl_van_spin_auto *a)
{
	if (a->on)
		psl_van_log(host, PSL_VAN_LOG_DEBUG, van,
			    "PS_BUSY_POLL=auto: a poll window covered %llu of %llu gaps between "
			    "messages; %llu ran out, %llu times %d in a row",
			    (unsigned long long)a->caught, (unsigned long long)a->seen,
			    (unsigned long long)a->ran_out, (unsigned long long)a->rests,
			    PSL_VAN_AUTO_MISSES);
}

/* ------------------------------------------------ caller progress -- */

/* The progress entry's loop (ABI 1.3): try(v) one round of the van's
 * progress, > 0 when it moved something, -EBUSY when another thread holds
 * the round, another negative errno to stop; tried again, giving the CPU
 * away between tries (on a small machine the peer needs it to answer),
 * until it moved something, failed, or the clock passed end_ns
 * (psl_van_now_ns). Returns try's last result. */
static inline int psl_van_drive_loop(struct psl_van *v, int64_t end_ns,
				     int (*try_round)(struct psl_van *))
{
	int rc;
	for (;;) {
		rc = try_round(v);
		if (rc > 0 || (rc < 0 && rc != -EBUSY) || psl_van_now_ns() >= end_ns)
			return rc;
		sched_yield();
	}
}

/* --------------------------------------------------------- byte order -- */

static inline void psl_van_put_le16(void *p, uint16_t v)
{
	uint8_t *b = (uint8_t *)p;
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}

static inline void psl_van_put_le32(void *p, uint32_t v)
{
	uint8_t *b = (uint8_t *)p;
	int i;
	for (i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static inline void psl_van_put_le64(void *p, uint64_t v)
{
	uint8_t *b = (uint8_t *)p;
	int i;
	for (i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t psl_van_get_le16(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint16_t)(b[0] | (uint16_t)b[1] << 8);
}

static inline uint32_t psl_van_get_le32(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	uint32_t v = 0;
	int i;
	for (i = 3; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static inline uint64_t psl_van_get_le64(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	uint64_t v = 0;
	int i;
	for (i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

/* ---------------------------------------------------------- job secret -- */

/* A connection's proof: a 16-byte nonce the connector drew, then the first
 * PSL_VAN_PROOF_MAC_LEN bytes of HMAC-SHA256(secret, "pslite-<van>|<id>|<hex
 * nonce>") from the host's proof() (the node id of the connector, "-" before
 * it has one). 128 bits of the MAC are kept so that the proof fits where
 * room is short (rdmacm's private data); a van sends the whole record. */
#define PSL_VAN_PROOF_NONCE_LEN 16
#define PSL_VAN_PROOF_MAC_LEN 16
#define PSL_VAN_PROOF_LEN (PSL_VAN_PROOF_NONCE_LEN + PSL_VAN_PROOF_MAC_LEN)

/* Whether the job has a secret, i.e. connections must carry proofs. false
 * for a host older than ABI 1.2. */
static inline bool psl_van_secret(const struct psl_van_host *host)
{
	uint8_t mac[32];
	return host->size >= PSL_VAN_HOST_SIZE_1_2 && host->proof && host->proof_check &&
	       host->proof(host->ctx, "", 0, mac) == 0;
}

static inline int psl__van_proof_mac(const struct psl_van_host *host, const char *van, int32_t id,
				     const uint8_t *nonce, uint8_t mac[32])
{
	static const char hx[] = "0123456789abcdef";
	char msg[128], idb[16] = "-";
	int i, n;
	if (id != PSL_VAN_ID_NONE)
		snprintf(idb, sizeof(idb), "%d", (int)id);
	n = snprintf(msg, sizeof(msg) - 2 * PSL_VAN_PROOF_NONCE_LEN, "pslite-%s|%s|", van, idb);
	if (n < 0 || (size_t)n >= sizeof(msg) - 2 * PSL_VAN_PROOF_NONCE_LEN)
		return -EINVAL;
	for (i = 0; i < PSL_VAN_PROOF_NONCE_LEN; i++) {
		msg[n++] = hx[nonce[i] >> 4];
		msg[n++] = hx[nonce[i] & 15];
	}
	return host->proof(host->ctx, msg, (size_t)n, mac) ? -EACCES : 0;
}

/* Draws a nonce and writes the proof record for node id of van into out.
 * 0, -EACCES without a secret, or -errno when no randomness is to be had. */
static inline int psl_van_proof_make(const struct psl_van_host *host, const char *van, int32_t id,
				     uint8_t out[PSL_VAN_PROOF_LEN])
{
	uint8_t mac[32];
	size_t got = 0;
	int rc;
	if (!psl_van_secret(host))
		return -EACCES;
	while (got < PSL_VAN_PROOF_NONCE_LEN) {
		ssize_t k = getrandom(out + got, PSL_VAN_PROOF_NONCE_LEN - got, 0);
		if (k < 0 && errno != EINTR)
			return -errno;
		if (k > 0)
			got += (size_t)k;
	}
	if ((rc = psl__van_proof_mac(host, van, id, out, mac)))
		return rc;
	memcpy(out + PSL_VAN_PROOF_NONCE_LEN, mac, PSL_VAN_PROOF_MAC_LEN);
	return 0;
}

/* 0 when rec proves the secret for node id of van, -EACCES when not. The
 * comparison takes the same time wherever the bytes differ. */
static inline int psl_van_proof_check(const struct psl_van_host *host, const char *van,
				      int32_t id, const uint8_t rec[PSL_VAN_PROOF_LEN])
{
	uint8_t mac[32], diff = 0;
	int i;
	if (!psl_van_secret(host) || psl__van_proof_mac(host, van, id, rec, mac))
		return -EACCES;
	for (i = 0; i < PSL_VAN_PROOF_MAC_LEN; i++)
		diff |= (uint8_t)(mac[i] ^ rec[PSL_VAN_PROOF_NONCE_LEN + i]);
	return diff ? -EACCES : 0;
}

/* The nonces of the last PSL_VAN_NONCES_SEEN proofs an acceptor took, so
 * that a proof seen on the network cannot be sent again. Zero it to start. */
#define PSL_VAN_NONCES_SEEN 256
struct psl_van_nonces {
	uint8_t seen[PSL_VAN_NONCES_SEEN][PSL_VAN_PROOF_NONCE_LEN];
	unsigned next, used;
};

/* true (and the nonce remembered) when it was not seen before. */
static inline bool psl_van_nonce_fresh(struct psl_van_nonces *s,
				       const uint8_t nonce[PSL_VAN_PROOF_NONCE_LEN])
{
	unsigned i;
	for (i = 0; i < s->used; i++)
		if (!memcmp(s->seen[i], nonce, PSL_VAN_PROOF_NONCE_LEN))
			return false;
	memcpy(s->seen[s->next], nonce, PSL_VAN_PROOF_NONCE_LEN);
	s->next = (s->next + 1) % PSL_VAN_NONCES_SEEN;
	if (s->used < PSL_VAN_NONCES_SEEN)
		s->used++;
	return true;
}

/* --------------------------------------------------------- block cache -- */

/* Records made for each message (a received message's frame table, a send's
 * state) kept for reuse: a get takes a kept block when the record fits in
 * one (block bytes), else mallocs; a put keeps a block-sized record while
 * fewer than max are kept, else frees it. Thread-safe; one per kind of
 * record, e.g. static in the van:
 *
 *   static struct psl_van_cache recs = PSL_VAN_CACHE_INIT(256, 4096);
 *   struct rec *r = psl_van_cache_get(&recs, size);      (NULL: no memory)
 *   ...
 *   psl_van_cache_put(&recs, r, size);                    (the same size)
 *
 * Under AddressSanitizer nothing is kept (it sees every use after free).
 * Blocks are not zeroed. */
struct psl_van_cache {
	pthread_mutex_t mu;
	void *head; /* kept blocks, linked through their first bytes */
	int n, max;
	size_t block;
};
#if defined(__SANITIZE_ADDRESS__)
#define PSL_VAN_CACHE_INIT(max, block) {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, (block)}
#else
#define PSL_VAN_CACHE_INIT(max, block) {PTHREAD_MUTEX_INITIALIZER, NULL, 0, (max), (block)}
#endif

static inline void *psl_van_cache_get(struct psl_van_cache *c, size_t size)
{
	void *p = NULL;
	if (size > c->block)
		return malloc(size);
	pthread_mutex_lock(&c->mu);
	if ((p = c->head)) {
		memcpy(&c->head, p, sizeof(void *));
		c->n--;
	}
	pthread_mutex_unlock(&c->mu);
	return p ? p : malloc(c->block > sizeof(void *) ? c->block : sizeof(void *));
}

static inline void psl_van_cache_put(struct psl_van_cache *c, void *p, size_t size)
{
	if (p && size <= c->block) {
		pthread_mutex_lock(&c->mu);
		if (c->n < c->max) {
			memcpy(p, &c->head, sizeof(void *));
			c->head = p;
			c->n++;
			p = NULL;
		}
		pthread_mutex_unlock(&c->mu);
	}
	free(p);
}

#ifdef __cplusplus
}
#endif

#endif /* PSLITE_VAN_UTIL_H */
