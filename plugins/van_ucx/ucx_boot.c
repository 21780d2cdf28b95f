/*
 * van_ucx: the TCP bootstrap (see ucx_proto.h for the records).
 *
 * Why a TCP bootstrap of our own rather than UCX's sockaddr listener: the
 * node list carries at most 64 bytes of van address and a UCX worker address
 * is larger (145-215 bytes here, more with RDMA devices), so the address has
 * to be fetched from the peer; UCX's sockaddr connection manager needs a
 * transport that can carry it (tcp or rdmacm), which UCX_TLS=posix,sysv,cma
 * does not have; a port of our own can greet as van.h asks, so that a node
 * that runs another van (or ZeroMQ) is named at once instead of a hang; and
 * the open TCP connection tells that a peer died, whatever transport UCX
 * moves the data on (shared memory has no connection to break).
 *
 * Everything here and in ucx_connect.c runs on the thread that owns the
 * UCX worker (see ucx_van.h), but psl__ucx_out_new (in connect()).
 */

#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "ucx_van.h"

#define MAX_FDS_ACCEPT 64

void psl__ucx_sockaddr_desc(const struct sockaddr *sa, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)sa;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(out, len, "%s:%d", host, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)sa;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(out, len, "[%s]:%d", host, port);
	} else {
		snprintf(out, len, "?");
	}
}

void psl__ucx_tune_socket(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

int psl__ucx_ep_ctl(struct psl_van *v, int op, int fd, uint32_t events, void *ptr)
{
	struct epoll_event ev = {.events = events, .data.ptr = ptr};
	return epoll_ctl(v->epfd, op, fd, &ev) ? -errno : 0;
}

/* Writes what is left of buf; 0 when all went, -EAGAIN, or -errno. */
int psl__ucx_write_some(int fd, const uint8_t *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = send(fd, buf + *off, len - *off, MSG_NOSIGNAL);
		if (n > 0) {
			*off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return -EAGAIN;
		return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}

void psl__ucx_schedule(struct psl_van *v, int64_t t)
{
	if (v->next_timer < 0 || t < v->next_timer)
		v->next_timer = t;
}

/* ----------------------------------------------------------- listening -- */

int psl__ucx_listen(struct psl_van *v, const char *host, int port, int *bound)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char pstr[16];
	int rc, fd = -1, err = -EADDRNOTAVAIL;

	if (!host || !*host || !strcmp(host, "*"))
		host = NULL;
	snprintf(pstr, sizeof(pstr), "%d", port > 0 ? port : 0);
	rc = getaddrinfo(host, pstr, &hints, &res);
	if (rc) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot resolve %s to listen on: %s", host ? host : "*",
		    gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int one = 1;
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 256) == 0)
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return err;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
		err = -errno;
		close(fd);
		return err;
	}
	psl__ucx_sockaddr_desc((struct sockaddr *)&ss, v->listen_desc, sizeof(v->listen_desc));
	*bound = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
					  : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	v->lfd = fd;
	return 0;
}

/* ------------------------------------------------------------- inbound -- */

static void in_close(struct ucx_in *in)
{
	if (in->fd >= 0 && in->state == IN_READY) { /* its node ended: see UCX_LOAN_GRACE_MS */
		in->closed_at = psl_van_now_ms();
		psl__ucx_schedule(in->v, in->closed_at + UCX_LOAN_GRACE_MS);
	}
	if (in->fd >= 0) {
		epoll_ctl(in->v->epfd, EPOLL_CTL_DEL, in->fd, NULL);
		close(in->fd);
		in->fd = -1;
	}
	free(in->tx);
	in->tx = NULL;
	in->state = IN_CLOSED;
}

void psl__ucx_in_free(struct ucx_in *in)
{
	in_close(in);
	psl__ucx_in_drop_all(in);
	free(in);
}

static uint32_t mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

void psl__ucx_accept(struct psl_van *v)
{
	int k;
	for (k = 0; k < MAX_FDS_ACCEPT; k++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char greet[PSL_VAN_GREETING_LEN_MAX];
		size_t glen = psl__ucxp_greeting(greet, sizeof(greet)), off = 0;
		struct ucx_in *in;
		int fd = accept4(v->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				LOG(v, PSL_VAN_LOG_WARN, "accept on %s: %s", v->listen_desc,
				    strerror(errno));
			return;
		}
		psl__ucx_tune_socket(fd);
		if (v->nins == v->cap_ins) {
			uint32_t cap = v->cap_ins ? 2 * v->cap_ins : 16;
			struct ucx_in **n = realloc(v->ins, cap * sizeof(*n));
			if (!n) {
				close(fd);
				continue;
			}
			v->ins = n;
			v->cap_ins = cap;
		}
		in = calloc(1, sizeof(*in));
		if (!in) {
			close(fd);
			continue;
		}
		in->fdh.kind = FD_IN;
		in->v = v;
		in->idx = v->nins;
		in->nonce = mix32(v->nonce_seed ^ (in->idx * 0x9e3779b9u)) | 1u;
		in->fd = fd;
		in->state = IN_HELLO;
		in->node_id = PSL_VAN_ID_NONE;
		in->t_deadline = psl_van_now_ms() + v->handshake_ms;
		psl__ucx_sockaddr_desc((struct sockaddr *)&ss, in->desc, sizeof(in->desc));
		v->ins[v->nins++] = in;
		/* van.h: a van that listens greets first, on every connection */
		if (psl__ucx_write_some(fd, (const uint8_t *)greet, glen, &off) != 0 ||
		    psl__ucx_ep_ctl(v, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP, in) != 0) {
			in_close(in);
			continue;
		}
		LOG(v, PSL_VAN_LOG_TRACE, "accepted a connection from %s", in->desc);
		psl__ucx_schedule(v, in->t_deadline);
	}
}

static void in_mismatch(struct ucx_in *in, int kind, const char *other)
{
	char what[96];
	psl__ucxp_peer_desc(kind, other, what, sizeof(what));
	if (kind == UCXP_PEER_UNKNOWN)
		LOG(in->v, PSL_VAN_LOG_WARN,
		    "closed a connection from %s to %s: it sent %s, not a pslite greeting",
		    in->desc, in->v->listen_desc, what);
	else
		LOG(in->v, PSL_VAN_LOG_ERROR,
		    "a node at %s connected to this node's port %s speaking %s, but this node "
		    "runs van ucx: start every node with the same DMLC_ENABLE_RDMA",
		    in->desc, in->v->listen_desc, what);
	/* closing now, with its hello unread, would reset the connection and
	 * could destroy our greeting before the peer read it: it would then
	 * not know which van it reached */
	if (shutdown(in->fd, SHUT_WR) != 0) {
		in_close(in);
		return;
	}
	in->state = IN_DRAIN;
	in->t_deadline = psl_van_now_ms() + 1000;
	psl__ucx_schedule(in->v, in->t_deadline);
}

/* Answers a hello that proves no secret this node shares with a welcome
 * that carries only the reason, and closes once the peer has read it. */
static void in_refuse(struct ucx_in *in, const struct ucxp_hello *h, uint16_t status)
{
	struct psl_van *v = in->v;
	struct ucxp_welcome w = {.version = UCXP_PROTO_VERSION, .status = status};
	uint8_t buf[UCXP_WELCOME_SIZE];
	size_t off = 0;

	LOG(v, PSL_VAN_LOG_WARN,
	    "refused a connection from %s (%s %d): %s", in->desc,
	    h->node_id == PSL_VAN_ID_NONE ? "not registered yet, id" : "as node", h->node_id,
	    status == UCXP_WELCOME_BAD_PROOF
		    ? "it proves no PS_JOB_SECRET this node has (a stranger, or a node with "
		      "another secret or none)"
		    : "it proves a PS_JOB_SECRET and this node has none: give every node the "
		      "same PS_JOB_SECRET");
	psl__ucxp_welcome_encode(&w, buf);
	if (psl__ucx_write_some(in->fd, buf, sizeof(buf), &off) != 0 ||
	    shutdown(in->fd, SHUT_WR) != 0) {
		in_close(in);
		return;
	}
	in->state = IN_DRAIN;
	in->t_deadline = psl_van_now_ms() + 1000;
	psl__ucx_schedule(v, in->t_deadline);
}

static void in_welcome(struct ucx_in *in, const struct ucxp_hello *h)
{
	struct psl_van *v = in->v;
	struct ucxp_welcome w = {.version = UCXP_PROTO_VERSION,
				 .status = 0,
				 .conn = in->idx,
				 .nonce = in->nonce,
				 .ucx_version = v->ucx_version,
				 .addr_len = (uint32_t)v->addr_len};
	int rc;

	in->node_id = h->node_id;
	if (h->ucx_version != v->ucx_version)
		LOG(v, PSL_VAN_LOG_WARN,
		    "node %d at %s runs UCX %u.%u, this node %s: UCX may not connect them",
		    h->node_id, in->desc, h->ucx_version >> UCP_VERSION_MAJOR_SHIFT,
		    (h->ucx_version >> UCP_VERSION_MINOR_SHIFT) & 0xff, v->ucx_version_str);
	in->txlen = UCXP_WELCOME_SIZE + v->addr_len;
	in->tx = malloc(in->txlen);
	if (!in->tx) {
		in_close(in);
		return;
	}
	psl__ucxp_welcome_encode(&w, in->tx);
	memcpy(in->tx + UCXP_WELCOME_SIZE, v->addr, v->addr_len);
	in->txoff = 0;
	in->state = IN_READY;
	rc = psl__ucx_write_some(in->fd, in->tx, in->txlen, &in->txoff);
	if (rc == -EAGAIN) {
		psl__ucx_ep_ctl(v, EPOLL_CTL_MOD, in->fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, in);
	} else if (rc) {
		in_close(in);
		return;
	}
	if (h->node_id == PSL_VAN_ID_NONE)
		LOG(v, PSL_VAN_LOG_DEBUG, "an unregistered node connected from %s (connection %u)",
		    in->desc, in->idx);
	else
		LOG(v, PSL_VAN_LOG_DEBUG, "node %d connected from %s (connection %u)", h->node_id,
		    in->desc, in->idx);
}

void psl__ucx_in_io(struct ucx_in *in, uint32_t events)
{
	struct psl_van *v = in->v;

	if (in->fd < 0)
		return;
	if ((events & EPOLLOUT) && in->tx && in->txoff < in->txlen) {
		int rc = psl__ucx_write_some(in->fd, in->tx, in->txlen, &in->txoff);
		if (rc == 0)
			psl__ucx_ep_ctl(v, EPOLL_CTL_MOD, in->fd, EPOLLIN | EPOLLRDHUP, in);
		else if (rc != -EAGAIN) {
			in_close(in);
			return;
		}
	}
	for (;;) {
		uint8_t junk[256];
		uint8_t *dst = in->state == IN_HELLO ? in->rx + in->rxlen : junk;
		size_t room = in->state == IN_HELLO ? sizeof(in->rx) - in->rxlen : sizeof(junk);
		ssize_t n = recv(in->fd, dst, room, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			LOG(v, PSL_VAN_LOG_DEBUG, "%s closed its connection %u%s", in->desc,
			    in->idx, in->state == IN_HELLO ? " before saying hello" : "");
			in_close(in);
			return;
		}
		if (in->state != IN_HELLO)
			continue; /* nothing is expected after the hello */
		in->rxlen += (size_t)n;
		if (!in->greeted) {
			char other[PSL_VAN_NAME_LEN_MAX + 1];
			size_t used;
			int kind = psl__ucxp_classify(in->rx, in->rxlen, &used, other,
						      sizeof(other));
			if (kind == UCXP_PEER_NEED_MORE)
				continue;
			if (kind != UCXP_PEER_UCX) {
				in_mismatch(in, kind, other);
				if (in->state != IN_DRAIN)
					return;
				continue;
			}
			memmove(in->rx, in->rx + used, in->rxlen - used);
			in->rxlen -= used;
			in->greeted = true;
		}
		if (in->greeted) {
			struct ucxp_hello h;
			int rc = psl__ucxp_hello_decode(in->rx, in->rxlen, &h);
			if (rc == -EAGAIN)
				continue;
			if (rc) {
				LOG(v, PSL_VAN_LOG_WARN,
				    "closed a connection from %s: its hello is not one this van "
				    "understands (another pslite version?)",
				    in->desc);
				in_close(in);
				return;
			}
			if (h.flags & UCXP_HELLO_F_PROOF) {
				const uint8_t *proof = in->rx + UCXP_HELLO_SIZE;
				if (in->rxlen < UCXP_HELLO_SIZE + PSL_VAN_PROOF_LEN)
					continue;
				if (!v->secret)
					in_refuse(in, &h, UCXP_WELCOME_NO_SECRET);
				else if (psl_van_proof_check(v->host, UCXP_VAN_NAME, h.node_id,
							     proof) ||
					 !psl_van_nonce_fresh(&v->nonces, proof))
					in_refuse(in, &h, UCXP_WELCOME_BAD_PROOF);
				else
					in_welcome(in, &h);
			} else if (v->secret) {
				in_refuse(in, &h, UCXP_WELCOME_BAD_PROOF);
			} else {
				in_welcome(in, &h);
			}
			if (in->fd < 0 || in->state == IN_DRAIN)
				return;
		}
	}
}

/* Closes inbound connections that did not say hello in time. */
void psl__ucx_in_tick(struct psl_van *v, int64_t now)
{
	uint32_t k;
	int32_t gone[32];
	int ngone, g;
	pthread_mutex_lock(&v->mu);
	ngone = v->ngone;
	memcpy(gone, v->gone, sizeof(gone[0]) * (size_t)ngone);
	v->ngone = 0;
	pthread_mutex_unlock(&v->mu);
	/* the core disconnected these nodes (lost): their connections to this
	 * node end, and what they were still sending is dropped after the
	 * grace (UCX_LOAN_GRACE_MS), lent buffers going back to the core */
	for (g = 0; g < ngone; g++)
		for (k = 0; k < v->nins; k++)
			if (v->ins[k]->node_id == gone[g] && v->ins[k]->state == IN_READY) {
				LOG(v, PSL_VAN_LOG_DEBUG, "closing the connection from %s (node %d): "
				    "disconnected", v->ins[k]->desc, gone[g]);
				in_close(v->ins[k]);
			}
	for (k = 0; k < v->nins; k++) {
		struct ucx_in *in = v->ins[k];
		if (in->closed_at && now >= in->closed_at + UCX_LOAN_GRACE_MS) {
			int n = psl__ucx_in_reclaim_loans(in);
			if (n)
				LOG(v, PSL_VAN_LOG_DEBUG,
				    "%d answer(s) from %s (node %d) did not finish arriving "
				    "after it ended: dropped",
				    n, in->desc, in->node_id);
			in->closed_at = 0;
		} else if (in->closed_at) {
			psl__ucx_schedule(v, in->closed_at + UCX_LOAN_GRACE_MS);
		}
		if ((in->state != IN_HELLO && in->state != IN_DRAIN) || in->fd < 0)
			continue;
		if (now >= in->t_deadline && in->state == IN_DRAIN) {
			in_close(in);
		} else if (now >= in->t_deadline) {
			LOG(v, PSL_VAN_LOG_WARN,
			    "closed a connection from %s: no hello within %d ms", in->desc,
			    v->handshake_ms);
			in_close(in);
		} else {
			psl__ucx_schedule(v, in->t_deadline);
		}
	}
}
