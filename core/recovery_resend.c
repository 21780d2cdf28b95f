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

#define po psl__po

static int hold_bound_s(void)
{
	return po.cfg.recovery_wait_s > 0 ? po.cfg.recovery_wait_s : psl__recovery_bound_s(psl__cur);
}

bool psl__recovery_holds(int id)
{
	bool on = po.cfg.resend && po.cfg.recovery && po.role != PSL_SCHEDULER && id >= 8 &&
		  id != po.my_id;
	if (!on)
		return false;
	pthread_mutex_lock(&po.mu);
	on = po.state == PSL__READY && !po.peers[1].dead;
	pthread_mutex_unlock(&po.mu);
	return on;
}

void psl__recovery_hold(int id, int err)
{
	char d[96];
	int n = psl__resender_hold(psl__cur, id);

	pthread_mutex_lock(&po.mu);
	po.peers[id].held = true;
	po.peers[id].held_err = err;
	pthread_mutex_unlock(&po.mu);
	if (n)
		PSL_INFO("%d request(s) in flight to lost %s wait up to %d s for a node to take its place "
		 "(PS_RESEND, PS_RECOVERY)",
		 n, psl__node_desc(psl__cur, id, d, sizeof(d)), hold_bound_s());
}

/* With po.mu held: whether node id's held requests are to go (0: not held). */
static bool unhold_locked(int id)
{
	bool was = po.peers[id].held;
	po.peers[id].held = false;
	return was;
}

void psl__recovery_resend(int id)
{
	char d[96];
	bool held;
	int n;

	pthread_mutex_lock(&po.mu);
	held = unhold_locked(id);
	pthread_mutex_unlock(&po.mu);
	if (!held || !(n = psl__resender_resend_held(psl__cur, id)))
		return;
	PSL_INFO("sent %d request(s) in flight to the lost node again to %s, which took its place",
		 n, psl__node_desc(psl__cur, id, d, sizeof(d)));
}

void psl__recovery_hold_tick(int64_t now)
{
	int id, err;
	char d[96];

	for (id = 8; id <= po.max_id; id++) {
		pthread_mutex_lock(&po.mu);
		err = po.peers[id].held_err;
		if (!po.peers[id].held || !po.peers[id].dead ||
		    now - po.peers[id].down_at_ms <= hold_bound_s() * 1000LL || !unhold_locked(id))
			err = 0;
		pthread_mutex_unlock(&po.mu);
		if (!err)
			continue;
		PSL_ERR("no node took the place of lost %s within %d s: the requests that were in "
			"flight to it fail with \"%s\" (restart it with the same role%s)",
			psl__node_desc(psl__cur, id, d, sizeof(d)), hold_bound_s(), psl_strerror(err),
			po.cfg.preferred_rank >= 0 ? " and DMLC_RANK" : "");
		psl__resender_forget(psl__cur, id);
		psl__customers_node_lost(psl__cur, id, err);
	}
}
