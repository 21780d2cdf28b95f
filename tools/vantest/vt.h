/*
 * pslite-vantest: the van conformance suite (see docs/writing-a-van.md).
 *
 * The program plays the core: it loads a van, gives it a host of its own
 * (struct vt_host) and drives two instances of it over loopback. Each case
 * runs in a process of its own, under a watchdog (pslite-vantest.c); this
 * header is what the cases (cases.c) share with the host (host.c).
 */
#ifndef PSL_VANTEST_VT_H
#define PSL_VANTEST_VT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pslite/van.h>

/* exit codes of a case's process */
#define VT_PASS 0
#define VT_FAIL 1
#define VT_SKIP 77

#define VT_MAXSEG 8
#define VT_MAXEV 64
#define VT_MAXSTREAM 16
#define VT_MAXLOAN 256

/* ------------------------------------------------------------ options -- */

struct vt_opts {
	char path[PATH_MAX]; /* the van's file */
	char name[64];	     /* its name (van_<name>.so) */
	const char *bad_name[8], *bad_value[8];
	int nbad;
	bool verbose;
	bool strict; /* more than van.h asks (the default): see --lenient */
	int timeout_s;
	const char *self; /* this program, to start a peer process */
};

extern struct vt_opts vt;
extern const struct psl_van_ops *vt_ops;

/* Loads vt.path and fills vt_ops; err gets one line on failure. */
int vt_load(char *err, size_t errlen);

/* ------------------------------------------------------------- result -- */

/* The first failure of the case, as one line. */
extern char vt_why[1024];
void vt_failf(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* --verbose */

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			vt_failf(__LINE__, __VA_ARGS__);                                           \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

/* Polls cond every millisecond for up to ms; true when it held. */
#define WAIT(cond, ms)                                                                             \
	({                                                                                         \
		int64_t wait_end_ = vt_now_ms() + (ms);                                            \
		bool wait_ok_;                                                                     \
		while (!(wait_ok_ = (cond)) && vt_now_ms() < wait_end_)                            \
			vt_sleep_ms(1);                                                            \
		wait_ok_;                                                                          \
	})

int64_t vt_now_ms(void);
void vt_sleep_ms(int ms);

/* ------------------------------------------------------------ the host -- */

struct vt_ev {
	int32_t id;
	int event, err;
	char detail[256];
};

struct vt_loan {
	uint8_t *mem; /* guard + buf + guard */
	uint8_t *buf;
	size_t len;
	int puts;
	int status;
	bool delivered;
};

/* One send: its cookie and its buffers (kept until the case ends). */
struct vt_send {
	atomic_int done;
	atomic_int status;
	uint32_t nseg;
	uint8_t *bufs[VT_MAXSEG];
	size_t lens[VT_MAXSEG];
	bool poison; /* overwrite the buffers at send_done */
};

struct vt_host {
	struct psl_van_host h;
	const char *label;
	pthread_mutex_t mu;
	const char *pname[8], *pval[8];
	int32_t expect_sender; /* -2: any */
	/* received */
	struct {
		int32_t sender;
		uint32_t stream, next;
	} streams[VT_MAXSTREAM];
	int nstreams;
	atomic_long nrecv;
	char err[512]; /* the first error a callback found */
	atomic_int nerr;
	bool hold; /* keep received messages until vt_host_release */
	struct psl_van_rmsg **held;
	int nheld, capheld;
	/* sends */
	atomic_long done_calls, done_errors, done_null;
	/* peer events */
	struct vt_ev evs[VT_MAXEV];
	int nev;
	/* recv_dest */
	bool lend; /* lend segment 1 of messages flagged VT_F_LEND */
	struct vt_loan loans[VT_MAXLOAN];
	int nloans;
	atomic_int dest_calls;
	/* echo: every message received goes back to echo_to */
	struct psl_van *van;
	bool echo;
	int32_t echo_to;
	atomic_long echo_sent, echo_fail;
	struct vt_send *echo_cookies; /* one per echo, up to echo_cap */
	long echo_cap;
	/* caller-driven progress (ABI 1.3): messages received on the thread
	 * that drives the van, and what progress() returned when recv called
	 * it (drive_in_recv) other than -EDEADLK */
	pthread_t driver;
	atomic_bool has_driver;
	atomic_long on_driver;
	bool drive_in_recv;
	atomic_int recv_drive_bad, recv_drive_rc;
	/* after fini */
	atomic_bool closed;
	atomic_int after_fini;
	char after_what[64];
	/* log */
	char log[8192];
	size_t loglen;
	atomic_int log_errors, log_warns;
	atomic_int callbacks;
	/* the job secret proof() and proof_check() use (NULL: none); the MAC
	 * is a test's own keyed hash, not the core's HMAC: a van never
	 * computes one itself */
	const char *secret;
};

void vt_host_init(struct vt_host *t, const char *label);
/* A host of ABI 1.0 (no recv_dest): its recv_dest fields are traps. */
void vt_host_make_1_0(struct vt_host *t);
void vt_host_release(struct vt_host *t);
void vt_host_free(struct vt_host *t);
int vt_host_event(struct vt_host *t, int32_t id, int event); /* index or -1 */
bool vt_host_ok(struct vt_host *t);			     /* no callback found an error */

/* ---------------------------------------------------------- messages -- */

#define VT_F_LEND 1u /* the host may lend segment 1 (recv_dest) */
#define VT_META_MIN(nseg) (24 + 8 * (size_t)(nseg))

uint8_t vt_pat(uint32_t seed, size_t k);
uint32_t vt_seed(uint32_t stream, uint32_t seq, uint32_t seg);

/* ------------------------------------------------------------- a node -- */

struct vt_node {
	struct vt_host t;
	struct psl_van *v;
	int32_t id;
	int port;
};

/* init (and bind when bind) an instance; false with vt_why set. */
bool vt_node_up(struct vt_node *n, const char *label, int32_t id, bool bind);
/* fini, then the host is closed: any callback after counts */
void vt_node_down(struct vt_node *n);
/* down (if up), release held messages, free */
void vt_node_free(struct vt_node *n);
int vt_connect(struct vt_node *from, int32_t id, int port, int32_t my_id);
/* a connects to b and b to a, with their ids */
bool vt_link(struct vt_node *a, struct vt_node *b);

/* Sends message (stream, seq) with nseg segments of lens[] bytes of pattern
 * and a meta of meta_len bytes (at least VT_META_MIN(nseg)); s (may be NULL:
 * no cookie) keeps the buffers. Returns the van's send return. */
int vt_send_msg(struct vt_node *from, int32_t to, uint32_t stream, uint32_t seq, uint32_t nseg,
		const size_t *lens, size_t meta_len, uint32_t flags, struct vt_send *s);
void vt_send_free(struct vt_send *s);
/* Frees the buffers of sends without a cookie (after fini). */
void vt_orphans_free(void);

/* ------------------------------------------------------------- cases -- */

struct vt_case {
	const char *name;
	const char *what;
	int (*run)(void);
};

extern const struct vt_case vt_cases[];
extern const int vt_ncases;

/* The peer process of case peer-killed: argv after --peer-child. */
int vt_peer_child(int aport);

#endif
