/* The control plane: registration, node list, barriers, heartbeats, and
 * what happens when a peer is lost. */
#ifndef PSL_CORE_CONTROL_H
#define PSL_CORE_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include "message.h"

struct psl__office;

/* A received control message (cmd != EMPTY). */
void psl__control_handle(struct psl__office *o, struct psl__meta *m, uint32_t nseg);
/* A van's peer event. */
void psl__control_peer_event(struct psl__office *o, int id, int event, int err, const char *detail);
/* Node: send the registration (ADD_NODE with id 32767) to the scheduler. */
int psl__control_register(struct psl__office *o);
/* A barrier of cmd (BARRIER or INSTANCE_BARRIER) over group for the current
 * node, in two steps (so that a joint process's
 * nodes all arrive before either waits): arrive returns 0 (then wait with
 * *gen), 1 when there is nothing to wait for (a group of one), or -errno. */
int psl__control_barrier_arrive(struct psl__office *o, int customer_id, int group, int cmd,
				unsigned *gen);
int psl__control_barrier_wait(struct psl__office *o, int group, unsigned gen);
/* A group-level BARRIER over group for this process's whole instance group,
 * asked once when several threads ask at the same time (they all wait for
 * the one release); returns as psl__control_barrier_arrive. */
int psl__control_barrier_shared(struct psl__office *o, int customer_id, int group, unsigned *gen);
/* Scheduler: a node was lost; barriers no longer wait for it. */
void psl__control_forget_node(struct psl__office *o, int id);
/* Whether node id going away now is a normal departure: on the scheduler,
 * it had asked for the final barrier (or that barrier was released); on
 * other nodes, this node is in its final barrier. */
bool psl__control_node_leaving(struct psl__office *o, int id);
/* Whether this node's final barrier was released (peers may go now). */
bool psl__control_final_released(struct psl__office *o);
/* Scheduler: tell every live node that node id was lost, and why. */
void psl__control_announce_lost(struct psl__office *o, int id, const char *why);
/* Says at PS_VERBOSE=1 how this node's heartbeats are set (heartbeat.c). */
void psl__heartbeat_say(struct psl__office *o);
/* Around a delivery to user code on a receive thread (heartbeat.c): while
 * one runs long, or just after, a missing heartbeat may be queued behind it
 * here and nobody is judged by it. begin returns what end takes. */
struct psl__office;
int64_t psl__delivery_begin(struct psl__office *o);
void psl__delivery_end(struct psl__office *o, int64_t began);
/* Frees the scheduler's registration and barrier state. */
void psl__control_reset(struct psl__office *o);

int psl__timer_start(struct psl__office *o);
void psl__timer_stop(struct psl__office *o);
/* Starts the timer thread if it does not run (a deadline was set with the
 * job's timers off). 0 or -errno. */
int psl__timer_need(struct psl__office *o);

#endif
