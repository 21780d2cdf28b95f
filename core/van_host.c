/* The core side of the van ABI: the callbacks a van calls (van_send.c
 * sends). Its receive callback checks every message before it is used and
 * hands it up to whom it is for: the control plane, a customer, the
 * resender. Above every other part of the core but start-up
 * (lifecycle.c), since it dispatches to them. */
#define _GNU_SOURCE 1 /* pthread_setaffinity_np, CPU_SET */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "control.h"
#include "control_int.h"
#include "customer.h"
#include "env.h"
#include "kv.h"
#include "ipc.h"
#include "log.h"
#include "postoffice.h"
#include "tracker.h"
#include "resender.h"
#include "van_host.h"

/* A van's warnings are mostly about what peers sent: rate-limited like the
 * core's, per format string (the van's call site). */
static void host_vlog(void *ctx, int level, const char *van, const char *fmt, va_list ap)
{
	static struct psl__ratelimit sites[64];
	psl__enter(ctx); /* the node whose van calls */
	if (level == PSL_VAN_LOG_ERROR)
		psl__van_note_error(fmt, ap);
	if (level > psl__log_level)
		return;
	if (level == PSL_VAN_LOG_WARN)
		psl__vlog_limited(&sites[((uintptr_t)fmt >> 3) % 64], level, van, fmt, ap);
	else
		psl__vlog(level, van, fmt, ap);
}

static const char *host_param(void *ctx, const char *name)
{
	psl__enter(ctx); /* the node whose van calls */
	psl__env_note_read(name); /* the van's setting: no compatibility WARN for it */
	return getenv(name);
}

static void host_send_done(void *ctx, void *cookie, int status)
{
	struct psl__sendref *ref = cookie;
	psl__enter(ctx); /* the node whose van calls */
	if (ref)
		ref->done(ref, status);
}

static void host_peer_event(void *ctx, int32_t id, int event, int err, const char *detail)
{
	struct psl__office *o = ctx;
	psl__enter(o); /* the node whose van calls */
	psl__control_peer_event(o, id, event, err, detail);
}

/* A node that takes a lost one's place (recovery.c) hears from the others
 * as soon as the scheduler told them of it, which may be before its own node
 * list arrives on another connection: until the list, a server or worker
 * takes data messages from any server or worker id of the job (they wait
 * for their customer, which exists only once psl_start returned). */
static bool early_peer(struct psl__office *o, int sender)
{
	bool early;
	if (o->role == PSL_SCHEDULER)
		return false;
	pthread_mutex_lock(&o->mu);
	early = o->state == PSL__STARTING && !o->got_node_list;
	pthread_mutex_unlock(&o->mu);
	return early && psl__group_has(o, PSL_GROUP_WORKERS | PSL_GROUP_SERVERS, sender);
}

/* Whether a message the van received from sender may be used: a node hears
 * only from registered peers of its job, never from its own id (it sends to
 * itself without the van), and the scheduler hears anonymous peers only for
 * registration (and the resender's ACK of the node list, which a node sends
 * before its connection has its new identity). Data from a peer declared
 * lost is stale (a host cut off and reconnected delivers what it sent before
 * the loss): it is not used until a node takes that place. Returns NULL or
 * why not. */
static const char *sender_refused(struct psl__office *o, int sender, int cmd)
{
	if (sender == PSL_EMPTY) {
		if (o->role == PSL_SCHEDULER &&
		    (cmd == PSL_CMD_ADD_NODE || cmd == PSL_CMD_ACK))
			return NULL;
		return o->role == PSL_SCHEDULER
			       ? "a peer without an id may only register"
			       : "not a node of this job (no id)";
	}
	if (sender == o->my_id)
		return "it claims this node's own id";
	if (sender == PSL_VAN_ID_SCHEDULER)
		return NULL; /* a server's or worker's scheduler */
	if (sender >= 8 && sender <= o->max_id && o->peers &&
	    !o->peers[sender].known && cmd == PSL_CMD_EMPTY && early_peer(o, sender))
		return NULL;
	if (sender < 8 || sender > o->max_id || !o->peers ||
	    !o->peers[sender].known)
		return o->role == PSL_SCHEDULER && !o->got_node_list
			       ? "not a node of this job (the scheduler has not assigned that id)"
			       : "not a node of this job";
	if (cmd == PSL_CMD_EMPTY && psl__node_dead(o, sender))
		return "it was declared lost: what it sent before (delivered late, after a cut) "
		       "is not used; a node that takes its place is heard";
	return NULL;
}

/* STEPMESH_BIND_CPU_CORE: the thread that delivers the van's messages (its
 * receive or progress thread: StepMesh binds its van's receive thread) is
 * bound to cfg.bind_cpu, once, when it first delivers. */
static void bind_receive_thread(struct psl__office *o)
{
	static __thread bool bound;
	static atomic_bool warned;
	int cpu = o->cfg.bind_cpu, rc;
	cpu_set_t set;

	if (bound)
		return;
	bound = true;
	CPU_ZERO(&set);
	if (cpu >= CPU_SETSIZE) {
		rc = EINVAL;
	} else {
		CPU_SET(cpu, &set);
		rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	if (rc && !atomic_exchange(&warned, true))
		PSL_WARN("STEPMESH_BIND_CPU_CORE=1: cannot bind the van's receive thread to CPU %d "
			 "(%s; this machine has %ld CPUs online): set STEPMESH_CPU_START_OFFSET, "
			 "STEPMESH_CPU_CORES_PER_GPU and STEPMESH_CPU_CORES_PER_SOCKET for it, or "
			 "STEPMESH_BIND_CPU_CORE=0",
			 cpu, strerror(rc), sysconf(_SC_NPROCESSORS_ONLN));
	else if (!rc)
		PSL_INFO("the van's receive thread is bound to CPU %d (STEPMESH_BIND_CPU_CORE=1)",
			 cpu);
}

/* PS_RESEND: ACKs what needs it; true for an ACK or a duplicate (nothing
 * more to do with it). */
static bool resend_filter(struct psl__office *o, const struct psl__meta *m)
{
	struct psl__meta ack;
	bool done;
	psl__meta_init(&ack);
	done = psl__resender_on_recv(o, m, &ack);
	if (ack.cmd == PSL_CMD_ACK)
		psl__send_control(o, &ack, false); /* (a failure is logged: psl__control_sent) */
	return done;
}

static void host_recv(void *ctx, struct psl_van_rmsg *raw)
{
	struct psl__office *o = ctx;
	struct psl__meta m;
	char why[256];
	int rc;
	psl__enter(o); /* the node whose van calls */

	if (o->cfg.bind && raw->release != psl__loop_release && !psl__driving)
		bind_receive_thread(o); /* (not a caller's thread that drives the van) */

	rc = psl__meta_decode(raw->meta, raw->meta_len, &m, why, sizeof(why));
	if (rc) {
		char d[96];
		PSL_WARN("dropped a malformed message from %s: %s",
			 psl__node_desc(o, raw->sender, d, sizeof(d)), why);
		psl__raw_release(raw);
		return;
	}
	if (raw->release != psl__loop_release) {
		const char *no = sender_refused(o, raw->sender, m.cmd);
		if (no) {
			char d[96];
			if (raw->sender == o->my_id)
				snprintf(d, sizeof(d), "node %d", raw->sender);
			else
				psl__node_desc(o, raw->sender, d, sizeof(d));
			PSL_WARN("dropped a message (%s) from %s: %s",
				 m.cmd == PSL_CMD_EMPTY ? "data" : psl__cmd_name(m.cmd), d, no);
			psl__meta_clear(&m);
			psl__raw_release(raw);
			return;
		}
	}
	m.sender = raw->sender;
	m.recver = o->my_id;
	if (psl__log_level >= PSL_LOG_TRACE)
		psl__trace_msg("from", &m, raw->nseg, m.sender);
	/* PS_DROP_MSG, as in ps-lite: lose messages on purpose to test the
	 * resender (only once the node is ready) */
	if (o->cfg.drop_rate > 0 && o->state == PSL__READY) {
		static __thread unsigned seed;
		if (!seed)
			seed = (unsigned)psl__now_ms() ^ (unsigned)o->my_id * 2654435761u;
		if ((int)(rand_r(&seed) % 100) < o->cfg.drop_rate) {
			PSL_DBG("PS_DROP_MSG: dropped a %s from node %d (ts %d)",
				psl__cmd_name(m.cmd), m.sender, m.timestamp);
			psl__meta_clear(&m);
			psl__raw_release(raw);
			return;
		}
	}
	if (o->cfg.resend && m.cmd != PSL_CMD_TERMINATE && resend_filter(o, &m)) {
		psl__meta_clear(&m);
		psl__raw_release(raw);
		return;
	}
	if (m.cmd != PSL_CMD_EMPTY) {
		psl__control_handle(o, &m, raw->nseg);
		psl__meta_clear(&m);
		psl__raw_release(raw);
		return;
	}
	if (m.body_size && !(raw = psl__ipc_unpack(o, &m, raw))) {
		psl__meta_clear(&m);
		return;
	}
	{
		int64_t began = psl__delivery_begin(o);
		psl__customer_dispatch(o, &m, raw);
		psl__delivery_end(o, began);
	}
}

/* Only a worker lends its pull buffers; what does not decode, or is not a
 * data message from a node of this job, keeps the van's own buffer. */
static int host_recv_dest(void *ctx, int32_t sender, const void *meta, size_t meta_len,
			  uint32_t seg, size_t len, struct psl_van_dest *dest)
{
	struct psl__office *o = ctx;
	struct psl__meta m;
	char why[8];
	int rc;
	psl__enter(o); /* the node whose van calls */

	if (o->role == PSL_SCHEDULER || o->state != PSL__READY || !dest)
		return -EINVAL;
	if (o->role == PSL_SERVER && !atomic_load(&psl__kv_recv_regs))
		return -ENOENT; /* (a server lends only registered receive buffers) */
	if (psl__meta_decode(meta, meta_len, &m, why, sizeof(why)))
		return -EPROTO;
	rc = -EINVAL;
	if (m.cmd == PSL_CMD_EMPTY && sender >= 8 && sender <= o->max_id &&
	    o->peers[sender].known) {
		m.sender = sender;
		rc = psl__customer_recv_dest(o, &m, seg, len, dest);
	}
	psl__meta_clear(&m);
	return rc;
}

static void host_recv_dest_put(void *ctx, void *loan, int status)
{
	psl__enter(ctx); /* the node whose van calls */
	if (loan)
		psl__kv_loan_put(loan, status);
}

static int host_proof(void *ctx, const void *msg, size_t len, uint8_t mac[32])
{
	struct psl__office *o = ctx;
	psl__enter(o); /* the node whose van calls */
	return psl__auth_mac(o, msg, len, mac);
}

static int host_proof_check(void *ctx, const void *msg, size_t len, const uint8_t mac[32])
{
	struct psl__office *o = ctx;
	psl__enter(o); /* the node whose van calls */
	return psl__auth_check(o, msg, len, mac);
}

void psl__host_init(struct psl__office *o, struct psl_van_host *h)
{
	memset(h, 0, sizeof(*h));
	h->abi_version = PSL_VAN_ABI_VERSION;
	h->size = sizeof(*h);
	h->ctx = o;
	h->log_level = psl__log_level;
	h->vlog = host_vlog;
	h->param = host_param;
	h->recv = host_recv;
	h->send_done = host_send_done;
	h->peer_event = host_peer_event;
	h->recv_dest = host_recv_dest;
	h->recv_dest_put = host_recv_dest_put;
	h->proof = host_proof;
	h->proof_check = host_proof_check;
	atomic_store(&psl__loss_hook, psl__loss_handle); /* (each node sets it: the same) */
}
