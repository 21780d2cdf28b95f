/* Control messages that cannot be sent: every failed send of one (the van's
 * send, or its send_done) is logged at ERROR naming the peer, the message
 * and the reason, and the job fails at once instead of waiting for what
 * will never come. The scheduler's start fails when a node list cannot go
 * out, and it tells the nodes why with a small TERMINATE (docs/wire.md 5,
 * 6.3); a node the scheduler cannot release or inform after start-up is
 * told the same way and declared lost; a node whose registration or barrier
 * request cannot go fails its start or its barrier. Here too: how a control
 * message is sent (its outcome comes back to psl__control_sent), and a
 * failed start kept for psl_start to return. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "control_int.h"
#include "log.h"
#include "postoffice.h"
#include "van_host.h"

/* With o->mu held: start-up failed with err (the first failure is kept). */
static void start_failed_locked(struct psl__office *o, int err, const char *fmt, va_list ap)
{
	if (!o->start_err) {
		o->start_err = err;
		vsnprintf(o->start_msg, sizeof(o->start_msg), fmt, ap);
	}
	pthread_cond_broadcast(&o->cv);
}

void psl__start_failed(struct psl__office *o, int err, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&o->mu);
	va_start(ap, fmt);
	start_failed_locked(o, err, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&o->mu);
}

/* The same, for a caller that holds o->mu. */
void psl__start_failed_held(struct psl__office *o, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	start_failed_locked(o, err, fmt, ap);
	va_end(ap);
}

/* "the node list (201 nodes, 111064 bytes)" */
static const char *what_desc(struct psl__office *o, int cmd, const struct psl__ctl_sent *s,
			     char *buf, size_t len)
{
	bool sched = o->role == PSL_SCHEDULER;
	size_t bytes = s ? s->len : 0;

	if (cmd == PSL_CMD_ADD_NODE && sched)
		snprintf(buf, len, "the node list (%d nodes, %zu bytes)", s ? s->node_size : 0,
			 bytes);
	else if (cmd == PSL_CMD_ADD_NODE)
		snprintf(buf, len, "this node's registration (%zu bytes)", bytes);
	else if ((cmd == PSL_CMD_BARRIER || cmd == PSL_CMD_INSTANCE_BARRIER) && !sched)
		snprintf(buf, len, "a barrier request (%s, group %d)", psl__cmd_name(cmd),
			 s ? s->group : 0);
	else if (cmd == PSL_CMD_BARRIER || cmd == PSL_CMD_INSTANCE_BARRIER)
		snprintf(buf, len, "the release of a barrier (%s)", psl__cmd_name(cmd));
	else if (cmd == PSL_CMD_HEARTBEAT && sched && s && s->node_size > 1)
		snprintf(buf, len, "the news of a lost node (HEARTBEAT)");
	else
		snprintf(buf, len, "a %s message (%zu bytes)", psl__cmd_name(cmd), bytes);
	return buf;
}

/* Scheduler: one send of the node list completed (status 0) or failed. */
static void list_send_done(struct psl__office *o, int status, const char *what, const char *to,
			   const char *why)
{
	pthread_mutex_lock(&o->mu);
	if (o->list_pending > 0)
		o->list_pending--;
	if (status)
		psl__start_failed_held(o, -ECONNABORTED,
				       "cannot send %s to %s: %s; the job's start stops here",
				       what, to, why);
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

/* Scheduler: a node will wait for what could not reach it; the timer tells
 * it and declares it lost (not from here: this may be a van's thread). */
static void mark_undelivered(struct psl__office *o, int id, int cmd, int status)
{
	if (id < 8 || id > o->max_id || !o->peers)
		return;
	pthread_mutex_lock(&o->mu);
	if (!o->peers[id].undeliv_err) {
		o->peers[id].undeliv_err = status;
		o->peers[id].undeliv_cmd = cmd;
	}
	pthread_cond_broadcast(&o->timer_cv);
	pthread_mutex_unlock(&o->mu);
}

/* Node: a barrier request that did not go fails the barrier that waits. */
static void barrier_failed(struct psl__office *o, const char *what, const char *why)
{
	pthread_mutex_lock(&o->mu);
	if (!o->barrier_err) {
		o->barrier_err = -ECONNABORTED;
		snprintf(o->barrier_msg, sizeof(o->barrier_msg), "cannot send %s to the scheduler: %s",
			 what, why);
	}
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

/* Messages whose loss nobody waits for (the heartbeat timeout and the
 * resender deal with them): logged, rate-limited, nothing more. */
static bool only_logged(struct psl__office *o, int cmd)
{
	return cmd == PSL_CMD_ACK || cmd == PSL_CMD_TERMINATE ||
	       (cmd == PSL_CMD_HEARTBEAT && o->role != PSL_SCHEDULER);
}

/* "Message too long (van: cannot send a meta of ... PS_ZMQ_MAX_MSG_MB ...)" */
static const char *reason(struct psl__office *o, const struct psl__ctl_sent *s, int status,
			  char *buf, size_t len)
{
	char van[256];
	if (s->van_said && psl__van_last_error(van, sizeof(van))[0])
		snprintf(buf, len, "%s (%s: %s)", strerror(-status), o->lib.ops->name, van);
	else
		snprintf(buf, len, "%s", strerror(-status));
	return buf;
}

/* Node: its registration did not go. The start fails with that (and says
 * it at ERROR, lifecycle.c) after a grace in which the van's own reason
 * (another van answered, a refused secret) may come and win. */
static void registration_failed(struct psl__office *o, int status, const char *what,
				const char *why)
{
	pthread_mutex_lock(&o->mu);
	if (!o->reg_send_err) {
		o->reg_send_err = status;
		o->reg_send_at_ms = psl__now_ms();
		snprintf(o->reg_send_msg, sizeof(o->reg_send_msg),
			 "cannot contact the scheduler at %s:%d (DMLC_PS_ROOT_URI, "
			 "DMLC_PS_ROOT_PORT): cannot send it %s: %s",
			 o->cfg.root_uri, o->cfg.root_port, what, why);
	}
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

/* A send nobody waits for any more: the final barrier was released (the
 * peer may have left as soon as it had its release, before the van saw this
 * send complete), or the van cancelled it because this node is closing. A
 * node's request of its final barrier, and its heartbeats while it waits
 * there, are judged by the barrier's waiting loop instead (barrier.c: its
 * release may be on its way while the scheduler, released, already left;
 * a scheduler really lost fails the barrier there). */
static bool shutting_down(struct psl__office *o, const struct psl__ctl_sent *s, int status)
{
	bool closing;
	pthread_mutex_lock(&o->mu);
	closing = o->final_released ||
		  (o->leaving && o->role != PSL_SCHEDULER &&
		   ((s->group == PSL_GROUP_ALL && s->cmd == PSL_CMD_INSTANCE_BARRIER) ||
		    s->cmd == PSL_CMD_HEARTBEAT)) ||
		  ((status == -ECANCELED || status == -ESHUTDOWN) &&
		   (o->state == PSL__FINALIZING || o->state == PSL__STOPPED));
	pthread_mutex_unlock(&o->mu);
	return closing;
}

/* Scheduler: the start is over (an ADD_NODE now tells of a recovered
 * node, recovery.c: one that does not go is undelivered, not a failed
 * start). */
static bool start_over(struct psl__office *o)
{
	bool over;
	pthread_mutex_lock(&o->mu);
	over = o->got_node_list;
	pthread_mutex_unlock(&o->mu);
	return over;
}

void psl__control_sent(struct psl__office *o, const struct psl__ctl_sent *s, int status)
{
	char what[96], to[128], why[400];

	if (o->role == PSL_SCHEDULER && s->cmd == PSL_CMD_ADD_NODE && !status) {
		list_send_done(o, 0, NULL, NULL, NULL);
		return;
	}
	if (!status)
		return;
	if (shutting_down(o, s, status)) {
		PSL_DBG("a %s message to node %d did not go at the job's end: %s",
			psl__cmd_name(s->cmd), s->recver, strerror(-status));
		return;
	}
	what_desc(o, s->cmd, s, what, sizeof(what));
	psl__node_desc(o, s->recver, to, sizeof(to));
	reason(o, s, status, why, sizeof(why));
	if (only_logged(o, s->cmd)) {
		PSL_LOG_LIMITED(PSL_LOG_ERROR, "cannot send %s to %s: %s", what, to, why);
		return;
	}
	if (o->role != PSL_SCHEDULER && s->cmd == PSL_CMD_ADD_NODE) {
		registration_failed(o, status, what, why);
		return;
	}
	PSL_ERR("cannot send %s to %s: %s", what, to, why);
	if (o->role == PSL_SCHEDULER && s->cmd == PSL_CMD_ADD_NODE && !start_over(o))
		list_send_done(o, status, what, to, why);
	else if (o->role == PSL_SCHEDULER)
		mark_undelivered(o, s->recver, s->cmd, status);
	else if (s->cmd == PSL_CMD_BARRIER || s->cmd == PSL_CMD_INSTANCE_BARRIER)
		barrier_failed(o, what, why);
}

/* Scheduler: TERMINATE with PSL__ABORT_TAG, err and why to node id (a
 * failure of it is only logged). */
static void send_abort(struct psl__office *o, int id, int err, const char *why)
{
	char body[1024];
	struct psl__meta m;

	psl__meta_init(&m);
	m.cmd = PSL_CMD_TERMINATE;
	m.recver = id;
	m.body = body;
	m.body_size = snprintf(body, sizeof(body), "%s%d: %s", PSL__ABORT_TAG, err, why);
	if (m.body_size >= (int)sizeof(body))
		m.body_size = (int)sizeof(body) - 1;
	psl__send_control(o, &m, true);
}

void psl__control_abort_nodes(struct psl__office *o, int err, const char *why)
{
	int i, n, *ids;

	if (o->role != PSL_SCHEDULER || !o->reg)
		return;
	pthread_mutex_lock(&o->mu);
	n = o->list_connected;
	ids = malloc(sizeof(int) * (size_t)(n ? n : 1));
	for (i = 0; ids && i < n; i++)
		ids[i] = o->reg[i].id;
	pthread_mutex_unlock(&o->mu);
	if (!ids)
		return;
	for (i = 0; i < n; i++)
		send_abort(o, ids[i], err, why);
	if (n)
		PSL_INFO("told the %d node(s) the scheduler reached that the job stops", n);
	free(ids);
}

void psl__control_undeliv_tick(struct psl__office *o)
{
	int id;

	for (id = 8; id <= o->max_id; id++) {
		char what[96], why[256];
		int err, cmd;
		pthread_mutex_lock(&o->mu);
		err = o->peers[id].undeliv_err;
		cmd = o->peers[id].undeliv_cmd;
		o->peers[id].undeliv_err = 0;
		pthread_mutex_unlock(&o->mu);
		if (!err)
			continue;
		what_desc(o, cmd, NULL, what, sizeof(what));
		snprintf(why, sizeof(why), "the scheduler cannot send this node %s: %s", what,
			 strerror(-err));
		send_abort(o, id, -ECONNABORTED, why);
		snprintf(why, sizeof(why), "cannot send it %s: %s", what, strerror(-err));
		psl__node_lost(o, id, -ECONNABORTED, why);
	}
}

/* "pslite-abort: -90: reason" -> err and reason */
static int parse_abort(const struct psl__meta *m, char *why, size_t len)
{
	int tag = (int)strlen(PSL__ABORT_TAG), n = m->body_size - tag, err = 0, used = 0;
	char text[1024];

	if (n < 0)
		n = 0;
	if (n >= (int)sizeof(text))
		n = (int)sizeof(text) - 1;
	memcpy(text, m->body + tag, (size_t)n);
	text[n] = 0;
	if (sscanf(text, "%d: %n", &err, &used) < 1 || err >= 0 || err < -4095) {
		err = -ECONNABORTED;
		used = 0;
	}
	snprintf(why, len, "%s", text + used);
	return err;
}

void psl__control_take_abort(struct psl__office *o, const struct psl__meta *m)
{
	char why[1024], d[96];
	int err = parse_abort(m, why, sizeof(why));
	bool starting;

	pthread_mutex_lock(&o->mu);
	starting = o->state == PSL__STARTING && !o->got_node_list;
	/* the job's loss is set with the barrier's error: woken by it, the
	 * final barrier fails and finalize may go on before psl__node_lost
	 * below runs, which then finds the node no longer running and does
	 * nothing (psl_job_lost said 0: a node told to stop exited 0) */
	if (!starting && !o->job_lost_err) {
		o->job_lost_err = -ENOLINK;
		snprintf(o->job_lost_msg, sizeof(o->job_lost_msg), "lost %s: %.200s",
			 psl__node_desc(o, 1, d, sizeof(d)), why);
	}
	if (!starting && !o->barrier_err) {
		o->barrier_err = err;
		snprintf(o->barrier_msg, sizeof(o->barrier_msg), "the scheduler stopped the job: %.700s",
			 why);
		pthread_cond_broadcast(&o->cv);
	}
	pthread_mutex_unlock(&o->mu);
	if (starting) {
		psl__start_failed(o, err, "the scheduler at %s:%d stopped the job's start: %s",
				  o->cfg.root_uri, o->cfg.root_port, why);
		return;
	}
	psl__node_lost(o, 1, err, why);
}

/* ------------------------------------------------------------ sending -- */

/* A control message in flight: its outcome goes to psl__control_sent. */
struct ctl_ref {
	struct psl__sendref ref;
	struct psl__ctl_sent what;
	unsigned van_errors; /* the van's ERROR count when it was sent */
	struct psl__office *o; /* the node that sent it */
};

static void ctl_done(struct psl__sendref *ref, int status)
{
	struct ctl_ref *c = (struct ctl_ref *)ref;
	c->what.van_said = status && psl__van_errors() != c->van_errors;
	psl__control_sent(c->o, &c->what, status);
	free(c);
}

int psl__send_control(struct psl__office *o, struct psl__meta *m, bool ts_next)
{
	struct ctl_ref *c = malloc(sizeof(*c));
	if (ts_next)
		m->timestamp = atomic_fetch_add(&o->van_ts, 1);
	if (!c) {
		struct psl__ctl_sent w = {m->cmd, m->recver, m->barrier_group, m->node_size,
					  m->request, psl__meta_size(m), false};
		psl__control_sent(o, &w, -ENOMEM);
		return -ENOMEM;
	}
	c->ref.done = ctl_done;
	c->what = (struct psl__ctl_sent){m->cmd, m->recver, m->barrier_group, m->node_size,
					 m->request, psl__meta_size(m), false};
	c->van_errors = psl__van_errors();
	c->o = o;
	return psl__send(o, m, NULL, 0, &c->ref);
}
