/* Barriers: a node asks the scheduler and waits for the release; the
 * scheduler counts who arrived per group and kind and releases the group
 * when every live member is in, including the final barrier of finalize. */
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

static int arrived_index(int cmd)
{
	return cmd == PSL_CMD_INSTANCE_BARRIER ? 1 : 0;
}

static void release_local(struct psl__office *o, int cmd, int g)
{
	pthread_mutex_lock(&o->mu);
	if (cmd == PSL_CMD_INSTANCE_BARRIER && g == PSL_GROUP_ALL && o->leaving)
		o->final_released = true;
	o->barrier_gen++;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

/* Scheduler: since when a barrier of kind over group g has had arrivals, and
 * when psl__barrier_watch last said so (ms, 0 = none). */
static int64_t barrier_since[8][2], barrier_warned[8][2];

/* Scheduler: who arrived at a barrier of kind (0 BARRIER, 1 INSTANCE) over
 * group g, indexed by node id. */
static bool *arrived(struct psl__office *o, int kind, int g)
{
	return o->barrier_senders[g] + (kind ? o->max_id + 1 : 0);
}

/* Scheduler, with o->mu held: how long a barrier waits for the replacement
 * of a member lost while it was in progress (PS_RECOVERY): PS_RECOVERY_WAIT,
 * else as long as a newcomer waits for a place. */
static int awaited_s(struct psl__office *o)
{
	return o->cfg.recovery_wait_s > 0 ? o->cfg.recovery_wait_s : psl__recovery_bound_s(o);
}

/* Scheduler, with o->mu held: whether a barrier still waits for lost node
 * id, whose replacement may come and arrive in its place. */
static bool awaited_locked(struct psl__office *o, int id)
{
	return o->cfg.recovery && !o->final_released && o->state == PSL__READY &&
	       psl__now_ms() - o->peers[id].down_at_ms <= awaited_s(o) * 1000LL;
}

/* The most members a group has (psl__group_members' room). */
static int members_max(struct psl__office *o)
{
	return o->cfg.num_workers + o->cfg.num_servers + 1;
}

/* Scheduler, with o->mu held, instance groups (G > 1): whether member id
 * of group g is in the barrier, of either kind: it asked itself (an
 * INSTANCE_BARRIER: StepMesh's model, a process of one instance), or the
 * process that holds its whole instance group asked once for all of them
 * (a group-level BARRIER, from any one of the group's instances: C++
 * ps-lite's Postoffice::Barrier, and psl_barrier under psl_start_group).
 * Counting both kinds as one barrier lets the two kinds of process meet. */
static bool grouped_in_locked(struct psl__office *o, int g, int id)
{
	int G = o->cfg.group_size, r, i;
	if (arrived(o, 0, g)[id] || arrived(o, 1, g)[id])
		return true;
	if (id == 1)
		return false;
	r = psl_id_to_rank(id);
	for (i = r - r % G; i < r - r % G + G; i++) {
		int sib = psl__is_server_id(id) ? psl_server_rank_to_id(i) : psl_worker_rank_to_id(i);
		if (sib <= o->max_id && arrived(o, 0, g)[sib])
			return true;
	}
	return false;
}

/* Scheduler, with o->mu held: whether the barrier of kind over group g may
 * be released: every live member is in (a lost one whose replacement is
 * still awaited is not), and someone arrived. With instance groups the two
 * kinds are one barrier. */
static bool ready_locked(struct psl__office *o, int kind, int g, const int *ids, int n)
{
	bool any = false, grouped = o->cfg.group_size > 1;
	int i;
	for (i = 0; i < n; i++) {
		if (grouped ? grouped_in_locked(o, g, ids[i]) : arrived(o, kind, g)[ids[i]])
			any = true;
		else if (!o->peers[ids[i]].dead || awaited_locked(o, ids[i]))
			return false;
	}
	return any;
}

/* Scheduler, with o->mu held: moves the nodes that arrived at the barrier
 * of kind over group g into out (forgetting them there); returns how many. */
static int take_locked(struct psl__office *o, int kind, int g, int *out)
{
	int n = psl__group_members(o, g, out), i, k = 0;
	bool *a = arrived(o, kind, g);
	barrier_since[g][kind] = 0; /* released (see psl__barrier_watch) */
	for (i = 0; i < n; i++) {
		int id = out[i];
		if (a[id]) {
			out[k++] = id; /* k <= i: compacting in place is safe */
			a[id] = false;
		}
	}
	return k;
}

/* Scheduler, with o->mu held: if the barrier of kind over group g may be
 * released, returns the number of its recipients written into out (room
 * for two lists, members_buf); with instance groups, *n_other recipients of
 * the other kind go to out + members_max(). */
static int check_release_locked(struct psl__office *o, int kind, int g, int *out, int *n_other)
{
	int n = psl__group_members(o, g, out);
	*n_other = 0;
	if (!ready_locked(o, kind, g, out, n))
		return 0;
	if (o->cfg.group_size > 1)
		*n_other = take_locked(o, !kind, g, out + members_max(o));
	return take_locked(o, kind, g, out);
}

bool psl__control_final_released(struct psl__office *o)
{
	bool r;
	pthread_mutex_lock(&o->mu);
	r = o->final_released;
	pthread_mutex_unlock(&o->mu);
	return r;
}

bool psl__control_node_leaving(struct psl__office *o, int id)
{
	(void)id;
	return psl__control_final_released(o);
}

/* A node waiting in its final barrier may see a peer leave before its own
 * release arrives (they travel on different connections): such a loss is
 * judged after a grace period, by the barrier's waiting loop. With
 * PS_RESEND the release may itself have been lost and be on its way again:
 * the grace then covers a few of its resends. */
#define LEAVE_GRACE_MS 1500

static int64_t leave_grace_ms(struct psl__office *o)
{
	int64_t g = LEAVE_GRACE_MS;
	if (o->cfg.resend && 3 * (int64_t)o->cfg.resend_timeout_ms + 500 > g)
		g = 3 * (int64_t)o->cfg.resend_timeout_ms + 500;
	return g;
}

static void judge_pending_losses(struct psl__office *o, bool released)
{
	int id;
	int64_t now = psl__now_ms(), grace = leave_grace_ms(o);
	for (id = 1; id <= o->max_id; id++) {
		int64_t t;
		int err;
		pthread_mutex_lock(&o->mu);
		t = o->peers[id].down_pending_ms;
		err = o->peers[id].down_err;
		if (t && (released || now - t >= grace))
			o->peers[id].down_pending_ms = 0;
		pthread_mutex_unlock(&o->mu);
		if (!t)
			continue;
		if (released) {
			char d[96];
			PSL_DBG("%s left", psl__node_desc(o, id, d, sizeof(d)));
		} else if (now - t >= grace) {
			psl__node_lost(o, id, err, "connection lost while this node waited in the final "
						"barrier");
		}
	}
}

static void send_releases(struct psl__office *o, int cmd, int g, const int *ids, int n,
			  int customer_id)
{
	int i;
	if (cmd == PSL_CMD_INSTANCE_BARRIER && g == PSL_GROUP_ALL && o->leaving) {
		pthread_mutex_lock(&o->mu);
		o->final_released = true;
		pthread_mutex_unlock(&o->mu);
	}
	for (i = 0; i < n; i++) {
		struct psl__meta m;
		if (ids[i] == 1) {
			release_local(o, cmd, g);
			continue;
		}
		psl__meta_init(&m);
		m.cmd = cmd;
		m.barrier_group = g;
		m.request = false;
		m.app_id = 0;
		m.customer_id = customer_id;
		m.recver = ids[i];
		psl__send_control(o, &m, true); /* (a failure: psl__control_sent) */
	}
	PSL_DBG("barrier (%s, group %d) released %d node(s)", psl__cmd_name(cmd), g, n);
}

static int kind_cmd(int kind)
{
	return kind ? PSL_CMD_INSTANCE_BARRIER : PSL_CMD_BARRIER;
}

/* Room for two lists of group members (check_release_locked's out and
 * other), NULL when out of memory. */
static int *members_buf(struct psl__office *o)
{
	return malloc(2 * sizeof(int) * (size_t)members_max(o));
}

/* Sends the releases check_release_locked found: n of kind to ids, then
 * n_other of the other kind to ids + members_max() (instance groups). */
static void send_found(struct psl__office *o, int kind, int g, int *ids, int n, int n_other,
		       int customer_id)
{
	if (n)
		send_releases(o, kind_cmd(kind), g, ids, n, customer_id);
	if (n_other)
		send_releases(o, kind_cmd(!kind), g, ids + members_max(o), n_other, customer_id);
}

static void scheduler_arrive(struct psl__office *o, int sender, int g, int cmd, int customer_id)
{
	int kind = arrived_index(cmd), n, n_other, *ids = members_buf(o);

	if (!ids)
		return;
	pthread_mutex_lock(&o->mu);
	arrived(o, kind, g)[sender] = true;
	o->barrier_last_customer[g] = customer_id;
	n = check_release_locked(o, kind, g, ids, &n_other);
	pthread_mutex_unlock(&o->mu);
	send_found(o, kind, g, ids, n, n_other, customer_id);
	free(ids);
}

/* Scheduler, with o->mu held: the first member of group g that a barrier
 * of kind waited for in vain (lost, not replaced in time), or 0. */
static int given_up_locked(struct psl__office *o, int kind, int g, int *ids)
{
	int i, n = psl__group_members(o, g, ids);
	bool *a = arrived(o, kind, g), any = false;
	for (i = 0; i < n; i++)
		any |= a[ids[i]];
	for (i = 0; any && i < n; i++)
		if (!a[ids[i]] && o->peers[ids[i]].dead && o->cfg.recovery)
			return ids[i];
	return 0;
}

void psl__control_forget_node(struct psl__office *o, int id)
{
	int g, kind, n, n_other, *ids = members_buf(o);
	(void)id;
	if (o->role != PSL_SCHEDULER || !ids) {
		free(ids);
		return;
	}
	for (g = 1; g <= 7; g++) {
		for (kind = 0; kind < 2; kind++) {
			int cust;
			int gone;
			char d[96];
			pthread_mutex_lock(&o->mu);
			gone = o->barrier_senders[g] ? given_up_locked(o, kind, g, ids) : 0;
			n = n_other = 0;
			if (o->barrier_senders[g])
				n = check_release_locked(o, kind, g, ids, &n_other);
			cust = o->barrier_last_customer[g];
			pthread_mutex_unlock(&o->mu);
			if (n + n_other && gone)
				PSL_WARN("barrier (%s, group %d) released without lost %s: no node took "
					 "its place within %d s (PS_RECOVERY)",
					 psl__cmd_name(kind_cmd(kind)), g,
					 psl__node_desc(o, gone, d, sizeof(d)), awaited_s(o));
			send_found(o, kind, g, ids, n, n_other, cust);
		}
	}
	free(ids);
}

int psl__control_barrier_arrive(struct psl__office *o, int customer_id, int group, int cmd,
				unsigned *gen)
{
	int members;
	int *ids;

	if (group < 1 || group > 7)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "barrier: group %d is no node group: pass "
				"1 to 7 (PSL_GROUP_SCHEDULER, _SERVERS, _WORKERS or their sum)",
				group);
	ids = malloc(sizeof(int) * (size_t)members_max(o));
	if (!ids)
		return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "barrier: out of memory");
	members = psl__group_members(o, group, ids);
	free(ids);
	if (members > 1 && !psl__group_has(o, group, o->my_id))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "barrier: this node (%s) is not in group "
				"%d: a node waits only in a barrier of a group it belongs to",
				psl__role_name(o->role), group);
	/* (a group-level BARRIER over one instance group has nobody to wait
	 * for, as in C++ ps-lite) */
	if (members <= 1 ||
	    (cmd == PSL_CMD_BARRIER && o->cfg.group_size > 1 && members <= o->cfg.group_size))
		return 1;
	pthread_mutex_lock(&o->mu);
	*gen = o->barrier_gen;
	pthread_mutex_unlock(&o->mu);
	if (o->role == PSL_SCHEDULER) {
		scheduler_arrive(o, 1, group, cmd, customer_id);
	} else {
		struct psl__meta m;
		psl__meta_init(&m);
		m.cmd = cmd;
		m.barrier_group = group;
		m.request = true;
		m.app_id = 0;
		m.customer_id = customer_id;
		m.recver = 1;
		return psl__send_control(o, &m, true);
	}
	return 0;
}

/* Threads of a process that holds its whole group asking at once (ps-lite's
 * test_benchmark asks once per worker thread) go to the scheduler once: C++
 * ps-lite's scheduler counts requests, and would take a second one for
 * another process's. With o->mu: whether a request of group is out, and
 * the release generation it waits for. */
static bool shared_out[8];
static unsigned shared_gen[8];

int psl__control_barrier_shared(struct psl__office *o, int customer_id, int group, unsigned *gen)
{
	int rc;
	if (group < 1 || group > 7)
		return psl__control_barrier_arrive(o, customer_id, group, PSL_CMD_BARRIER, gen);
	pthread_mutex_lock(&o->mu);
	if (shared_out[group] && o->barrier_gen == shared_gen[group]) {
		*gen = shared_gen[group];
		pthread_mutex_unlock(&o->mu);
		return 0;
	}
	shared_out[group] = true;
	shared_gen[group] = o->barrier_gen;
	pthread_mutex_unlock(&o->mu);
	rc = psl__control_barrier_arrive(o, customer_id, group, PSL_CMD_BARRIER, gen);
	pthread_mutex_lock(&o->mu);
	shared_out[group] = rc == 0;
	shared_gen[group] = *gen;
	pthread_mutex_unlock(&o->mu);
	return rc;
}

int psl__control_barrier_wait(struct psl__office *o, int group, unsigned gen)
{
	int rc = 0;
	pthread_mutex_lock(&o->mu);
	while (o->barrier_gen == gen) {
		if (o->barrier_err) { /* a request that did not go, the scheduler's abort */
			rc = PSL_FAIL(o->barrier_err, PSL_LOG_ERROR, "barrier (group %d) failed: %s",
				      group, o->barrier_msg);
			break;
		}
		if (o->role != PSL_SCHEDULER && o->peers[1].dead &&
		    psl__now_ms() - o->peers[1].down_at_ms > 2000) {
			rc = -ECONNRESET;
			break;
		}
		if (o->leaving) {
			pthread_mutex_unlock(&o->mu);
			judge_pending_losses(o, false);
			pthread_mutex_lock(&o->mu);
		}
		psl__cond_wait_ms(&o->cv, &o->mu, 200);
	}
	pthread_mutex_unlock(&o->mu);
	if (o->leaving)
		judge_pending_losses(o, o->final_released);
	if (rc == -ECONNRESET)
		PSL_FAIL(rc, PSL_LOG_ERROR, "barrier (group %d) failed: the scheduler at %s:%d was "
			 "lost", group, o->cfg.root_uri, o->cfg.root_port);
	return rc;
}

void psl__handle_barrier(struct psl__office *o, const struct psl__meta *m)
{
	if (o->role != PSL_SCHEDULER) {
		if (m->request || m->sender != 1) {
			PSL_WARN("ignored a %s from node %d: only the scheduler releases barriers",
				 psl__cmd_name(m->cmd), m->sender);
			return;
		}
		if (o->cfg.resend)
			psl__resender_released(o, m->cmd);
		/* a release's barrier_group is unspecified (a C++ scheduler leaves it
		 * uninitialised, docs/wire.md 4.3, 7.2); an INSTANCE_BARRIER is always
		 * over every node (start-up and finalize) */
		release_local(o, m->cmd, m->cmd == PSL_CMD_INSTANCE_BARRIER ? PSL_GROUP_ALL
									 : m->barrier_group);
		return;
	}
	if (!m->request) {
		PSL_WARN("ignored a %s response from node %d", psl__cmd_name(m->cmd), m->sender);
		return;
	}
	if (m->barrier_group < 1 || m->barrier_group > 7 ||
	    !psl__group_has(o, m->barrier_group, m->sender)) {
		PSL_WARN("ignored a %s from node %d for group %d: not a member of that group",
			 psl__cmd_name(m->cmd), m->sender, m->barrier_group);
		return;
	}
	scheduler_arrive(o, m->sender, m->barrier_group, m->cmd, m->customer_id);
}

/*
 * Scheduler, from the timer: a barrier that some nodes reached and others
 * have not for PS_BARRIER_WARN_S seconds is said once, naming the group and
 * the nodes missing, and again every PS_BARRIER_WARN_S seconds: nodes that
 * pass different barriers (a worker with one start-up barrier against
 * servers with two) would otherwise wait for ever in silence.
 */
void psl__barrier_watch(struct psl__office *o, int64_t now)
{
	static const char *const gname[8] = {"",
					     "scheduler",
					     "servers",
					     "servers+scheduler",
					     "workers",
					     "workers+scheduler",
					     "workers+servers",
					     "workers+servers+scheduler"};
	int64_t limit = o->cfg.barrier_warn_s * 1000LL;
	int g, kind, i, n, *ids;

	ids = malloc(sizeof(int) * (size_t)members_max(o));
	if (!ids)
		return;
	for (g = 1; g <= 7; g++) {
		for (kind = 0; kind < 2; kind++) {
			char missing[512], d[96];
			size_t len = 0;
			int nin = 0, nmiss = 0;
			long long waited = 0;
			bool *a;

			missing[0] = 0;
			pthread_mutex_lock(&o->mu);
			if (!o->barrier_senders[g]) {
				pthread_mutex_unlock(&o->mu);
				continue;
			}
			a = arrived(o, kind, g);
			n = psl__group_members(o, g, ids);
			for (i = 0; i < n; i++)
				nin += a[ids[i]];
			if (!nin) {
				barrier_since[g][kind] = barrier_warned[g][kind] = 0;
			} else if (!barrier_since[g][kind]) {
				barrier_since[g][kind] = now;
				barrier_warned[g][kind] = 0;
			} else if (now - barrier_since[g][kind] >= limit &&
				   now - barrier_warned[g][kind] >= limit) {
				barrier_warned[g][kind] = now;
				waited = (now - barrier_since[g][kind]) / 1000;
				for (i = 0; i < n; i++) {
					if (a[ids[i]])
						continue;
					nmiss++;
					if (len < sizeof(missing) - 1)
						len += (size_t)snprintf(
							missing + len, sizeof(missing) - len, "%s%s",
							nmiss > 1 ? ", " : "",
							psl__node_desc(o, ids[i], d, sizeof(d)));
				}
			}
			pthread_mutex_unlock(&o->mu);
			if (nmiss)
				PSL_WARN("barrier (%s, group %d: %s) has waited %lld s: %d of %d "
					 "node(s) arrived, %d did not: %s (PS_BARRIER_WARN_S=%d)",
					 psl__cmd_name(kind_cmd(kind)),
					 g, gname[g], waited, nin, n, nmiss, missing,
					 o->cfg.barrier_warn_s);
		}
	}
	free(ids);
}

void psl__barrier_reset(void)
{
	memset(barrier_since, 0, sizeof(barrier_since));
	memset(barrier_warned, 0, sizeof(barrier_warned));
	memset(shared_out, 0, sizeof(shared_out));
}
