/* The core side of the van ABI: the send path (van_send.c) and the
 * callbacks a van calls (van_host.c). */
#ifndef PSL_CORE_VAN_HOST_H
#define PSL_CORE_VAN_HOST_H

#include <stdarg.h>

#include "message.h"
#include "pslite/van.h"

struct psl__office;

/* Completion of a send's segments (van send_done). */
struct psl__sendref {
	void (*done)(struct psl__sendref *ref, int status);
};

/* Fills o->host with the core's callbacks, and sets the core's loss hook
 * (psl__loss_hook): what a van and the core find lost reaches every part
 * that keeps something for the node. */
void psl__host_init(struct psl__office *o, struct psl_van_host *h);

/* How many ERROR lines the van has logged so far; the last one's text; the
 * van's host callback notes each. */
unsigned psl__van_errors(void);
const char *psl__van_last_error(char *buf, size_t len);
void psl__van_note_error(const char *fmt, va_list ap);
/* A TRACE line about a message sent ("to") or received ("from"). */
void psl__trace_msg(const char *dir, const struct psl__meta *m, uint32_t nseg, int peer);
/* The release of a message a node sent to itself (it never crossed the
 * van; the receive callback tells them apart by it). */
void psl__loop_release(struct psl_van_rmsg *raw);

/* Sends meta (to m->recver) plus segments. If ref is non-NULL, ref->done runs
 * exactly once: when the van releases the segments, or before this returns
 * with an error. */
int psl__send(struct psl__office *o, struct psl__meta *m, const struct psl_van_seg *segs,
	      uint32_t nseg, struct psl__sendref *ref);

/* Sends a control message (no data) with the next Van timestamp if ts_next;
 * its failure is handled by psl__control_sent (control_fail.c). */
int psl__send_control(struct psl__office *o, struct psl__meta *m, bool ts_next);

/* Releases a received message (NULL is fine). */
static inline void psl__raw_release(struct psl_van_rmsg *raw)
{
	if (raw)
		raw->release(raw);
}

#endif
