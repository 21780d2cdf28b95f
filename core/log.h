/* Logging: one macro family, level checked before formatting, errno kept. */
#ifndef PSL_CORE_LOG_H
#define PSL_CORE_LOG_H

#include <stdarg.h>

enum {
	PSL_LOG_ERROR = 0,
	PSL_LOG_WARN = 1,
	PSL_LOG_INFO = 2,
	PSL_LOG_DEBUG = 3, /* PS_VERBOSE=1: connection set-up */
	PSL_LOG_TRACE = 4, /* PS_VERBOSE=2: every message */
};

extern int psl__log_level;

void psl__log_init(int verbose);
/* "worker 0", "scheduler", ... shown in front of every line. */
void psl__log_set_who(const char *who);
void psl__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void psl__vlog(int level, const char *tag, const char *fmt, va_list ap);

#define PSL_LOG(level, ...)                           \
	do {                                          \
		if ((level) <= psl__log_level)        \
			psl__log((level), __VA_ARGS__); \
	} while (0)
#define PSL_ERR(...) PSL_LOG(PSL_LOG_ERROR, __VA_ARGS__)
#define PSL_WARN(...) PSL_LOG(PSL_LOG_WARN, __VA_ARGS__)
#define PSL_INFO(...) PSL_LOG(PSL_LOG_INFO, __VA_ARGS__)
#define PSL_DBG(...) PSL_LOG(PSL_LOG_DEBUG, __VA_ARGS__)
#define PSL_TRACE(...) PSL_LOG(PSL_LOG_TRACE, __VA_ARGS__)

#endif
