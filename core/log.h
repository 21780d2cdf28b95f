/* Logging: one macro family, level checked before formatting, errno kept. */
#ifndef PSL_CORE_LOG_H
#define PSL_CORE_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum {
	PSL_LOG_ERROR = 0,
	PSL_LOG_WARN = 1,
	PSL_LOG_INFO = 2,
	PSL_LOG_DEBUG = 3, /* PS_VERBOSE=1: connection set-up */
	PSL_LOG_TRACE = 4, /* PS_VERBOSE=2: every message */
};

extern int psl__log_level;

void psl__log_init(int verbose);
struct psl__office;
/* "worker 0", "scheduler", ... shown in front of every line node o's
 * threads write. */
void psl__log_set_who(struct psl__office *o, const char *who);
void psl__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void psl__vlog(int level, const char *tag, const char *fmt, va_list ap);

#define PSL_LOG(level, ...)                           \
	do {                                          \
		if ((level) <= psl__log_level)        \
			psl__log((level), __VA_ARGS__); \
	} while (0)
/*
 * Rate limit of one call site: a burst of PSL_LOG_BURST lines, then at most
 * PSL_LOG_RATE lines a second (a generic cell rate: one atomic "theoretical
 * arrival time"); what is suppressed is counted and said by the site's next
 * line ("... N more like the next one suppressed"). Every warning a peer can
 * cause goes through it (PSL_WARN does), so that a flood of rejected
 * messages cannot flood the log, while a handful of distinct problems at
 * once are all shown.
 */
#define PSL_LOG_RATE 10
#define PSL_LOG_BURST 30
struct psl__ratelimit {
	atomic_llong tat; /* ms: when the site's budget is whole again */
	atomic_int suppressed;
};
/* Whether the site may log now; *suppressed gets how many lines it dropped
 * since it last logged (0 most of the time). */
bool psl__ratelimit_ok(struct psl__ratelimit *rl, int *suppressed);
/* Logs at level through rl; for a site that logs with its own tag (vans). */
void psl__vlog_limited(struct psl__ratelimit *rl, int level, const char *tag, const char *fmt,
		       va_list ap);
void psl__log_limited(struct psl__ratelimit *rl, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define PSL_LOG_LIMITED(level, ...)                                     \
	do {                                                            \
		static struct psl__ratelimit psl__rl_;                  \
		if ((level) <= psl__log_level)                          \
			psl__log_limited(&psl__rl_, (level), __VA_ARGS__); \
	} while (0)

/*
 * A public call's failure with a reason the user can fix: logs the reason at
 * level (a WARN rate-limited per call site, like PSL_WARN) and keeps the
 * same text as this thread's psl_last_error(), even when the line is not
 * shown; evaluates to err. One line per site:
 *   return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "DMLC_X=%s: expected ...", v);
 */
int psl__fail(struct psl__ratelimit *rl, int err, int level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#define PSL_FAIL(err, level, ...)                                          \
	__extension__({                                                    \
		static struct psl__ratelimit psl__frl_;                    \
		psl__fail(&psl__frl_, (err), (level), __VA_ARGS__);        \
	})
/* Sets this thread's psl_last_error() without logging (the line was logged
 * already); psl__clear_error() empties it at the start of a public call. */
void psl__set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void psl__clear_error(void);
/* A public call's result rc: a failure whose reason no PSL_FAIL recorded (a
 * van's send, a customer table) leaves "<call>: <psl_strerror(rc)>", so
 * that psl_last_error() is never empty after a failed call that emptied it
 * at its start; evaluates to rc. */
int psl__ret(const char *call, int rc);

#define PSL_ERR(...) PSL_LOG(PSL_LOG_ERROR, __VA_ARGS__)
/* Warnings are rate-limited per call site (PSL_LOG_RATE a second). */
#define PSL_WARN(...) PSL_LOG_LIMITED(PSL_LOG_WARN, __VA_ARGS__)
#define PSL_INFO(...) PSL_LOG(PSL_LOG_INFO, __VA_ARGS__)
#define PSL_DBG(...) PSL_LOG(PSL_LOG_DEBUG, __VA_ARGS__)
#define PSL_TRACE(...) PSL_LOG(PSL_LOG_TRACE, __VA_ARGS__)

#endif
