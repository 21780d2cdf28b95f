/* The timer thread: heartbeats, resends, request deadlines
 * (PS_REQUEST_TIMEOUT), messages held for a missing customer
 * (PS_HELD_TIMEOUT) and (on the scheduler) the watch of long-waiting
 * barriers, only when one of them is on (an idle node with none has no
 * thread; with the defaults it wakes once a second). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "control_int.h"
#include "customer.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"
#include "van_host.h"

#define po psl__po

static void *timer_main(void *arg)
{
	int64_t last_hb = 0, now;
	int period = 1000, wait;
	psl__enter(arg); /* the node this thread times */
	if (po.cfg.heartbeat_interval > 0 && po.cfg.heartbeat_interval * 1000 < period)
		period = po.cfg.heartbeat_interval * 1000;
	if (po.cfg.resend && po.cfg.resend_timeout_ms / 2 < period)
		period = po.cfg.resend_timeout_ms / 2 > 10 ? po.cfg.resend_timeout_ms / 2 : 10;
	wait = psl__customers_period_ms(psl__cur, period);
	pthread_mutex_lock(&po.mu);
	while (!po.timer_stop) {
		psl__cond_wait_ms(&po.timer_cv, &po.mu, wait);
		if (po.timer_stop)
			break;
		pthread_mutex_unlock(&po.mu);
		now = psl__now_ms();
		psl__heartbeat_tick(psl__cur, now, &last_hb);
		if (po.cfg.resend)
			psl__resender_tick(psl__cur, now);
		if (po.role == PSL_SCHEDULER && po.cfg.barrier_warn_s > 0)
			psl__barrier_watch(psl__cur, now);
		if (po.role == PSL_SCHEDULER)
			psl__control_undeliv_tick(psl__cur);
		if (po.role == PSL_SCHEDULER && po.cfg.recovery)
			psl__recovery_tick(psl__cur, now);
		if (po.role != PSL_SCHEDULER && po.cfg.recovery && po.cfg.resend)
			psl__recovery_hold_tick(psl__cur, now);
		psl__customers_tick(psl__cur, now);
		wait = psl__customers_period_ms(psl__cur, period);
		pthread_mutex_lock(&po.mu);
	}
	pthread_mutex_unlock(&po.mu);
	return NULL;
}

int psl__timer_start(void)
{
	int rc;
	/* nothing to time: no thread (an idle node stays idle); the scheduler
	 * always has one, to tell nodes what it could not send them */
	if (po.cfg.heartbeat_interval <= 0 && !po.cfg.resend && po.role != PSL_SCHEDULER &&
	    po.cfg.request_timeout_s <= 0 && po.cfg.held_timeout_s <= 0)
		return 0;
	po.timer_stop = false;
	rc = pthread_create(&po.timer, NULL, timer_main, psl__cur);
	if (rc)
		return -rc;
	po.timer_running = true;
	return 0;
}

int psl__timer_need(void)
{
	int rc = 0;
	pthread_mutex_lock(&po.mu);
	if (!po.timer_running && po.state == PSL__READY) {
		po.timer_stop = false;
		rc = -pthread_create(&po.timer, NULL, timer_main, psl__cur);
		po.timer_running = rc == 0;
	} else if (po.timer_running) {
		/* a shorter deadline: the timer takes its period anew */
		pthread_cond_broadcast(&po.timer_cv);
	}
	pthread_mutex_unlock(&po.mu);
	return rc;
}

void psl__timer_stop(void)
{
	if (!po.timer_running)
		return;
	pthread_mutex_lock(&po.mu);
	po.timer_stop = true;
	pthread_cond_broadcast(&po.timer_cv);
	pthread_mutex_unlock(&po.mu);
	pthread_join(po.timer, NULL);
	po.timer_running = false;
}
