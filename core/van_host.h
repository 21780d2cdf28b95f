/* The core side of the van ABI: the send path and the receive callback. */
#ifndef PSL_CORE_VAN_HOST_H
#define PSL_CORE_VAN_HOST_H

#include "message.h"
#include "pslite/van.h"

/* Completion of a send's segments (van send_done). */
struct psl__sendref {
	void (*done)(struct psl__sendref *ref, int status);
};

/* Fills po.host with the core's callbacks. */
void psl__host_init(struct psl_van_host *h);

/* How many ERROR lines the van has logged so far; the last one's text. */
unsigned psl__van_errors(void);
const char *psl__van_last_error(char *buf, size_t len);

/* Sends meta (to m->recver) plus segments. If ref is non-NULL, ref->done runs
 * exactly once: when the van releases the segments, or before this returns
 * with an error. */
int psl__send(struct psl__meta *m, const struct psl_van_seg *segs, uint32_t nseg,
	      struct psl__sendref *ref);

/* Sends a control message (no data) with the next Van timestamp if ts_next. */
int psl__send_control(struct psl__meta *m, bool ts_next);

/* Releases a received message (NULL is fine). */
static inline void psl__raw_release(struct psl_van_rmsg *raw)
{
	if (raw)
		raw->release(raw);
}

#endif
