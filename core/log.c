#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "postoffice.h"

int psl__log_level = PSL_LOG_INFO;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

void psl__log_init(int verbose)
{
	psl__log_level = PSL_LOG_INFO + (verbose < 0 ? 0 : verbose > 2 ? 2 : verbose);
}

void psl__log_set_who(struct psl__office *o, const char *who)
{
	/* node o's: a joint process's lines say which node wrote them */
	snprintf(o->log_who, sizeof(o->log_who), "%s", who ? who : "");
}

void psl__vlog(int level, const char *tag, const char *fmt, va_list ap)
{
	int saved = errno;
	char line[2048];
	struct timespec ts;
	struct tm tm;
	const char *log_who = psl__cur->log_who; /* the node the thread works for */
	int n;

	if (level < 0)
		level = 0;
	if (level > PSL_LOG_TRACE)
		level = PSL_LOG_TRACE;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "[pslite %02d:%02d:%02d.%03ld%s%s%s%s] %s: ", tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_who[0] ? " " : "", log_who,
		     tag ? " " : "", tag ? tag : "", level_names[level]);
	if (n < 0)
		n = 0;
	if ((size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	n = (int)strlen(line);
	if (n > 0 && line[n - 1] != '\n' && (size_t)n + 1 < sizeof(line)) {
		line[n++] = '\n';
		line[n] = 0;
	}
	/* one write per line so that lines of several threads do not mix */
	fputs(line, stderr);
	errno = saved;
}

void psl__log(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	psl__vlog(level, NULL, fmt, ap);
	va_end(ap);
}

void psl_log(enum psl_log_level level, const char *text)
{
	PSL_LOG((int)level, "%s", text ? text : "");
}

bool psl__ratelimit_ok(struct psl__ratelimit *rl, int *suppressed)
{
	const long long step = 1000 / PSL_LOG_RATE, span = step * PSL_LOG_BURST;
	long long now = (long long)psl__now_ms(), tat = atomic_load(&rl->tat), next;

	*suppressed = 0;
	do {
		next = (tat > now ? tat : now) + step;
		if (next - now > span) {
			atomic_fetch_add(&rl->suppressed, 1);
			return false;
		}
	} while (!atomic_compare_exchange_weak(&rl->tat, &tat, next));
	*suppressed = atomic_exchange(&rl->suppressed, 0);
	return true;
}

void psl__vlog_limited(struct psl__ratelimit *rl, int level, const char *tag, const char *fmt,
		       va_list ap)
{
	int sup;
	if (!psl__ratelimit_ok(rl, &sup))
		return;
	if (sup > 0)
		psl__log(level, "... %d more like the next line suppressed (at most %d a second)",
			 sup, PSL_LOG_RATE);
	psl__vlog(level, tag, fmt, ap);
}

void psl__log_limited(struct psl__ratelimit *rl, int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	psl__vlog_limited(rl, level, NULL, fmt, ap);
	va_end(ap);
}
