/* The core's send path: a message's meta encoded and handed to the node's
 * van with its segments (through shared memory to a local peer, kept for
 * resending with PS_RESEND), or delivered to this node itself; and the
 * van's ERROR lines counted (control_fail.c reports failed control sends
 * with them); connecting to a peer. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "ipc.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"
#include "van_host.h"

/* Set when the van logs an ERROR: its start-up failure then needs no second
 * ERROR line from the core (psl__van_errors). */
static atomic_uint van_errors;

unsigned psl__van_errors(void)
{
	return atomic_load(&van_errors);
}

/* The text of the van's last ERROR line, for the reasons the core passes
 * on to other nodes (a failed control send: control_fail.c). */
static char van_last_err[256];
static pthread_mutex_t van_last_mu = PTHREAD_MUTEX_INITIALIZER;

const char *psl__van_last_error(char *buf, size_t len)
{
	pthread_mutex_lock(&van_last_mu);
	snprintf(buf, len, "%s", van_last_err);
	pthread_mutex_unlock(&van_last_mu);
	return buf;
}

void psl__van_note_error(const char *fmt, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	pthread_mutex_lock(&van_last_mu);
	vsnprintf(van_last_err, sizeof(van_last_err), fmt, aq);
	atomic_fetch_add(&van_errors, 1);
	pthread_mutex_unlock(&van_last_mu);
	va_end(aq);
}

void psl__trace_msg(const char *dir, const struct psl__meta *m, uint32_t nseg, int peer)
{
	PSL_TRACE("%s node %d: %s app %d cust %d ts %d %s%s%s head %d frames %u", dir, peer,
		  psl__cmd_name(m->cmd), m->app_id, m->customer_id, m->timestamp,
		  m->request ? "request" : "response", m->push ? " push" : "",
		  m->simple_app ? " simple" : "", m->head, nseg);
}

/* ------------------------------------------------------------ loopback -- */

/* A message a node sends to itself (a SimpleApp request to a group it is in,
 * say) does not cross the van. */
struct loop_msg {
	struct psl_van_rmsg raw;
	struct psl_van_rseg segs[4];
};

void psl__loop_release(struct psl_van_rmsg *raw)
{
	free(raw);
}

static int loopback(struct psl__office *o, const void *meta, size_t meta_len,
		    const struct psl_van_seg *segs, uint32_t nseg)
{
	size_t data = 0, off;
	uint32_t i;
	struct loop_msg *lm;
	char *p;

	if (nseg > 4)
		return -EINVAL;
	for (i = 0; i < nseg; i++) {
		if (segs[i].mem_type != PSL_MEM_HOST)
			return -EINVAL;
		data += (segs[i].len + 7) & ~(size_t)7;
	}
	off = (sizeof(*lm) + 7) & ~(size_t)7;
	lm = malloc(off + ((meta_len + 7) & ~(size_t)7) + data);
	if (!lm)
		return -ENOMEM;
	p = (char *)lm + off;
	memcpy(p, meta, meta_len);
	lm->raw.meta = p;
	lm->raw.meta_len = meta_len;
	p += (meta_len + 7) & ~(size_t)7;
	for (i = 0; i < nseg; i++) {
		if (segs[i].len)
			memcpy(p, segs[i].data, segs[i].len);
		lm->segs[i] = (struct psl_van_rseg){p, segs[i].len, PSL_MEM_HOST, -1};
		p += (segs[i].len + 7) & ~(size_t)7;
	}
	lm->raw.sender = o->my_id;
	lm->raw.nseg = nseg;
	lm->raw.segs = lm->segs;
	lm->raw.release = psl__loop_release;
	/* (delivered as the van delivers: the receive callback) */
	o->host.recv(o, &lm->raw);
	return 0;
}

/* ---------------------------------------------------------------- send -- */

/* A data request the resender kept, whose send failed because its
 * receiver (a server or worker) is gone, with PS_RECOVERY: it waits for the
 * node that takes the receiver's place, as those in flight at the loss do
 * (the loss holds it, the replacement gets it, recovery_resend.c; if none
 * comes, the request fails with the loss). Its send had raced the loss:
 * the van had dropped the receiver before the core knew it was lost. */
static bool resent_later(struct psl__office *o, const struct psl__meta *m, int rc)
{
	bool gone = rc == -EHOSTUNREACH || rc == -ECONNRESET || rc == -ENOTCONN ||
		    rc == -EPIPE || rc == -ECONNREFUSED || rc == -EHOSTDOWN;
	if (!gone || !o->cfg.recovery || o->role == PSL_SCHEDULER || m->recver < 8 ||
	    !m->request || m->cmd != PSL_CMD_EMPTY)
		return false;
	PSL_DBG("request %d of app %d to node %d: the send failed (%s); kept to be sent again "
		"to the node that takes its place (PS_RESEND, PS_RECOVERY)",
		m->timestamp, m->app_id, m->recver, psl_strerror(rc));
	return true;
}

int psl__send(struct psl__office *o, struct psl__meta *m, const struct psl_van_seg *segs,
	      uint32_t nseg, struct psl__sendref *ref)
{
	uint8_t stack[2048];
	uint8_t *buf = stack;
	size_t len, data = 0;
	uint32_t i;
	int rc;
	struct psl_van_seg ipc_seg;
	bool copied = false, kept = false;

	if (!o->van) {
		rc = -ESHUTDOWN;
		goto out;
	}
	for (i = 0; i < nseg; i++)
		data += segs[i].len;
	if (m->cmd == PSL_CMD_EMPTY)
		m->data_size = data > 0x7fffffff ? 0x7fffffff : (int)data;
	/* to a local peer (BYTEPS_ENABLE_IPC=1): the data goes into shared
	 * memory, copied now, and a descriptor through the van */
	if (nseg && psl__ipc_pack(o, m, segs, nseg, data, &ipc_seg)) {
		segs = &ipc_seg;
		nseg = 1;
		copied = true;
	}
	len = psl__meta_size(m);
	if (len > sizeof(stack) && !(buf = malloc(len))) {
		rc = -ENOMEM;
		goto out;
	}
	psl__meta_encode(m, buf);
	if (psl__log_level >= PSL_LOG_TRACE)
		psl__trace_msg("to", m, nseg, m->recver);
	if (o->cfg.resend && atomic_load(&o->resend_live) && m->cmd != PSL_CMD_ACK &&
	    m->cmd != PSL_CMD_TERMINATE) /* (only to refused nodes, which do not ack) */
		kept = psl__resender_on_send(o, m, buf, len, segs, nseg);
	if (m->recver == o->my_id && o->my_id != PSL_EMPTY) {
		rc = loopback(o, buf, len, segs, nseg);
		if (ref)
			ref->done(ref, rc);
		if (buf != stack)
			free(buf);
		return rc;
	}
	rc = o->lib.ops->send(o->van, m->recver, buf, len, segs, nseg,
				   copied ? NULL : ref);
	if (rc && kept && !copied && resent_later(o, m, rc)) {
		rc = 0;
		if (ref) /* (the kept copy is what goes again) */
			ref->done(ref, 0);
	}
	if (copied) { /* (the caller's buffers were copied: done with them now) */
		m->body = NULL;
		m->body_size = 0;
		if (rc)
			psl__ipc_cancel(&ipc_seg);
		else if (ref)
			ref->done(ref, 0);
	}
	if (buf != stack)
		free(buf);
out:
	if (rc && ref)
		ref->done(ref, rc);
	return rc;
}

/* ---------------------------------------------------------- connecting -- */

static struct psl_van_peer van_peer(const struct psl__node *n)
{
	struct psl_van_peer p = {
		.size = sizeof(p),
		.id = n->id,
		.role = n->role,
		.host = n->hostname,
		.port = n->port,
		.addr = n->addr,
		.addr_len = n->addr_len,
	};
	return p;
}

int psl__control_connect(struct psl__office *o, const struct psl__node *n, int my_id)
{
	struct psl_van_peer p = van_peer(n);
	int rc = o->lib.ops->connect(o->van, &p, my_id);
	if (rc)
		PSL_ERR("cannot connect to node %d at %s:%d: %s", n->id, n->hostname, n->port,
			psl_strerror(rc));
	else
		PSL_DBG("connecting to node %d (%s) at %s:%d", n->id, psl__role_name(n->role),
			n->hostname, n->port);
	return rc;
}
