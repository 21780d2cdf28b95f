/* PS_RESEND: every message but ACKs is kept until its receiver ACKs it, and
 * resent unchanged after PS_RESEND_TIMEOUT*(1+retries) ms. Receivers ACK
 * everything and drop what they saw before (a bounded window of signatures,
 * where ps-lite's set grew for ever). After 10 resends ps-lite aborted; pslite
 * declares the receiver lost, which fails the requests waiting on it. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"
#include "van_host.h"

#include <stdatomic.h>

#define BUCKETS 4096
#define SEEN_WINDOW 65536 /* power of two */
#define MAX_RETRIES 10

struct entry {
	struct psl__sendref ref; /* resends in flight hold a reference */
	atomic_int refs;
	uint64_t sig;
	int recver;
	int cmd;      /* control command of the kept message */
	bool request;
	bool acked;   /* a request ACKed, kept until its response (keep_asked) */
	bool held;    /* its receiver was lost: kept for its replacement */
	int retries;
	int64_t sent_ms;
	size_t meta_len;
	uint32_t nseg;
	struct psl_van_seg *segs;
	struct entry *next;
	/* meta, segment table and data follow */
};

/* each node's (a joint process has two) */
static struct resender {
	pthread_mutex_t mu;
	struct entry *table[BUCKETS];
	int timeout_ms;
	bool on;
	/* PS_RESEND with PS_RECOVERY: a request is kept until its response, so
	 * that a replacement of its lost receiver gets it again */
	bool keep_asked;
	/* de-duplication: a FIFO window of signatures plus an open hash set */
	uint64_t *seen_fifo;
	uint64_t *seen_set; /* 2*SEEN_WINDOW slots, 0 = empty */
	uint32_t seen_head, seen_count;
	bool early; /* some were recorded before this node had its id */
} resenders[PSL__OFFICES] = {
	[0 ... PSL__OFFICES - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER},
};
/* the current node's */
#define S (resenders[o - psl__offices])

static void entry_put(struct entry *e)
{
	if (e && atomic_fetch_sub(&e->refs, 1) == 1)
		free(e);
}

static void entry_sent(struct psl__sendref *ref, int status)
{
	(void)status;
	entry_put((struct entry *)ref);
}

static uint32_t hash(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x;
}

int psl__resender_init(struct psl__office *o, int t_ms, bool keep_asked)
{
	pthread_mutex_lock(&S.mu);
	S.timeout_ms = t_ms;
	S.keep_asked = keep_asked;
	S.seen_fifo = calloc(SEEN_WINDOW, sizeof(uint64_t));
	S.seen_set = calloc(2 * SEEN_WINDOW, sizeof(uint64_t));
	S.seen_head = S.seen_count = 0;
	S.early = false;
	S.on = S.seen_fifo && S.seen_set;
	pthread_mutex_unlock(&S.mu);
	return S.on ? 0 : -ENOMEM;
}

void psl__resender_fini(struct psl__office *o)
{
	int i;
	pthread_mutex_lock(&S.mu);
	for (i = 0; i < BUCKETS; i++) {
		while (S.table[i]) {
			struct entry *e = S.table[i];
			S.table[i] = e->next;
			entry_put(e);
		}
	}
	free(S.seen_fifo);
	free(S.seen_set);
	S.seen_fifo = S.seen_set = NULL;
	S.on = false;
	pthread_mutex_unlock(&S.mu);
}

bool psl__resender_on_send(struct psl__office *o, const struct psl__meta *m, const void *meta,
			   size_t meta_len, const struct psl_van_seg *segs, uint32_t nseg)
{
	uint64_t sig = psl__msg_sig(m->app_id, o->my_id, m->recver, m->timestamp, m->request);
	size_t data = 0, off;
	uint32_t i, b = hash(sig) % BUCKETS;
	struct entry *e;
	char *p;

	for (i = 0; i < nseg; i++)
		data += (segs[i].len + 7) & ~(size_t)7;
	pthread_mutex_lock(&S.mu);
	if (!S.on) {
		pthread_mutex_unlock(&S.mu);
		return false;
	}
	for (e = S.table[b]; e; e = e->next)
		if (e->sig == sig) { /* a resend of a message already kept */
			pthread_mutex_unlock(&S.mu);
			return true;
		}
	pthread_mutex_unlock(&S.mu);

	off = (sizeof(*e) + meta_len + 7) & ~(size_t)7;
	e = malloc(off + nseg * sizeof(struct psl_van_seg) + data);
	if (!e)
		return false;
	e->ref.done = entry_sent;
	atomic_init(&e->refs, 1);
	e->sig = sig;
	e->recver = m->recver;
	e->cmd = m->cmd;
	e->request = m->request;
	e->acked = e->held = false;
	e->retries = 0;
	e->sent_ms = psl__now_ms();
	e->meta_len = meta_len;
	e->nseg = nseg;
	memcpy(e + 1, meta, meta_len);
	e->segs = (struct psl_van_seg *)(void *)((char *)e + off);
	p = (char *)(e->segs + nseg);
	for (i = 0; i < nseg; i++) {
		e->segs[i] = segs[i];
		e->segs[i].data = p;
		e->segs[i].mr = NULL;
		/* the kept copy is host memory, whatever the sent segment was */
		e->segs[i].mem_type = PSL_MEM_HOST;
		e->segs[i].dev_id = -1;
		if (segs[i].len &&
		    psl__cuda_copy(p, PSL_MEM_HOST, -1, segs[i].data, segs[i].mem_type,
				   segs[i].dev_id, segs[i].len)) {
			free(e); /* not kept: a loss of it is not repaired */
			return false;
		}
		p += (segs[i].len + 7) & ~(size_t)7;
	}
	pthread_mutex_lock(&S.mu);
	e->next = S.table[b];
	S.table[b] = e;
	pthread_mutex_unlock(&S.mu);
	return true;
}

/* The slot of sig in the seen set: where it is, or the empty one that ends
 * its run. */
static uint32_t seen_slot(struct psl__office *o, uint64_t key)
{
	uint32_t mask = 2 * SEEN_WINDOW - 1, s;
	for (s = hash(key) & mask; S.seen_set[s] && S.seen_set[s] != key; s = (s + 1) & mask)
		;
	return s;
}

static bool seen_has(struct psl__office *o, uint64_t sig)
{
	uint64_t key = sig ? sig : 1; /* 0 marks an empty slot */
	return S.seen_set[seen_slot(o, key)] == key;
}

/* Takes the oldest signature out of the full window: out of the set (the
 * run after it re-inserted, so that every probe still finds its key) and
 * off the FIFO's head. */
static void seen_evict(struct psl__office *o)
{
	uint32_t mask = 2 * SEEN_WINDOW - 1, j;
	j = seen_slot(o, S.seen_fifo[S.seen_head]);
	S.seen_set[j] = 0;
	for (j = (j + 1) & mask; S.seen_set[j]; j = (j + 1) & mask) {
		uint64_t k = S.seen_set[j];
		S.seen_set[j] = 0;
		S.seen_set[seen_slot(o, k)] = k;
	}
	S.seen_head = (S.seen_head + 1) % SEEN_WINDOW;
	S.seen_count--;
}

static bool seen_check_add(struct psl__office *o, uint64_t sig)
{
	uint64_t key = sig ? sig : 1; /* 0 marks an empty slot */
	uint32_t s = seen_slot(o, key);

	if (S.seen_set[s] == key)
		return true;
	if (S.seen_count == SEEN_WINDOW) {
		seen_evict(o);
		s = seen_slot(o, key);
	}
	S.seen_set[s] = key;
	S.seen_fifo[(S.seen_head + S.seen_count) % SEEN_WINDOW] = key;
	S.seen_count++;
	return false;
}

void psl__resender_forget_seen(struct psl__office *o, int sender)
{
	uint64_t *keep;
	uint32_t i, n = 0, count;

	pthread_mutex_lock(&S.mu);
	count = S.seen_count;
	keep = S.on && count ? malloc(sizeof(*keep) * count) : NULL;
	if (!keep) {
		pthread_mutex_unlock(&S.mu);
		return;
	}
	for (i = 0; i < count; i++) {
		uint64_t k = S.seen_fifo[(S.seen_head + i) % SEEN_WINDOW];
		if (((k >> 40) & 0xff) != (uint8_t)sender)
			keep[n++] = k;
	}
	memset(S.seen_set, 0, 2 * SEEN_WINDOW * sizeof(uint64_t));
	S.seen_head = S.seen_count = 0;
	for (i = 0; i < n; i++)
		seen_check_add(o, keep[i]);
	pthread_mutex_unlock(&S.mu);
	free(keep);
}

/* A data request: what keep_asked keeps until its response. */
static bool asked(const struct entry *e)
{
	return e->request && e->cmd == PSL_CMD_EMPTY;
}

/* With S.mu held: takes the entry of signature sig out of the table (NULL if
 * none); a request kept until its response is only marked ACKed. */
static struct entry *take_sig(struct psl__office *o, uint64_t sig, bool ack)
{
	struct entry **pp, *e;
	for (pp = &S.table[hash(sig) % BUCKETS]; (e = *pp); pp = &e->next) {
		if (e->sig != sig)
			continue;
		if (ack && S.keep_asked && asked(e)) {
			e->acked = true;
			return NULL;
		}
		*pp = e->next;
		return e;
	}
	return NULL;
}

/* With S.mu held: whether the message was seen before (and now it is). A
 * node that takes a lost one's place gets the others' resent requests before
 * its node list, by their new connections, and cannot ACK them yet: the
 * wire does not carry the id their senders gave it, so it records them
 * under PSL_EMPTY, and once it has its id a message recorded so counts as
 * seen too (the sender's resend of the request it could not ACK). */
static bool seen_locked(struct psl__office *o, const struct psl__meta *m)
{
	int me = o->my_id;
	if (!S.on)
		return false;
	if (me == PSL_EMPTY) {
		if (m->sender < 8)
			return false;
		S.early = true;
	} else if (S.early &&
		   seen_has(o, psl__msg_sig(m->app_id, m->sender, PSL_EMPTY, m->timestamp,
					    m->request))) {
		return true;
	}
	return seen_check_add(o, psl__msg_sig(m->app_id, m->sender, me, m->timestamp, m->request));
}

bool psl__resender_on_recv(struct psl__office *o, const struct psl__meta *m, struct psl__meta *ack)
{
	struct entry *e = NULL;
	uint64_t sig;
	bool dup;

	pthread_mutex_lock(&S.mu);
	if (m->cmd == PSL_CMD_ACK)
		e = take_sig(o, m->msg_sig, true);
	else if (S.keep_asked && !m->request && m->cmd == PSL_CMD_EMPTY)
		/* a response: the request it answers needs no keeping */
		e = take_sig(o, psl__msg_sig(m->app_id, o->my_id, m->sender, m->timestamp, true),
			     false);
	pthread_mutex_unlock(&S.mu);
	entry_put(e);
	if (m->cmd == PSL_CMD_ACK)
		return true;
	if (m->sender == PSL_EMPTY)
		return false; /* an anonymous peer cannot be ACKed */
	/* Nor is the node list, which arrives while this node has no id yet:
	 * the ACK would leave over the anonymous registration connection with
	 * 32767 in its signature, and a C++ scheduler, whose resender does not
	 * exist yet, logs it as "Drop unknown typed message". ps-lite never
	 * ACKs what a node receives before it is ready (docs/wire.md 9 and 5). */
	if (o->my_id != PSL_EMPTY) {
		sig = psl__msg_sig(m->app_id, m->sender, o->my_id, m->timestamp, m->request);
		ack->cmd = PSL_CMD_ACK;
		ack->msg_sig = sig;
		ack->recver = m->sender;
	}
	pthread_mutex_lock(&S.mu);
	dup = seen_locked(o, m);
	pthread_mutex_unlock(&S.mu);
	if (dup)
		PSL_DBG("dropped a duplicate %s from node %d (ts %d)", psl__cmd_name(m->cmd),
			m->sender, m->timestamp);
	return dup;
}

int psl__resender_pending(struct psl__office *o)
{
	int i, n = 0;
	pthread_mutex_lock(&S.mu);
	for (i = 0; i < BUCKETS; i++) {
		struct entry *e;
		for (e = S.table[i]; e; e = e->next)
			n += !e->acked && !e->held;
	}
	pthread_mutex_unlock(&S.mu);
	return n;
}

/* Drops what is kept for node recver: every message (cmd < 0), or only its
 * requests of control command cmd. hold: keeps its data requests instead,
 * held for a replacement; returns how many. */
static int drop_kept(struct psl__office *o, int recver, int cmd, bool hold)
{
	int i, held = 0;
	pthread_mutex_lock(&S.mu);
	for (i = 0; i < BUCKETS; i++) {
		struct entry **pp = &S.table[i];
		while (*pp) {
			struct entry *e = *pp;
			if (e->recver == recver && hold && asked(e)) {
				e->held = true;
				held++;
				pp = &e->next;
			} else if (e->recver == recver &&
				   (cmd < 0 || (e->request && e->cmd == cmd))) {
				*pp = e->next;
				entry_put(e);
			} else {
				pp = &e->next;
			}
		}
	}
	pthread_mutex_unlock(&S.mu);
	return held;
}

/* A barrier's release proves that the scheduler has our request: it needs no
 * ACK and must not be resent. A C++ ps-lite scheduler creates its resender
 * up to 100 ms after it sent the node list (its start thread polls ready_
 * every 100 ms) and neither ACKs nor records what arrives before; it counts
 * INSTANCE_BARRIER requests without de-duplication (docs/wire.md
 * 7.2 and 9). A start-up barrier request sent at once lands in that window
 * and is not ACKed: resent, it was counted again, towards the final barrier,
 * which then released every node while workers still ran. The release comes
 * well before PS_RESEND_TIMEOUT unless a node is slower than that to ask. */
void psl__resender_released(struct psl__office *o, int cmd)
{
	drop_kept(o, 1, cmd, false);
}

void psl__resender_forget(struct psl__office *o, int id)
{
	drop_kept(o, id, -1, false);
}

int psl__resender_hold(struct psl__office *o, int id)
{
	return S.keep_asked ? drop_kept(o, id, -1, true) : 0;
}

int psl__resender_resend_held(struct psl__office *o, int id)
{
	int64_t now = psl__now_ms();
	int i, n = 0;

	pthread_mutex_lock(&S.mu);
	for (i = 0; i < BUCKETS; i++) {
		struct entry *e;
		for (e = S.table[i]; e; e = e->next) {
			if (e->recver != id || !e->held)
				continue;
			e->held = e->acked = false;
			e->retries = 0;
			e->sent_ms = now;
			n++;
			/* (a send that fails now is resent by the tick) */
			atomic_fetch_add(&e->refs, 1);
			if (o->lib.ops->send(o->van, id, e + 1, e->meta_len, e->segs,
						  e->nseg, &e->ref))
				atomic_fetch_sub(&e->refs, 1);
		}
	}
	pthread_mutex_unlock(&S.mu);
	return n;
}

void psl__resender_tick(struct psl__office *o, int64_t now)
{
	int i, lost = -1;

	pthread_mutex_lock(&S.mu);
	for (i = 0; i < BUCKETS && lost < 0; i++) {
		struct entry *e;
		for (e = S.table[i]; e; e = e->next) {
			if (e->acked || e->held ||
			    now - e->sent_ms <= (int64_t)S.timeout_ms * (1 + e->retries))
				continue;
			/* the last resend is still being sent (a large message, or a
			 * busy link): another copy behind it would only delay the ACK */
			if (atomic_load(&e->refs) > 1)
				continue;
			if (e->retries >= MAX_RETRIES) {
				lost = e->recver;
				break;
			}
			e->retries++;
			PSL_DBG("resending a message to node %d (try %d)", e->recver, e->retries);
			/* the van copies the meta; the segments stay until the van is
			 * done with them, even if the ACK comes first */
			atomic_fetch_add(&e->refs, 1);
			if (o->lib.ops->send(o->van, e->recver, e + 1, e->meta_len,
						  e->segs, e->nseg, &e->ref))
				atomic_fetch_sub(&e->refs, 1);
		}
	}
	pthread_mutex_unlock(&S.mu);
	if (lost >= 0) {
		char why[128];
		snprintf(why, sizeof(why), "no ACK after %d resends (PS_RESEND_TIMEOUT=%d ms)",
			 MAX_RETRIES, S.timeout_ms);
		psl__resender_forget(o, lost);
		psl__node_lost(o, lost, -ETIMEDOUT, why);
	}
}
