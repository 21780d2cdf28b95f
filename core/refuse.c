/* What the scheduler keeps and says about nodes outside the job: the nonce
 * of each registration (PS_JOB_SECRET), and the TERMINATE that tells a
 * refused node (or a ghost) why, so that it stops at once. Below
 * registration, recovery and heartbeats, which all refuse. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_int.h"
#include "env.h"
#include "postoffice.h"
#include "van_host.h"

/* With PS_JOB_SECRET: at the scheduler, the nonce of each registered node
 * (each node's own, o->nonce, binds the node list's proof to it). */
struct reg_nonce {
	char host[PSL_HOST_MAX];
	int port;
	char nonce[33];
};
static struct reg_nonce *reg_nonces;
static int nreg_nonces;

static struct reg_nonce *nonce_entry(const struct psl__node *n)
{
	int i;
	for (i = 0; i < nreg_nonces; i++)
		if (reg_nonces[i].port == n->port && !strcmp(reg_nonces[i].host, n->hostname))
			return &reg_nonces[i];
	return NULL;
}

const char *psl__registration_nonce(const struct psl__node *n)
{
	struct reg_nonce *r = nonce_entry(n);
	return r ? r->nonce : NULL;
}

/* With o->mu held: keeps the nonce of n's registration (a node started
 * again at the same address brings a new one). */
void psl__registration_keep_nonce(const struct psl__node *n, const char *nonce)
{
	struct reg_nonce *r = nonce_entry(n);
	if (!r && (r = realloc(reg_nonces, sizeof(*r) * (size_t)(nreg_nonces + 1)))) {
		reg_nonces = r;
		r += nreg_nonces++;
		snprintf(r->host, sizeof(r->host), "%s", n->hostname);
		r->port = n->port;
	}
	if (r)
		memcpy(r->nonce, nonce, 33);
}

/* Scheduler: tells a node whose registration it ignored why, so that the
 * node fails at once with the reason instead of waiting for its start-up
 * timeout: the scheduler connects to the address the registration gave,
 * under an id no node of the job has (its events are ignored), and sends a
 * TERMINATE whose body is PSL__REFUSED_TAG and the reason. Said to at most
 * REFUSALS_MAX addresses, once each, so that a flood of registrations does
 * not make the scheduler open connections without end. A ghost (a node
 * declared lost that still runs, heartbeat.c) is told to stop the same way.
 * ps-lite has no such
 * message: a C++ node's receive thread stops on it (it would have waited for
 * ever). */
#define REFUSALS_MAX 16
#define REFUSED_ID_BASE 30000
static struct {
	char host[64];
	int port;
} told[REFUSALS_MAX];
static int ntold;
static pthread_mutex_t told_mu = PTHREAD_MUTEX_INITIALIZER;

void psl__refusals_reset(void)
{
	pthread_mutex_lock(&told_mu);
	ntold = 0;
	pthread_mutex_unlock(&told_mu);
}

/* The id under which the scheduler speaks to address n, once: -1 if it was
 * told before, or REFUSALS_MAX addresses were. */
static int spare_id(const struct psl__node *n)
{
	int i, id = -1;

	pthread_mutex_lock(&told_mu);
	for (i = 0; i < ntold; i++)
		if (told[i].port == n->port && !strcmp(told[i].host, n->hostname))
			break;
	if (i == ntold && ntold < REFUSALS_MAX) {
		snprintf(told[ntold].host, sizeof(told[ntold].host), "%s", n->hostname);
		told[ntold].port = n->port;
		id = REFUSED_ID_BASE + ntold++;
	}
	pthread_mutex_unlock(&told_mu);
	return id;
}

/* Connects to n under id and sends it a TERMINATE with body. */
static void tell(struct psl__office *o, const struct psl__node *n, int id, const char *body)
{
	struct psl__node t = *n;
	struct psl__meta m;

	t.id = id;
	if (psl__control_connect(o, &t, 1))
		return;
	psl__meta_init(&m);
	m.cmd = PSL_CMD_TERMINATE;
	m.recver = t.id;
	m.body = body;
	m.body_size = (int)strlen(body);
	psl__send_control(o, &m, true);
}

void psl__tell_refused(struct psl__office *o, const struct psl__node *n, const char *fmt, ...)
{
	char body[400];
	va_list ap;
	int id = spare_id(n), len;

	if (id < 0)
		return;
	len = snprintf(body, sizeof(body), "%s", PSL__REFUSED_TAG);
	va_start(ap, fmt);
	vsnprintf(body + len, sizeof(body) - (size_t)len, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&o->mu); /* for the start-up timeout's message */
	snprintf(o->refused, sizeof(o->refused), "the %s at %s:%d (%.160s)",
		 psl__role_name(n->role), n->hostname, n->port, body + len);
	pthread_mutex_unlock(&o->mu);
	tell(o, n, id, body);
}

bool psl__tell_ghost(struct psl__office *o, const struct psl__node *n, const char *why)
{
	char body[400];
	int id = spare_id(n);

	if (id < 0)
		return false;
	snprintf(body, sizeof(body), "%s%d: %s", PSL__ABORT_TAG, -ENOLINK, why);
	tell(o, n, id, body);
	return true;
}
