/* van_ibverbs: what answers on the TCP port of a peer that rdmacm cannot
 * reach. A node of another van (zmq, ucx, fabric, C++ ps-lite's ZMQ van)
 * listens on TCP at the host and port it advertises, never on rdmacm: one
 * non-blocking TCP connection, read for IBV_PROBE_MS, tells such a node from
 * an ibverbs node that is not listening yet. No verbs here (unit-tested). */
#ifndef PSL_VAN_IBV_PROBE_H
#define PSL_VAN_IBV_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pslite/van.h>
#include <pslite/van_util.h>

/* How long a probe may take, connection and first bytes together. */
#define IBV_PROBE_MS 1500

enum ibv_probe_verdict {
	IBV_PROBE_WAIT = 0, /* not decided yet: step again later */
	IBV_PROBE_NONE,	    /* nothing, or nothing known, answered: keep retrying */
	IBV_PROBE_OTHER,    /* a node of another van answered: what names it */
};

struct ibv_probe {
	int fd; /* -1: no probe in flight */
	bool connected;
	int64_t deadline_ms;
	size_t got;
	uint8_t buf[PSL_VAN_GREETING_LEN_MAX];
};

void ibv_probe_init(struct ibv_probe *p);
/* Starts a probe of host:port (IPv4); 0, or -errno when none could start. */
int ibv_probe_start(struct ibv_probe *p, const char *host, int port, int64_t now_ms);
/* Moves a probe on without blocking; the fd is closed once it is decided. */
int ibv_probe_step(struct ibv_probe *p, int64_t now_ms, char *what, size_t cap);
void ibv_probe_close(struct ibv_probe *p);
/* The verdict on the first len bytes from the port; ended: no more will
 * come (end of stream, error, time up). */
int ibv_probe_judge(const uint8_t *buf, size_t len, bool ended, char *what, size_t cap);

#endif
