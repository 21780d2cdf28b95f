/*
 * rawzmq: an "evil worker" that speaks ps-lite's ZMQ wire protocol by hand
 * (docs/wire.md 2, 6, 7, 15) to a real pslite job, and sends it malformed
 * messages. It registers like a worker (anonymous DEALER, ADD_NODE with id
 * 32767 and aux_id DMLC_RANK), takes the node list on its own ROUTER, opens
 * DEALERs "ps<id>" to the scheduler and the servers, joins the start-up
 * INSTANCE_BARRIER, then sends:
 *   - metas that must be dropped (short, inconsistent counts, unknown
 *     command, bad bools, node lists with bad ids, roles, hostnames, lengths,
 *     data and device types), too many frames;
 *   - KV requests whose frames are wrong (keys not a multiple of 8, lens
 *     that do not match the keys, values that do not match the lens, 1 or 4
 *     frames), which a server must answer with an error (option < 0);
 *   - a response nobody asked for (to a server and to the real worker),
 *     control messages no node should accept from a worker, a late
 *     registration, and messages from an anonymous socket and from "ps1001";
 *   - well-formed pushes and pulls, whose answers it checks;
 * then joins the final barrier (RAWZMQ_MODE selects other scenarios, see
 * main). For every message a node must drop it prints
 *   rawzmq: EXPECT <node label>|<text>|<text>
 * and rawzmq.sh checks that node's log has a line with both texts. Exits 0
 * when every answer was right.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "message.h"

#define MAXF 80
static int g_fail;
static void *g_ctx, *g_router;
static void *g_dealer[64]; /* by node id: ps<my id> DEALERs */
static int g_my_id = PSL_EMPTY, g_rank, g_port, g_nservers, g_nworkers, g_van_ts;
static char g_host[64] = "127.0.0.1";
static struct psl__node g_nodes[64];
static int g_nnodes;
static char g_me[64]; /* how the nodes name this one: "worker 1 (id 11" */
static int g_ts = 1000; /* KV request timestamps */

#define CHECK(c, ...)                                                              \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "rawzmq: FAILED at line %d: ", __LINE__);  \
			fprintf(stderr, __VA_ARGS__);                              \
			fprintf(stderr, "\n");                                     \
			g_fail++;                                                  \
		}                                                                  \
	} while (0)

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "rawzmq: FAILED: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

static const char *label(int id)
{
	static char b[32];
	if (id == 1)
		return "scheduler";
	snprintf(b, sizeof(b), "%s %d", id % 2 ? "worker" : "server", (id - 8) / 2);
	return b;
}

/* One line the test script checks against node id's log. */
static void expect(int id, const char *a, const char *b)
{
	printf("rawzmq: EXPECT %s|%s|%s\n", label(id), a, b);
}

/* --------------------------------------------------------------- frames -- */

struct frame {
	const void *p;
	size_t n;
};

static void send_frames(void *sock, const struct frame *f, int n)
{
	int i;
	for (i = 0; i < n; i++)
		if (zmq_send(sock, f[i].p, f[i].n, i + 1 < n ? ZMQ_SNDMORE : 0) < 0)
			die("zmq_send: %s", zmq_strerror(errno));
}

static size_t enc(const struct psl__meta *m, uint8_t *buf)
{
	return psl__meta_encode(m, buf);
}

static void send_meta(void *sock, const struct psl__meta *m, const struct frame *data, int nd)
{
	static uint8_t buf[8192];
	struct frame f[MAXF];
	int i;
	f[0].p = buf;
	f[0].n = enc(m, buf);
	for (i = 0; i < nd; i++)
		f[1 + i] = data[i];
	send_frames(sock, f, 1 + nd);
}

struct msg {
	int from;
	struct psl__meta m;
	int nseg;
	uint8_t *seg[MAXF];
	size_t len[MAXF];
	uint8_t meta[8192];
};

static int parse_id(const char *s, size_t n)
{
	size_t i;
	int id = 0;
	if (n <= 2 || n > 8 || s[0] != 'p' || s[1] != 's')
		return PSL_EMPTY;
	for (i = 2; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return PSL_EMPTY;
		id = id * 10 + s[i] - '0';
	}
	return id;
}

static void msg_free(struct msg *m)
{
	int i;
	for (i = 0; i < m->nseg; i++)
		free(m->seg[i]);
	psl__meta_clear(&m->m);
	m->nseg = 0;
}

/* Reads one message [id][meta][data...] from sock. */
static int read_msg(void *sock, struct msg *out)
{
	zmq_msg_t f;
	int more, k = 0;
	char why[256];
	size_t meta_len = 0;
	memset(out, 0, offsetof(struct msg, meta));
	do {
		zmq_msg_init(&f);
		if (zmq_msg_recv(&f, sock, 0) < 0)
			die("zmq_msg_recv: %s", zmq_strerror(errno));
		more = zmq_msg_more(&f);
		if (k == 0) {
			out->from = parse_id(zmq_msg_data(&f), zmq_msg_size(&f));
		} else if (k == 1) {
			meta_len = zmq_msg_size(&f);
			if (meta_len > sizeof(out->meta))
				die("a meta of %zu bytes", meta_len);
			memcpy(out->meta, zmq_msg_data(&f), meta_len);
		} else if (out->nseg < MAXF) {
			out->len[out->nseg] = zmq_msg_size(&f);
			out->seg[out->nseg] = malloc(out->len[out->nseg] + 1);
			memcpy(out->seg[out->nseg], zmq_msg_data(&f), out->len[out->nseg]);
			out->nseg++;
		}
		zmq_msg_close(&f);
		k++;
	} while (more);
	if (psl__meta_decode(out->meta, meta_len, &out->m, why, sizeof(why))) {
		fprintf(stderr, "rawzmq: FAILED: node %d sent a meta we cannot decode: %s\n",
			out->from, why);
		g_fail++;
		return -1;
	}
	return 0;
}

/* Waits for a message matching (from, cmd, ts, request=0) on the ROUTER or
 * any DEALER. Others are reported and dropped. */
static bool wait_msg(struct msg *out, int from, int cmd, int ts, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	while (now_ms() < end) {
		zmq_pollitem_t it[65];
		int n = 0, i;
		it[n] = (zmq_pollitem_t){g_router, 0, ZMQ_POLLIN, 0};
		n++;
		for (i = 0; i < 64; i++)
			if (g_dealer[i]) {
				it[n] = (zmq_pollitem_t){g_dealer[i], 0, ZMQ_POLLIN, 0};
				n++;
			}
		if (zmq_poll(it, n, 100) <= 0)
			continue;
		for (i = 0; i < n; i++) {
			if (!(it[i].revents & ZMQ_POLLIN))
				continue;
			if (read_msg(it[i].socket, out))
				continue;
			if (out->from == from && out->m.cmd == cmd && !out->m.request &&
			    (ts < 0 || out->m.timestamp == ts))
				return true;
			printf("rawzmq: note: passing over %s from node %d (ts %d, %s)\n",
			       psl__cmd_name(out->m.cmd), out->from, out->m.timestamp,
			       out->m.request ? "request" : "response");
			msg_free(out);
		}
	}
	return false;
}

/* ------------------------------------------------------- control plane -- */

static void *dealer(const char *ident, const char *host, int port)
{
	char ep[128];
	int linger = 1000;
	void *s = zmq_socket(g_ctx, ZMQ_DEALER);
	if (!s)
		die("zmq_socket: %s", zmq_strerror(errno));
	if (ident)
		zmq_setsockopt(s, ZMQ_ROUTING_ID, ident, strlen(ident));
	zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
	snprintf(ep, sizeof(ep), "tcp://%s:%d", host, port);
	if (zmq_connect(s, ep))
		die("zmq_connect %s: %s", ep, zmq_strerror(errno));
	return s;
}

static const struct psl__node *node_of(int id)
{
	int i;
	for (i = 0; i < g_nnodes; i++)
		if (g_nodes[i].id == id)
			return &g_nodes[i];
	return NULL;
}

static void registration(struct psl__meta *m, struct psl__node *me, int port)
{
	memset(me, 0, sizeof(*me));
	me->role = 1;
	me->id = PSL_EMPTY;
	snprintf(me->hostname, sizeof(me->hostname), "%s", g_host);
	me->port = port;
	me->first_port = port;
	me->aux_id = g_rank;
	psl__meta_init(m);
	m->cmd = PSL_CMD_ADD_NODE;
	m->node_size = 1;
	m->nodes = me;
}

static void start(void)
{
	const char *uri = getenv("DMLC_PS_ROOT_URI"), *port = getenv("DMLC_PS_ROOT_PORT");
	char ep[128], ident[16];
	size_t len = sizeof(ep);
	struct psl__meta m;
	struct psl__node me;
	struct msg r;
	void *anon;
	int i;

	if (!uri || !port || !getenv("DMLC_NUM_SERVER") || !getenv("DMLC_NUM_WORKER"))
		die("run me through pslite-run (DMLC_* variables missing)");
	if (getenv("DMLC_NODE_HOST"))
		snprintf(g_host, sizeof(g_host), "%s", getenv("DMLC_NODE_HOST"));
	g_rank = getenv("DMLC_RANK") ? atoi(getenv("DMLC_RANK")) : -1;
	g_nservers = atoi(getenv("DMLC_NUM_SERVER"));
	g_nworkers = atoi(getenv("DMLC_NUM_WORKER"));
	g_ctx = zmq_ctx_new();
	g_router = zmq_socket(g_ctx, ZMQ_ROUTER);
	snprintf(ep, sizeof(ep), "tcp://%s:*", g_host);
	if (zmq_bind(g_router, ep))
		die("bind %s: %s", ep, zmq_strerror(errno));
	zmq_getsockopt(g_router, ZMQ_LAST_ENDPOINT, ep, &len);
	g_port = atoi(strrchr(ep, ':') + 1);

	/* Registrations no scheduler can use, sent before the real one while
	 * the job is still being put together: they must be ignored, not take
	 * a worker's place (nor stop the job when the scheduler cannot
	 * connect to them). */
	{
		void *bogus = dealer(NULL, uri, atoi(port));
		registration(&m, &me, 0);
		expect(1, "ignored a malformed registration", "port 0");
		send_meta(bogus, &m, NULL, 0);
		registration(&m, &me, 4444);
		me.hostname[0] = 0;
		expect(1, "ignored a malformed registration", "host ''");
		send_meta(bogus, &m, NULL, 0);
		registration(&m, &me, 4445);
		me.role = 2;
		expect(1, "ignored a malformed registration", "role 2");
		send_meta(bogus, &m, NULL, 0);
		sleep_ms(300);
		zmq_close(bogus);
	}

	/* docs/wire.md 6.1: register from an anonymous DEALER */
	anon = dealer(NULL, uri, atoi(port));
	registration(&m, &me, g_port);
	m.timestamp = g_van_ts++;
	send_meta(anon, &m, NULL, 0);
	if (!wait_msg(&r, 1, PSL_CMD_ADD_NODE, -1, 60000))
		die("no node list from the scheduler within 60 s");
	for (i = 0; i < r.m.node_size && i < 64; i++) {
		g_nodes[i] = r.m.nodes[i];
		if (!strcmp(r.m.nodes[i].hostname, g_host) && r.m.nodes[i].port == g_port)
			g_my_id = r.m.nodes[i].id;
	}
	g_nnodes = i;
	msg_free(&r);
	if (g_my_id == PSL_EMPTY)
		die("the node list does not hold me (%s:%d)", g_host, g_port);
	CHECK(g_nnodes == g_nservers + g_nworkers + 1, "node list of %d nodes", g_nnodes);
	CHECK(g_rank < 0 || g_my_id == 9 + 2 * g_rank, "id %d for rank %d", g_my_id, g_rank);
	snprintf(g_me, sizeof(g_me), "worker %d (id %d", (g_my_id - 8) / 2, g_my_id);
	printf("rawzmq: registered as node %d (%s:%d)\n", g_my_id, g_host, g_port);

	/* docs/wire.md 6.3: DEALERs ps<id> to the scheduler and every server */
	zmq_close(anon);
	snprintf(ident, sizeof(ident), "ps%d", g_my_id);
	for (i = 0; i < g_nnodes; i++) {
		const struct psl__node *n = &g_nodes[i];
		if (n->role == 1 || n->id >= 64)
			continue;
		g_dealer[n->id] = dealer(ident, n->hostname, n->port);
	}
}

static void barrier_of(const char *what, int cmd, int group)
{
	struct psl__meta m;
	struct msg r;
	psl__meta_init(&m);
	m.cmd = cmd;
	m.barrier_group = group;
	m.request = true;
	m.app_id = 0;
	m.customer_id = 0;
	m.timestamp = g_van_ts++;
	send_meta(g_dealer[1], &m, NULL, 0);
	if (!wait_msg(&r, 1, cmd, -1, 90000))
		die("the %s barrier was not released within 90 s", what);
	CHECK(r.m.app_id == 0, "barrier release with app %d", r.m.app_id);
	msg_free(&r);
	printf("rawzmq: %s barrier released\n", what);
}

static void barrier(const char *what)
{
	barrier_of(what, PSL_CMD_INSTANCE_BARRIER, 7);
}

/* ------------------------------------------------------------------ KV -- */

static uint64_t range_begin(int rank)
{
	return UINT64_MAX / (uint64_t)g_nservers * (uint64_t)rank;
}

static void kv_meta(struct psl__meta *m, bool push, int ndt, bool lens)
{
	psl__meta_init(m);
	m->head = 0;
	m->app_id = 0;
	m->customer_id = 0;
	m->timestamp = g_ts++;
	m->request = true;
	m->push = push;
	m->src_dev_type = m->dst_dev_type = PSL_DEV_CPU;
	m->src_dev_id = m->dst_dev_id = 0;
	m->data_type_size = ndt;
	m->data_type[0] = 8;
	m->data_type[1] = 5; /* UINT8: kvtest's servers hold bytes */
	if (lens)
		m->data_type[2] = 3;
}

/* Sends a KV request with frames to server sid; returns its answer. */
static bool kv_call(int sid, struct psl__meta *m, const struct frame *f, int nf, struct msg *r)
{
	send_meta(g_dealer[sid], m, f, nf);
	if (!wait_msg(r, sid, PSL_CMD_EMPTY, m->timestamp, 10000)) {
		fprintf(stderr, "rawzmq: FAILED: no answer from %s to request %d\n", label(sid),
			m->timestamp);
		g_fail++;
		return false;
	}
	return true;
}

static void good_push_pull(int sid, const char *when)
{
	uint64_t keys[2];
	uint8_t vals[8], round = (uint8_t)(g_ts & 0xff);
	int32_t lens[2] = {3, 5};
	struct frame f[3];
	struct psl__meta m;
	struct msg r;
	int i;

	keys[0] = range_begin((sid - 8) / 2) + (0x77ull << 40);
	keys[1] = keys[0] + 1;
	for (i = 0; i < 8; i++)
		vals[i] = (uint8_t)(round * 7 + i);
	kv_meta(&m, true, 3, true);
	m.val_len = 8;
	f[0] = (struct frame){keys, 16};
	f[1] = (struct frame){vals, 8};
	f[2] = (struct frame){lens, 8};
	if (kv_call(sid, &m, f, 3, &r)) {
		CHECK(r.m.push && !r.m.request && r.m.option == 0 && r.nseg == 0,
		      "%s: push to %s answered push %d option %d with %d frames", when, label(sid),
		      r.m.push, r.m.option, r.nseg);
		msg_free(&r);
	}
	kv_meta(&m, false, 2, false);
	f[1] = (struct frame){NULL, 0};
	if (kv_call(sid, &m, f, 2, &r)) {
		CHECK(!r.m.push && r.m.option == 0 && r.nseg == 3 && r.len[0] == 16 &&
			      !memcmp(r.seg[0], keys, 16) && r.len[1] == 8 &&
			      !memcmp(r.seg[1], vals, 8) && r.len[2] == 8 &&
			      !memcmp(r.seg[2], lens, 8),
		      "%s: pull from %s did not return what was pushed (%d frames, %zu value "
		      "bytes)",
		      when, label(sid), r.nseg, r.nseg > 1 ? r.len[1] : 0);
		msg_free(&r);
	}
	printf("rawzmq: %s: push and pull with %s checked\n", when, label(sid));
}

/* A KV request with bad frames: the server must answer with an error. */
static void bad_request(int sid, const struct frame *f, int nf, const char *why)
{
	struct psl__meta m;
	struct msg r;
	char a[160];
	kv_meta(&m, true, nf >= 3 ? 3 : 2, nf >= 3);
	snprintf(a, sizeof(a), "request %d from %s", m.timestamp, g_me);
	expect(sid, a, why);
	if (kv_call(sid, &m, f, nf, &r)) {
		CHECK(!r.m.request && r.m.option == -EBADMSG && r.nseg == 0 &&
			      r.m.timestamp == m.timestamp,
		      "bad request (%s) to %s: answered with option %d and %d frames, expected "
		      "option %d and none",
		      why, label(sid), r.m.option, r.nseg, -EBADMSG);
		msg_free(&r);
	}
}

/* ----------------------------------------------------- malformed metas -- */

/* Sends raw meta bytes (no data) to id and says what the node must log.
 * Spaced out: a node prints at most 5 such warnings a second. */
static void bad_meta(int id, const uint8_t *meta, size_t len, const char *why)
{
	struct frame f = {meta, len};
	char a[160];
	snprintf(a, sizeof(a), "dropped a malformed message from %s", g_me);
	expect(id, a, why);
	send_frames(g_dealer[id], &f, 1);
	sleep_ms(260);
}

static size_t base_meta(uint8_t *b)
{
	struct psl__meta m;
	kv_meta(&m, true, 0, false);
	return enc(&m, b);
}

static size_t node_list_meta(uint8_t *b, int id, int role)
{
	struct psl__meta m;
	struct psl__node me;
	registration(&m, &me, 1234);
	me.id = id;
	me.role = role;
	return enc(&m, b);
}

static void put32(uint8_t *b, size_t off, int32_t v)
{
	memcpy(b + off, &v, 4);
}

static void malformed_metas(void)
{
	uint8_t b[2048];
	size_t n;
	int t[3] = {1, 8, 10}, k = 0;
#define NEXT (t[k++ % 3])

	n = base_meta(b);
	bad_meta(NEXT, b, 50, "meta is 50 bytes, expected at least 112");
	bad_meta(NEXT, b, 0, "meta is 0 bytes");
	bad_meta(NEXT, b, 111, "meta is 111 bytes");
	n = base_meta(b);
	put32(b, 4, 10); /* a body of 10 bytes that is not there */
	bad_meta(NEXT, b, n, "counts (body 10");
	n = base_meta(b);
	put32(b, 44, -3);
	bad_meta(NEXT, b, n, "data_type_size -3");
	n = base_meta(b);
	put32(b, 8, 42);
	bad_meta(NEXT, b, n, "unknown command 42");
	n = base_meta(b);
	b[68] = 5;
	bad_meta(NEXT, b, n, "field push is 5, expected 0 or 1");
	n = base_meta(b);
	b[32] = 0xff;
	bad_meta(NEXT, b, n, "field request is 255");
	n = node_list_meta(b, 5, 1);
	bad_meta(NEXT, b, n, "node 0: id 5 is out of range");
	n = node_list_meta(b, 40000, 0);
	bad_meta(NEXT, b, n, "node 0: id 40000 is out of range");
	n = node_list_meta(b, PSL_EMPTY, 7);
	bad_meta(NEXT, b, n, "node 0: role 7");
	n = node_list_meta(b, PSL_EMPTY, 1);
	memset(b + 112 + 8, 'h', 64);
	bad_meta(NEXT, b, n, "node 0: hostname is not terminated");
	n = node_list_meta(b, PSL_EMPTY, 1);
	b[112 + 536] = 100;
	bad_meta(NEXT, b, n, "endpoint_name_len 100");
	n = node_list_meta(b, PSL_EMPTY, 1);
	put32(b, 112 + 204, 70000);
	bad_meta(NEXT, b, n, "node 0: port 70000 is out of range");
	n = node_list_meta(b, PSL_EMPTY, 1);
	put32(b, 12, 3); /* says 3 nodes, has 1 */
	bad_meta(NEXT, b, n, "nodes 3");
	{
		struct psl__meta m;
		kv_meta(&m, true, 2, false);
		m.data_type[1] = 99;
		n = enc(&m, b);
		bad_meta(NEXT, b, n, "data type 1 is 99");
		kv_meta(&m, true, 0, false);
		m.src_dev_type = 9;
		n = enc(&m, b);
		bad_meta(NEXT, b, n, "device type 9/");
	}
#undef NEXT
}

/* ---------------------------------------------------- everything else -- */

static void bad_frames(void)
{
	uint64_t keys[2] = {range_begin(0) + (0x77ull << 40) + 100,
			    range_begin(0) + (0x77ull << 40) + 101};
	uint8_t vals[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	int32_t lens1[1] = {4}, lens22[2] = {2, 2}, neg[2] = {-1, 1};
	struct frame f[5];
	int s1 = g_nservers > 1 ? 10 : 8;

	f[0] = (struct frame){keys, 12};
	f[1] = (struct frame){vals, 4};
	bad_request(8, f, 2, "keys frame of 12 bytes");
	f[0] = (struct frame){keys, 16};
	f[1] = (struct frame){vals, 4};
	f[2] = (struct frame){lens1, 4};
	bad_request(s1, f, 3, "1 lens for 2 keys");
	f[1] = (struct frame){vals, 5};
	f[2] = (struct frame){lens22, 8};
	bad_request(8, f, 3, "lens add up to 4 values but 5 came");
	f[1] = (struct frame){vals, 3};
	bad_request(s1, f, 2, "3 values do not split evenly over 2 keys");
	f[1] = (struct frame){vals, 0};
	f[2] = (struct frame){neg, 8};
	bad_request(8, f, 3, "lens[0]=-1 is negative");
	bad_request(s1, f, 1, "1 data frames, expected 0, 2 or 3");
	f[1] = (struct frame){vals, 4};
	f[2] = (struct frame){lens22, 8};
	f[3] = (struct frame){vals, 8};
	bad_request(8, f, 4, "4 data frames, expected 0, 2 or 3");
}

static void too_many_frames(void)
{
	static uint8_t meta[200];
	struct frame f[70];
	int i;
	f[0] = (struct frame){meta, base_meta(meta)};
	for (i = 1; i < 70; i++)
		f[i] = (struct frame){meta, 8};
	printf("rawzmq: EXPECT server 0|node %d|more than 64 frames\n", g_my_id);
	send_frames(g_dealer[8], f, 70);
}

static void control_abuse(void)
{
	struct psl__meta m;
	struct psl__node me;
	char a[64];
	int s1 = g_nservers > 1 ? 10 : 8;

	snprintf(a, sizeof(a), "from node %d", g_my_id);
	psl__meta_init(&m);
	m.cmd = PSL_CMD_TERMINATE;
	expect(8, "ignored TERMINATE", a);
	send_meta(g_dealer[8], &m, NULL, 0);

	psl__meta_init(&m);
	m.cmd = PSL_CMD_BARRIER;
	m.barrier_group = 4;
	m.request = true;
	m.app_id = 0;
	expect(s1, a, "only the scheduler releases barriers");
	send_meta(g_dealer[s1], &m, NULL, 0);

	m.request = false; /* a barrier "release" sent to the scheduler */
	expect(1, "ignored a BARRIER response", a);
	send_meta(g_dealer[1], &m, NULL, 0);

	psl__meta_init(&m);
	m.cmd = PSL_CMD_INSTANCE_BARRIER;
	m.barrier_group = 2; /* the servers' group: a worker is not in it */
	m.request = true;
	m.app_id = 0;
	expect(1, a, "for group 2: not a member of that group");
	send_meta(g_dealer[1], &m, NULL, 0);

	registration(&m, &me, g_port);
	expect(8, "ignored ADD_NODE", "only the scheduler sends node lists");
	send_meta(g_dealer[8], &m, NULL, 0);

	psl__meta_init(&m);
	m.cmd = PSL_CMD_BOOTSTRAP;
	expect(s1, "ignored a BOOTSTRAP message", a);
	send_meta(g_dealer[s1], &m, NULL, 0);

	/* a response to a server, and a SimpleApp message to a KV server */
	kv_meta(&m, true, 0, false);
	m.request = false;
	expect(8, "dropped a response from ", g_me);
	send_meta(g_dealer[8], &m, NULL, 0);
	kv_meta(&m, false, 0, false);
	m.simple_app = true;
	expect(s1, "dropped a SimpleApp message from ", g_me);
	send_meta(g_dealer[s1], &m, NULL, 0);
}

/* A response for a request the real worker never made. */
static void fake_response_to_worker(void)
{
	const struct psl__node *w = NULL;
	struct psl__meta m;
	char ident[16], a[160];
	uint64_t key = 1;
	uint8_t v = 1;
	struct frame f[2] = {{&key, 8}, {&v, 1}};
	void *s;
	int i;
	for (i = 0; i < g_nnodes; i++)
		if (g_nodes[i].role == 1 && g_nodes[i].id != g_my_id)
			w = &g_nodes[i];
	if (!w)
		return;
	snprintf(ident, sizeof(ident), "ps%d", g_my_id);
	s = dealer(ident, w->hostname, w->port);
	kv_meta(&m, false, 2, false);
	m.request = false;
	m.timestamp = 777777;
	snprintf(a, sizeof(a), "dropped a response from %s", g_me);
	expect(w->id, a, "for request 777777 of app 0 customer 0: no such request");
	send_meta(s, &m, f, 2);
	sleep_ms(100);
	zmq_close(s);
}

/* Messages from peers that are no node of this job. */
static void strangers(void)
{
	const struct psl__node *s0 = node_of(8), *sched = node_of(1);
	struct psl__meta m;
	struct psl__node me;
	uint64_t key = range_begin(0) + (0x77ull << 40) + 500;
	uint8_t v[4] = {9, 9, 9, 9};
	struct frame f[2] = {{&key, 8}, {v, 4}};
	uint8_t b[200];
	void *anon, *ps1001, *anon_s;

	anon = dealer(NULL, s0->hostname, s0->port);
	kv_meta(&m, true, 2, false);
	expect(8, "dropped a message (data) from an unregistered peer", "not a node of this job");
	send_meta(anon, &m, f, 2);
	sleep_ms(260);
	expect(8, "dropped a malformed message from an unregistered peer", "meta is 20 bytes");
	send_frames(anon, &(struct frame){b, 20}, 1);
	sleep_ms(260);

	ps1001 = dealer("ps1001", s0->hostname, s0->port);
	kv_meta(&m, true, 2, false);
	expect(8, "dropped a message (data) from node 1001", "not a node of this job");
	send_meta(ps1001, &m, f, 2);
	sleep_ms(260);
	zmq_close(ps1001);

	ps1001 = dealer("ps1001", sched->hostname, sched->port);
	psl__meta_init(&m);
	m.cmd = PSL_CMD_INSTANCE_BARRIER;
	m.barrier_group = 7;
	m.request = true;
	m.app_id = 0;
	expect(1, "dropped a message (INSTANCE_BARRIER) from node 1001", "not a node of this job");
	send_meta(ps1001, &m, NULL, 0);
	sleep_ms(150);
	registration(&m, &me, 4321);
	expect(1, "dropped a message (ADD_NODE) from node 1001", "not a node of this job");
	send_meta(ps1001, &m, NULL, 0);

	/* a node's own id: "ps1" at the scheduler releasing the final barrier
	 * (group 1, the scheduler's own), "ps8" at server 0 pushing as it */
	{
		void *own = dealer("ps1", sched->hostname, sched->port);
		psl__meta_init(&m);
		m.cmd = PSL_CMD_BARRIER;
		m.barrier_group = 1;
		m.request = false;
		m.app_id = 0;
		expect(1, "dropped a message (BARRIER) from node 1", "this node's own id");
		send_meta(own, &m, NULL, 0);
		sleep_ms(150);
		m.cmd = PSL_CMD_INSTANCE_BARRIER;
		m.barrier_group = 7;
		m.request = false;
		expect(1, "dropped a message (INSTANCE_BARRIER) from node 1", "this node's own id");
		send_meta(own, &m, NULL, 0);
		sleep_ms(150);
		zmq_close(own);
		own = dealer("ps8", s0->hostname, s0->port);
		kv_meta(&m, true, 2, false);
		expect(8, "dropped a message (data) from node 8", "this node's own id");
		send_meta(own, &m, f, 2);
		sleep_ms(150);
		zmq_close(own);
	}

	/* a late registration, done right but after the job is complete */
	anon_s = dealer(NULL, sched->hostname, sched->port);
	registration(&m, &me, 4322);
	expect(1, "ignored a registration from the worker at", "already has its");
	send_meta(anon_s, &m, NULL, 0);
	sleep_ms(200);
	zmq_close(ps1001);
	zmq_close(anon_s);
	zmq_close(anon);
}

/* RAWZMQ_MODE=preclaim: a stranger beside the scheduler that claims the
 * identities ps8 and ps9 at the scheduler before any node has an id, sends
 * a barrier as each, and holds the connections (RAWZMQ_HOLD_S, 15 s): the
 * real nodes must still get through (rawzmq_ident.sh). */
static int preclaim(void)
{
	const char *uri = getenv("DMLC_PS_ROOT_URI"), *port = getenv("DMLC_PS_ROOT_PORT");
	int hold = getenv("RAWZMQ_HOLD_S") ? atoi(getenv("RAWZMQ_HOLD_S")) : 15;
	void *s[2];
	struct psl__meta m;
	int i;
	if (!uri || !port)
		die("DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT needed");
	g_ctx = zmq_ctx_new();
	s[0] = dealer("ps8", uri, atoi(port));
	s[1] = dealer("ps9", uri, atoi(port));
	psl__meta_init(&m);
	m.cmd = PSL_CMD_INSTANCE_BARRIER;
	m.barrier_group = 7;
	m.request = true;
	m.app_id = 0;
	for (i = 0; i < 2; i++)
		send_meta(s[i], &m, NULL, 0);
	printf("rawzmq preclaim: holding ps8 and ps9 at %s:%s for %d s\n", uri, port, hold);
	sleep_ms(hold * 1000);
	for (i = 0; i < 2; i++)
		zmq_close(s[i]);
	zmq_ctx_term(g_ctx);
	printf("rawzmq preclaim: done\n");
	return 0;
}

/* RAWZMQ_MODE=secret: a stranger beside the scheduler of a job with
 * PS_JOB_SECRET, which it does not know: it registers as a worker from an
 * anonymous DEALER and from one whose identity carries a made-up proof,
 * claims ps8 and ps9 with barriers, and waits RAWZMQ_HOLD_S (8 s) for a
 * node list on its own ROUTER, which must never come (rawzmq_secret.sh). */
static int secret_stranger(void)
{
	const char *uri = getenv("DMLC_PS_ROOT_URI"), *port = getenv("DMLC_PS_ROOT_PORT");
	int hold = getenv("RAWZMQ_HOLD_S") ? atoi(getenv("RAWZMQ_HOLD_S")) : 8;
	char ep[128];
	size_t len = sizeof(ep);
	void *s[4];
	struct psl__meta m;
	struct psl__node me;
	struct msg r;
	int i;
	if (!uri || !port)
		die("DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT needed");
	g_ctx = zmq_ctx_new();
	g_router = zmq_socket(g_ctx, ZMQ_ROUTER);
	if (zmq_bind(g_router, "tcp://127.0.0.1:*"))
		die("bind: %s", zmq_strerror(errno));
	zmq_getsockopt(g_router, ZMQ_LAST_ENDPOINT, ep, &len);
	g_port = atoi(strrchr(ep, ':') + 1);
	g_rank = -1;
	s[0] = dealer(NULL, uri, atoi(port));
	s[1] = dealer("ps:00112233445566778899aabbccddeeff:"
		      "0000000000000000000000000000000000000000000000000000000000000000",
		      uri, atoi(port));
	s[2] = dealer("ps8", uri, atoi(port));
	s[3] = dealer("ps9:00112233445566778899aabbccddeeff:"
		      "1111111111111111111111111111111111111111111111111111111111111111",
		      uri, atoi(port));
	registration(&m, &me, g_port);
	send_meta(s[0], &m, NULL, 0);
	send_meta(s[1], &m, NULL, 0);
	psl__meta_init(&m);
	m.cmd = PSL_CMD_INSTANCE_BARRIER;
	m.barrier_group = 7;
	m.request = true;
	m.app_id = 0;
	send_meta(s[2], &m, NULL, 0);
	send_meta(s[3], &m, NULL, 0);
	printf("rawzmq secret: registered twice and claimed ps8, ps9 at %s:%s\n", uri, port);
	if (wait_msg(&r, 1, PSL_CMD_ADD_NODE, -1, hold * 1000)) {
		fprintf(stderr, "rawzmq: FAILED: the scheduler sent a stranger its node list\n");
		g_fail++;
		msg_free(&r);
	}
	for (i = 0; i < 4; i++)
		zmq_close(s[i]);
	zmq_close(g_router);
	zmq_ctx_term(g_ctx);
	printf("rawzmq secret: %s\n", g_fail ? "FAILED" : "no node list came (OK)");
	return g_fail ? 1 : 0;
}

/* RAWZMQ_MODE=steal: registers as worker 1, then opens a second connection
 * to server 0 as worker 0 ("ps9") and pushes as it, and stays away from the
 * final barrier: the real worker 0 must hear of it at once (its connection
 * is closed), not hang (rawzmq_ident.sh). */
static int steal(void)
{
	uint64_t key;
	uint8_t v[4] = {7, 7, 7, 7};
	struct frame f[2] = {{&key, 8}, {v, 4}};
	const struct psl__node *s0;
	struct psl__meta m;
	void *s;
	start();
	key = range_begin(0) + (0x77ull << 40) + 600; /* (g_nservers is known now) */
	barrier("start-up");
	s0 = node_of(8);
	if (!s0)
		die("no server 0 in the node list");
	sleep_ms(1000); /* worker 0 is at work */
	s = dealer("ps9", s0->hostname, s0->port);
	kv_meta(&m, true, 2, false);
	send_meta(s, &m, f, 2);
	printf("rawzmq steal: pushed to server 0 as ps9\n");
	sleep_ms(10000);
	zmq_close(s);
	printf("rawzmq steal: done\n");
	_exit(0); /* no final barrier, no lingering */
}

/* RAWZMQ_MODE=flood: registers as worker 1, then for RAWZMQ_FLOOD_S (5 s)
 * sends server 0 and the scheduler well-formed control messages they must
 * reject (TERMINATE, a BARRIER request to a server, a data message from an
 * anonymous peer), as fast as they take them; then one frame larger than
 * PS_ZMQ_MAX_MSG_MB, which must never be answered; then checks a push and
 * pull and joins the final barrier (rawzmq_flood.sh checks the nodes' log
 * size and memory). */
static int flood(void)
{
	const struct psl__node *s0;
	int secs = getenv("RAWZMQ_FLOOD_S") ? atoi(getenv("RAWZMQ_FLOOD_S")) : 5;
	long sent = 0;
	int64_t end;
	struct psl__meta t, b, d;
	uint64_t key;
	uint8_t v[4] = {1, 2, 3, 4};
	struct frame f[2];
	struct msg r;
	void *anon;
	start();
	barrier("start-up");
	s0 = node_of(8);
	key = range_begin(0) + (0x77ull << 40) + 900;
	f[0] = (struct frame){&key, 8};
	f[1] = (struct frame){v, 4};
	anon = dealer(NULL, s0->hostname, s0->port);
	psl__meta_init(&t);
	t.cmd = PSL_CMD_TERMINATE;
	psl__meta_init(&b);
	b.cmd = PSL_CMD_BARRIER;
	b.barrier_group = 4;
	b.request = true;
	b.app_id = 0;
	kv_meta(&d, true, 2, false);
	end = now_ms() + secs * 1000;
	while (now_ms() < end) {
		int i;
		for (i = 0; i < 100; i++) {
			send_meta(g_dealer[8], &t, NULL, 0);
			send_meta(g_dealer[8], &b, NULL, 0);
			send_meta(g_dealer[1], &t, NULL, 0);
			send_meta(anon, &d, f, 2);
		}
		sent += 400;
	}
	printf("rawzmq flood: sent %ld rejected control messages in %d s\n", sent, secs);
	zmq_close(anon);
	{
		size_t big = (size_t)(getenv("RAWZMQ_BIG_MB") ? atoi(getenv("RAWZMQ_BIG_MB")) : 2)
			     << 20;
		uint8_t *p = calloc(1, big);
		uint64_t keys[1] = {key};
		struct psl__meta m;
		kv_meta(&m, true, 2, false);
		f[0] = (struct frame){keys, 8};
		f[1] = (struct frame){p, big};
		send_meta(g_dealer[8], &m, f, 2);
		CHECK(!wait_msg(&r, 8, PSL_CMD_EMPTY, m.timestamp, 3000),
		      "server 0 answered a push with a frame of %zu bytes", big);
		free(p);
		printf("rawzmq flood: a frame of %zu bytes was not answered\n", big);
	}
	good_push_pull(8, "after the flood");
	barrier("final");
	printf("rawzmq worker %d: %s\n", (g_my_id - 8) / 2, g_fail ? "FAILED" : "OK");
	_exit(g_fail ? 1 : 0);
}

/* RAWZMQ_MODE=quiet: a worker as a C++ ps-lite one without
 * PS_HEARTBEAT_INTERVAL is: its registration has no pslite body, it sends no
 * heartbeats, and it is silent for RAWZMQ_QUIET_S s between two push-pulls.
 * No node may declare it lost for that (hb_alive.sh). */
static int quiet(void)
{
	int secs = getenv("RAWZMQ_QUIET_S") ? atoi(getenv("RAWZMQ_QUIET_S")) : 10;
	start();
	barrier("start-up");
	good_push_pull(8, "before the silence");
	printf("rawzmq quiet: silent for %d s\n", secs);
	sleep((unsigned)secs);
	good_push_pull(8, "after the silence");
	barrier("final");
	printf("rawzmq worker %d: %s\n", (g_my_id - 8) / 2, g_fail ? "FAILED" : "OK");
	_exit(g_fail ? 1 : 0);
}

int main(void)
{
	int i;
	const char *mode = getenv("RAWZMQ_MODE");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (mode && !strcmp(mode, "preclaim"))
		return preclaim();
	if (mode && !strcmp(mode, "steal"))
		return steal();
	if (mode && !strcmp(mode, "secret"))
		return secret_stranger();
	if (mode && !strcmp(mode, "flood"))
		return flood();
	if (mode && !strcmp(mode, "quiet"))
		return quiet();
	start();
	barrier("start-up");
	/* the real worker creates its KV worker after the start-up barrier: a
	 * response that came before it would find no customer to name */
	if (getenv("KVTEST_READY_BARRIER"))
		barrier_of("workers ready", PSL_CMD_BARRIER, 4); /* (kvtest's kind) */
	fake_response_to_worker();
	for (i = 0; i < g_nservers && i < 28; i++)
		good_push_pull(8 + 2 * i, "before");
	malformed_metas();
	bad_frames();
	control_abuse();
	strangers();
	too_many_frames();
	for (i = 0; i < g_nservers && i < 28; i++)
		good_push_pull(8 + 2 * i, "after");
	barrier("final");
	for (i = 0; i < 64; i++)
		if (g_dealer[i])
			zmq_close(g_dealer[i]);
	zmq_close(g_router);
	zmq_ctx_term(g_ctx);
	printf("rawzmq worker %d: %s\n", (g_my_id - 8) / 2, g_fail ? "FAILED" : "OK");
	return g_fail ? 1 : 0;
}
