/* What a lost node means to this node: every part of the core that keeps
 * something for a peer lets go of it (psl__node_lost, through the node
 * table's loss hook, which psl__host_init sets), and whether a request may
 * be sent to a node now. */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "control.h"
#include "control_int.h"
#include "customer.h"
#include "ipc.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"

int psl__send_check(struct psl__office *o, int id)
{
	int rc = 0;
	if (id < 1 || id > o->max_id || !o->peers)
		return -EHOSTDOWN;
	pthread_mutex_lock(&o->mu);
	if (o->role != PSL_SCHEDULER && o->peers[1].dead)
		rc = -ENOLINK;
	else if (o->peers[id].dead)
		rc = -EHOSTDOWN;
	pthread_mutex_unlock(&o->mu);
	if (rc == -EHOSTDOWN && o->cfg.recovery_wait_s > 0 && o->role != PSL_SCHEDULER)
		rc = psl__recovery_wait(o, id);
	return rc;
}

void psl__loss_handle(struct psl__office *o, int id, int err, const char *why)
{
	char d[96];
	bool leaving, cut, hold;
	if (id < 1 || id > o->max_id)
		return;
	psl__ipc_peer_lost(o, id);
	leaving = psl__control_node_leaving(o, id);
	hold = !leaving && psl__recovery_holds(o, id);
	pthread_mutex_lock(&o->mu);
	if (o->peers[id].dead || (o->state != PSL__READY && o->state != PSL__STARTING)) {
		pthread_mutex_unlock(&o->mu);
		return;
	}
	/* without the scheduler a running node cannot go on (no barriers, no
	 * finalize, no news of lost nodes): what waits on anyone fails */
	cut = id == 1 && o->role != PSL_SCHEDULER && o->state == PSL__READY && !leaving;
	o->peers[id].dead = true;
	o->peers[id].down_at_ms = psl__now_ms();
	if (!leaving && !o->job_lost_err) {
		o->job_lost_err = cut || id == 1 ? -ENOLINK : err ? err : -EHOSTDOWN;
		snprintf(o->job_lost_msg, sizeof(o->job_lost_msg), "lost %s: %s",
			 psl__node_desc(o, id, d, sizeof(d)), why);
	}
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	if (leaving)
		PSL_DBG("%s left: %s", psl__node_desc(o, id, d, sizeof(d)), why);
	else if (cut)
		PSL_ERR("lost %s: %s; every request fails now with \"%s\"",
			psl__node_desc(o, id, d, sizeof(d)), why, psl_strerror(-ENOLINK));
	else if (hold)
		PSL_ERR("lost %s: %s; the requests in flight to it wait for its replacement",
			psl__node_desc(o, id, d, sizeof(d)), why);
	else
		PSL_ERR("lost %s: %s; requests waiting on it fail with \"%s\"",
			psl__node_desc(o, id, d, sizeof(d)), why, psl_strerror(err));
	/* the van lets go of it: what is in flight from it is dropped (a frozen
	 * server's rendezvous into a worker's buffers, over ucx, held the
	 * worker's requests until the server woke up) */
	if (!leaving && id != o->my_id && o->van && o->lib.ops && o->lib.ops->disconnect)
		o->lib.ops->disconnect(o->van, id);
	if (hold) {
		psl__recovery_hold(o, id, err ? err : -EHOSTDOWN);
	} else {
		psl__resender_forget(o, id);
		psl__customers_node_lost(o, id, err);
	}
	if (cut)
		psl__customers_node_lost(o, 0, -ENOLINK);
	/* the others hear of the loss before a barrier it releases (the final
	 * one, say) lets them go: they must not take it for a node that left */
	if (o->role == PSL_SCHEDULER && !leaving)
		psl__control_announce_lost(o, id, why);
	psl__control_forget_node(o, id);
	if (o->role == PSL_SCHEDULER && !leaving && o->cfg.recovery)
		psl__recovery_retry(o);
}
