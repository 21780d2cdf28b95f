/* ps-lite's resender (PS_RESEND): ACKs, resends, de-duplication. */
#ifndef PSL_CORE_RESENDER_H
#define PSL_CORE_RESENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "message.h"
#include "pslite/van.h"

struct psl__office;

/* keep_asked (PS_RESEND with PS_RECOVERY): a data request is kept, after
 * its ACK, until its response comes, so that a lost receiver's replacement
 * can get it again (psl__resender_hold). */
int psl__resender_init(struct psl__office *o, int timeout_ms, bool keep_asked);
void psl__resender_fini(struct psl__office *o);
/* Keeps a copy of an outgoing message until it is ACKed; whether it did
 * (or had one already). */
bool psl__resender_on_send(struct psl__office *o, const struct psl__meta *m, const void *meta,
			   size_t meta_len, const struct psl_van_seg *segs, uint32_t nseg);
/* For a received message: handles an ACK, or says in *ack (an initialised
 * meta; its cmd becomes PSL_CMD_ACK) the ACK the caller must send for it.
 * Returns true if the message must not be processed further (an ACK, or a
 * duplicate). */
bool psl__resender_on_recv(struct psl__office *o, const struct psl__meta *m, struct psl__meta *ack);
/* Resends what is overdue; gives up on a peer after 10 resends. */
void psl__resender_tick(struct psl__office *o, int64_t now_ms);
/* How many sent messages wait for their ACK. */
int psl__resender_pending(struct psl__office *o);
/* The scheduler released a barrier of kind cmd: drops this node's requests
 * for it (the release proves they arrived; see resender.c). */
void psl__resender_released(struct psl__office *o, int cmd);
/* Drops what waits for node id (it was lost). */
void psl__resender_forget(struct psl__office *o, int id);
/* Node id was lost and a replacement may come: its data requests kept
 * (keep_asked) are held, not resent, the rest dropped. Returns how many. */
int psl__resender_hold(struct psl__office *o, int id);
/* Node id's replacement is connected: sends it the held requests again.
 * Returns how many. */
int psl__resender_resend_held(struct psl__office *o, int id);
/* Forgets which messages of sender were received: a node that took a lost
 * one's place numbers its messages from 0 again (recovery.c). */
void psl__resender_forget_seen(struct psl__office *o, int sender);

#endif
