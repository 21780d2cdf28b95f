/* The core's one clock: monotonic milliseconds (the van kit's clock), and a
 * bounded wait on a condition variable. */
#ifndef PSL_CORE_CLOCK_H
#define PSL_CORE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "pslite/van_util.h"

static inline int64_t psl__now_ms(void)
{
	return psl_van_now_ms();
}

/* pthread_cond_timedwait for at most ms milliseconds on a condition
 * variable of the default (realtime) clock. Returns its result. */
static inline int psl__cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return pthread_cond_timedwait(cv, mu, &ts);
}

#endif
