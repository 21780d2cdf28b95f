/* PS_RESEND with PS_RECOVERY: the data requests in flight to a server or
 * worker that is lost wait for the node that takes its place, and are sent
 * to it again once it is connected (the resender keeps each one until its
 * response, resender.c). A replacement that does not come within the bound
 * (PS_RECOVERY_WAIT, else the scheduler's wait for a newcomer) fails them
 * with the loss's error, as without PS_RESEND. docs/recovery.md. */
#include "config.h"

#include <stdio.h>

#include "control_int.h"
#include "customer.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"

static int hold_bound_s(struct psl__office *o)
{
	return o->cfg.recovery_wait_s > 0 ? o->cfg.recovery_wait_s : psl__recovery_bound_s(o);
}

bool psl__recovery_holds(struct psl__office *o, int id)
{
	bool on = o->cfg.resend && o->cfg.recovery && o->role != PSL_SCHEDULER && id >= 8 &&
		  id != o->my_id;
	if (!on)
		return false;
	pthread_mutex_lock(&o->mu);
	on = o->state == PSL__READY && !o->peers[1].dead;
	pthread_mutex_unlock(&o->mu);
	return on;
}

void psl__recovery_hold(struct psl__office *o, int id, int err)
{
	char d[96];
	int n = psl__resender_hold(o, id);

	pthread_mutex_lock(&o->mu);
	o->peers[id].held = true;
	o->peers[id].held_err = err;
	pthread_mutex_unlock(&o->mu);
	if (n)
		PSL_INFO("%d request(s) in flight to lost %s wait up to %d s for a node to take its place "
		 "(PS_RESEND, PS_RECOVERY)",
		 n, psl__node_desc(o, id, d, sizeof(d)), hold_bound_s(o));
}

/* With o->mu held: whether node id's held requests are to go (0: not held). */
static bool unhold_locked(struct psl__office *o, int id)
{
	bool was = o->peers[id].held;
	o->peers[id].held = false;
	return was;
}

void psl__recovery_resend(struct psl__office *o, int id)
{
	char d[96];
	bool held;
	int n;

	pthread_mutex_lock(&o->mu);
	held = unhold_locked(o, id);
	pthread_mutex_unlock(&o->mu);
	if (!held || !(n = psl__resender_resend_held(o, id)))
		return;
	PSL_INFO("sent %d request(s) in flight to the lost node again to %s, which took its place",
		 n, psl__node_desc(o, id, d, sizeof(d)));
}

void psl__recovery_hold_tick(struct psl__office *o, int64_t now)
{
	int id, err;
	char d[96];

	for (id = 8; id <= o->max_id; id++) {
		pthread_mutex_lock(&o->mu);
		err = o->peers[id].held_err;
		if (!o->peers[id].held || !o->peers[id].dead ||
		    now - o->peers[id].down_at_ms <= hold_bound_s(o) * 1000LL || !unhold_locked(o, id))
			err = 0;
		pthread_mutex_unlock(&o->mu);
		if (!err)
			continue;
		PSL_ERR("no node took the place of lost %s within %d s: the requests that were in "
			"flight to it fail with \"%s\" (restart it with the same role%s)",
			psl__node_desc(o, id, d, sizeof(d)), hold_bound_s(o), psl_strerror(err),
			o->cfg.preferred_rank >= 0 ? " and DMLC_RANK" : "");
		psl__resender_forget(o, id);
		psl__customers_node_lost(o, id, err);
	}
}
