/*
 * pslite-server's protocol helpers and engine: BytePS's cmd pairing, the
 * data type table, the engine queue's order (FIFO, and BytePS's scheduling
 * order), load spreading and draining of the engine threads.
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "bps_engine.h"
#include "pslite/server.h"

/* BytePS's own inverse (byteps/server/server.h), in floating point. */
static void byteps_depair(int cmd, int *x, int *y)
{
	int w = (int)floor((sqrt(8.0 * cmd + 1) - 1) / 2);
	int t = (w * w + w) / 2;
	*y = cmd - t;
	*x = w - *y;
}

static void test_cmd_values(void **state)
{
	(void)state;
	/* kDefaultPushPull with each data type: what BytePS workers send */
	assert_int_equal(psl_byteps_cmd(0, PSL_BYTEPS_FLOAT32), 0);
	assert_int_equal(psl_byteps_cmd(0, PSL_BYTEPS_FLOAT64), 2);
	assert_int_equal(psl_byteps_cmd(0, PSL_BYTEPS_FLOAT16), 5);
	assert_int_equal(psl_byteps_cmd(0, PSL_BYTEPS_UINT8), 9);
	assert_int_equal(psl_byteps_cmd(0, PSL_BYTEPS_INT32), 14);
	assert_int_equal(psl_byteps_cmd(0, PSL_BYTEPS_INT8), 20);
	assert_int_equal(psl_byteps_cmd(0, PSL_BYTEPS_INT64), 27);
	assert_int_equal(psl_byteps_cmd(0, PSL_BYTEPS_BFLOAT16), 65);
	assert_int_equal(psl_byteps_cmd(PSL_BYTEPS_COMPRESSED_PUSHPULL, PSL_BYTEPS_FLOAT32), 3);
	assert_int_equal(psl_byteps_cmd(PSL_BYTEPS_ROW_SPARSE_PUSHPULL, PSL_BYTEPS_FLOAT32), 1);
	assert_int_equal(psl_byteps_cmd(-1, 0), -EINVAL);
	assert_int_equal(psl_byteps_cmd(0, -1), -EINVAL);
	assert_int_equal(psl_byteps_cmd(0, 1 << 20), -EINVAL);
}

static void test_cmd_roundtrip(void **state)
{
	int r, d, x, y, cmd;
	(void)state;
	for (r = 0; r < 40; r++) {
		for (d = 0; d < 40; d++) {
			cmd = psl_byteps_cmd(r, d);
			assert_true(cmd >= 0);
			x = y = -1;
			assert_int_equal(psl_byteps_cmd_parse(cmd, &x, &y), 0);
			assert_int_equal(x, r);
			assert_int_equal(y, d);
		}
	}
	/* every cmd parses as BytePS parses it */
	for (cmd = 0; cmd < 200000; cmd++) {
		int bx, by;
		assert_int_equal(psl_byteps_cmd_parse(cmd, &x, &y), 0);
		byteps_depair(cmd, &bx, &by);
		assert_int_equal(x, bx);
		assert_int_equal(y, by);
		assert_int_equal(psl_byteps_cmd(x, y), cmd);
	}
	assert_int_equal(psl_byteps_cmd_parse(2147483647, &x, &y), 0);
	assert_true(x >= 0 && y >= 0);
	assert_int_equal(psl_byteps_cmd_parse(-5, &x, &y), -EINVAL);
}

static void test_dtypes(void **state)
{
	(void)state;
	assert_int_equal(psl_byteps_dtype_size(PSL_BYTEPS_FLOAT32), 4);
	assert_int_equal(psl_byteps_dtype_size(PSL_BYTEPS_FLOAT64), 8);
	assert_int_equal(psl_byteps_dtype_size(PSL_BYTEPS_FLOAT16), 2);
	assert_int_equal(psl_byteps_dtype_size(PSL_BYTEPS_BFLOAT16), 2);
	assert_int_equal(psl_byteps_dtype_size(PSL_BYTEPS_UINT8), 1);
	assert_int_equal(psl_byteps_dtype_size(PSL_BYTEPS_INT8), 1);
	assert_int_equal(psl_byteps_dtype_size(PSL_BYTEPS_INT32), 4);
	assert_int_equal(psl_byteps_dtype_size(PSL_BYTEPS_INT64), 8);
	assert_int_equal(psl_byteps_dtype_size(7), 0); /* uint16: not summed */
	assert_int_equal(psl_byteps_dtype_size(9), 0);
	assert_int_equal(psl_byteps_dtype_size(11), 0);
	assert_int_equal(psl_byteps_dtype_size(-1), 0);
	assert_string_equal(psl_byteps_dtype_name(PSL_BYTEPS_BFLOAT16), "bfloat16");
	assert_string_equal(psl_byteps_dtype_name(8), "unknown");
}

/* The cmds of pulls that a server once served instead of refusing: each is
 * kDefaultPushPull with a data type of no size, which the server refuses
 * before looking at the key (pulls as pushes). */
static void test_bad_cmds(void **state)
{
	static const int cmds[][2] = {{5049, 99}, {77, 11}, {54, 9}};
	size_t i;
	int r, d;
	(void)state;
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		assert_int_equal(psl_byteps_cmd_parse(cmds[i][0], &r, &d), 0);
		assert_int_equal(r, PSL_BYTEPS_DEFAULT_PUSHPULL);
		assert_int_equal(d, cmds[i][1]);
		assert_int_equal(psl_byteps_dtype_size(d), 0);
	}
	/* an unknown request type with a known data type */
	assert_int_equal(psl_byteps_cmd_parse(psl_byteps_cmd(5, PSL_BYTEPS_FLOAT32), &r, &d), 0);
	assert_int_equal(r, 5);
	assert_int_equal(d, PSL_BYTEPS_FLOAT32);
}

/* ------------------------------------------------------------- queue -- */

static struct psl__bps_job jobs[16];

static void push_job(struct psl__bps_queue *q, int id, uint64_t *cnt)
{
	memset(&jobs[id], 0, sizeof(jobs[id]));
	jobs[id].rank = id;
	jobs[id].cnt = cnt;
	psl__bps_queue_push(q, &jobs[id]);
}

static int pop_id(struct psl__bps_queue *q)
{
	struct psl__bps_job *j = psl__bps_queue_pop(q);
	return j ? j->rank : -1;
}

static void test_queue_fifo(void **state)
{
	struct psl__bps_queue q;
	uint64_t a = 0, b = 0;
	(void)state;
	psl__bps_queue_init(&q, false);
	assert_int_equal(pop_id(&q), -1);
	push_job(&q, 0, &a);
	push_job(&q, 1, &b);
	push_job(&q, 2, &a);
	push_job(&q, 3, &b);
	assert_int_equal(a, 2); /* counted even when not scheduling */
	b = 0;			/* without scheduling counts do not matter */
	assert_int_equal(pop_id(&q), 0);
	assert_int_equal(pop_id(&q), 1);
	push_job(&q, 4, NULL);
	assert_int_equal(pop_id(&q), 2);
	assert_int_equal(pop_id(&q), 3);
	assert_int_equal(pop_id(&q), 4);
	assert_int_equal(pop_id(&q), -1);
	assert_int_equal(q.len, 0);
}

static void test_queue_schedule(void **state)
{
	struct psl__bps_queue q;
	uint64_t a = 0, b = 0, c = 0;
	(void)state;
	psl__bps_queue_init(&q, true);
	push_job(&q, 0, &a); /* a: 1 */
	push_job(&q, 1, &a); /* a: 2 */
	push_job(&q, 2, &b); /* b: 1 */
	push_job(&q, 3, &a); /* a: 3 */
	push_job(&q, 4, &c); /* c: 1 */
	/* fewest queued first (b and c: 1), oldest among equals (b) */
	assert_int_equal(pop_id(&q), 2);
	assert_int_equal(pop_id(&q), 4);
	/* key a's round is fully received: its count drops to 0 and its jobs go
	 * before a newer key's */
	push_job(&q, 5, &b); /* b: 2 */
	push_job(&q, 6, &c); /* c: 2 */
	a = 0;
	assert_int_equal(pop_id(&q), 0);
	assert_int_equal(pop_id(&q), 1);
	/* jobs of one key keep their order */
	push_job(&q, 7, &a); /* a: 1 */
	assert_int_equal(pop_id(&q), 3);
	assert_int_equal(pop_id(&q), 7);
	assert_int_equal(pop_id(&q), 5);
	assert_int_equal(pop_id(&q), 6);
	assert_int_equal(pop_id(&q), -1);
	/* a round's last push resets its key's count as it is queued */
	a = b = 0;
	push_job(&q, 11, &a); /* a: 1 */
	push_job(&q, 12, &b); /* b: 1 */
	push_job(&q, 13, &a); /* a: 2 */
	jobs[14] = (struct psl__bps_job){.rank = 14, .cnt = &a, .reset_cnt = true};
	psl__bps_queue_push(&q, &jobs[14]);
	assert_int_equal(a, 0);
	assert_int_equal(pop_id(&q), 11); /* a's jobs now go first */
	assert_int_equal(pop_id(&q), 13);
	assert_int_equal(pop_id(&q), 14);
	assert_int_equal(pop_id(&q), 12);
	assert_int_equal(pop_id(&q), -1);

	/* popping the last job keeps the list whole: the next push lands */
	a = b = c = 0;
	push_job(&q, 8, &b); /* b: 1 */
	push_job(&q, 9, &a); /* a: 1 */
	b = 5;
	assert_int_equal(pop_id(&q), 9); /* the tail */
	push_job(&q, 10, &c);		 /* c: 1 */
	assert_int_equal(pop_id(&q), 10);
	assert_int_equal(pop_id(&q), 8);
	assert_int_equal(pop_id(&q), -1);
}

/* ------------------------------------------------------------ engine -- */

static atomic_int ran;
static atomic_int order_ok = 1;
static atomic_int last_seen[4];

static void run(struct psl__bps_job *j, void *arg)
{
	struct timespec ts = {0, 200000};
	(void)arg;
	nanosleep(&ts, NULL);
	/* jobs of one thread run in their order */
	if (atomic_exchange(&last_seen[j->type], j->rank) > j->rank)
		atomic_store(&order_ok, 0);
	atomic_fetch_add(&ran, 1);
	free(j);
}

static void test_engine(void **state)
{
	struct psl__bps_engine *e;
	int i, t;
	(void)state;
	assert_int_equal(psl__bps_engine_new(0, false, run, NULL, &e), -EINVAL);
	assert_int_equal(psl__bps_engine_new(3, false, run, NULL, &e), 0);
	/* keys spread by load: the least loaded thread gets the next */
	assert_int_equal(psl__bps_engine_pick(e, 100), 0); /* loads 100 0 0 */
	assert_int_equal(psl__bps_engine_pick(e, 50), 1);  /* 100 50 0 */
	assert_int_equal(psl__bps_engine_pick(e, 10), 2);  /* 100 50 10 */
	assert_int_equal(psl__bps_engine_pick(e, 30), 2);  /* 100 50 40 */
	assert_int_equal(psl__bps_engine_pick(e, 20), 2);  /* 100 50 60 */
	assert_int_equal(psl__bps_engine_pick(e, 1), 1);   /* 100 51 60 */
	for (t = 0; t < 3; t++)
		atomic_store(&last_seen[t], -1);
	for (i = 0; i < 60; i++) {
		struct psl__bps_job *j = calloc(1, sizeof(*j));
		assert_non_null(j);
		j->type = i % 3;
		j->rank = i;
		psl__bps_engine_push(e, i % 3, j);
	}
	psl__bps_engine_drain(e);
	assert_int_equal(atomic_load(&ran), 60); /* drain waited for all of them */
	assert_int_equal(atomic_load(&order_ok), 1);
	for (i = 0; i < 9; i++) {
		struct psl__bps_job *j = calloc(1, sizeof(*j));
		assert_non_null(j);
		j->type = 3;
		j->rank = 100 + i;
		psl__bps_engine_push(e, 0, j);
	}
	psl__bps_engine_free(e); /* runs what is queued, then stops */
	assert_int_equal(atomic_load(&ran), 69);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cmd_values),    cmocka_unit_test(test_cmd_roundtrip),
		cmocka_unit_test(test_dtypes),	      cmocka_unit_test(test_bad_cmds),	      cmocka_unit_test(test_queue_fifo),
		cmocka_unit_test(test_queue_schedule), cmocka_unit_test(test_engine),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
