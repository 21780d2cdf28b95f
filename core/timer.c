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

static void *timer_main(void *arg)
{
	struct psl__office *o = arg; /* the node this thread times */
	int64_t last_hb = 0, now;
	int period = 1000, wait;
	psl__enter(o); /* for its log lines and the user code it runs */
	if (o->cfg.heartbeat_interval > 0 && o->cfg.heartbeat_interval * 1000 < period)
		period = o->cfg.heartbeat_interval * 1000;
	if (o->cfg.resend && o->cfg.resend_timeout_ms / 2 < period)
		period = o->cfg.resend_timeout_ms / 2 > 10 ? o->cfg.resend_timeout_ms / 2 : 10;
	wait = psl__customers_period_ms(o, period);
	pthread_mutex_lock(&o->mu);
	while (!o->timer_stop) {
		psl__cond_wait_ms(&o->timer_cv, &o->mu, wait);
		if (o->timer_stop)
			break;
		pthread_mutex_unlock(&o->mu);
		now = psl__now_ms();
		psl__heartbeat_tick(o, now, &last_hb);
		if (o->cfg.resend)
			psl__resender_tick(o, now);
		if (o->role == PSL_SCHEDULER && o->cfg.barrier_warn_s > 0)
			psl__barrier_watch(o, now);
		if (o->role == PSL_SCHEDULER)
			psl__control_undeliv_tick(o);
		if (o->role == PSL_SCHEDULER && o->cfg.recovery)
			psl__recovery_tick(o, now);
		if (o->role != PSL_SCHEDULER && o->cfg.recovery && o->cfg.resend)
			psl__recovery_hold_tick(o, now);
		psl__customers_tick(o, now);
		wait = psl__customers_period_ms(o, period);
		pthread_mutex_lock(&o->mu);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

int psl__timer_start(struct psl__office *o)
{
	int rc;
	/* nothing to time: no thread (an idle node stays idle); the scheduler
	 * always has one, to tell nodes what it could not send them */
	if (o->cfg.heartbeat_interval <= 0 && !o->cfg.resend && o->role != PSL_SCHEDULER &&
	    o->cfg.request_timeout_s <= 0 && o->cfg.held_timeout_s <= 0)
		return 0;
	o->timer_stop = false;
	rc = pthread_create(&o->timer, NULL, timer_main, o);
	if (rc)
		return -rc;
	o->timer_running = true;
	return 0;
}

int psl__timer_need(struct psl__office *o)
{
	int rc = 0;
	pthread_mutex_lock(&o->mu);
	if (!o->timer_running && o->state == PSL__READY) {
		o->timer_stop = false;
		rc = -pthread_create(&o->timer, NULL, timer_main, o);
		o->timer_running = rc == 0;
	} else if (o->timer_running) {
		/* a shorter deadline: the timer takes its period anew */
		pthread_cond_broadcast(&o->timer_cv);
	}
	pthread_mutex_unlock(&o->mu);
	return rc;
}

void psl__timer_stop(struct psl__office *o)
{
	if (!o->timer_running)
		return;
	pthread_mutex_lock(&o->mu);
	o->timer_stop = true;
	pthread_cond_broadcast(&o->timer_cv);
	pthread_mutex_unlock(&o->mu);
	pthread_join(o->timer, NULL);
	o->timer_running = false;
}
