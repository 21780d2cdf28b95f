/*
 * pslite-server: BytePS's summation server, as a library call.
 *
 * BytePS runs its servers as ps-lite KV servers (app 0, values of type char)
 * that sum the tensors pushed by every worker and hand the sums back on
 * pull. This is that server, on any van:
 *
 *   psl_byteps_server_run(NULL);   // the whole node, configured by the environment
 *
 * or, inside a node that the application starts itself:
 *
 *   psl_start(0, true);
 *   psl_byteps_server_new(&opts, &srv);
 *   psl_barrier(0, PSL_GROUP_ALL);  // BytePS's workers and servers both do this
 *   psl_finalize(0, true);          // answers whatever is still held, then stops
 *   psl_byteps_server_free(srv);
 *
 * The protocol (see docs/pslite-server.md): a request carries one key and,
 * for a push, lens = {bytes}; its cmd packs BytePS's request type and data
 * type (psl_byteps_cmd). The first push of a key from every worker sets the
 * key's length and data type; after that, in sync mode, the pushes of all
 * workers for a round are summed and each worker's pull for the round is
 * answered once every worker has pushed; in async mode each push is added
 * to the store and pulls are answered at once.
 */
#ifndef PSLITE_SERVER_H
#define PSLITE_SERVER_H

#include <pslite.h>

#ifdef __cplusplus
extern "C" {
#endif

/* BytePS's DataType numbers (byteps/common/common.h). bfloat16 is 10 as in
 * BytePS's later releases; 7-9 (uint16, int16, bool) are not summed. */
enum psl_byteps_dtype {
	PSL_BYTEPS_FLOAT32 = 0,
	PSL_BYTEPS_FLOAT64 = 1,
	PSL_BYTEPS_FLOAT16 = 2,
	PSL_BYTEPS_UINT8 = 3,
	PSL_BYTEPS_INT32 = 4,
	PSL_BYTEPS_INT8 = 5,
	PSL_BYTEPS_INT64 = 6,
	PSL_BYTEPS_BFLOAT16 = 10,
};

/* BytePS's RequestType numbers. Only the default push/pull is served; the
 * others are answered with -EOPNOTSUPP. */
enum psl_byteps_request {
	PSL_BYTEPS_DEFAULT_PUSHPULL = 0,
	PSL_BYTEPS_ROW_SPARSE_PUSHPULL = 1,
	PSL_BYTEPS_COMPRESSED_PUSHPULL = 2,
};

/* The cmd a BytePS worker sends: the Cantor pairing of (request type, data
 * type), (r + d)(r + d + 1)/2 + d. Returns -EINVAL for negative or too large
 * inputs. */
PSL_EXPORT int psl_byteps_cmd(int request_type, int dtype);
/* The inverse: splits cmd into request type and data type. -EINVAL if cmd
 * is negative. */
PSL_EXPORT int psl_byteps_cmd_parse(int cmd, int *request_type, int *dtype);
/* Size of one element of dtype, 0 if pslite-server does not sum it. */
PSL_EXPORT size_t psl_byteps_dtype_size(int dtype);
/* "float32", "bfloat16", ...; "unknown" for others. */
PSL_EXPORT const char *psl_byteps_dtype_name(int dtype);

struct psl_byteps_server_opts {
	int engine_threads;   /* BYTEPS_SERVER_ENGINE_THREAD: summing threads (4) */
	bool engine_blocking; /* BYTEPS_SERVER_ENGINE_BLOCKING: sum on the receive path */
	bool enable_schedule; /* BYTEPS_SERVER_ENABLE_SCHEDULE: BytePS's engine priority */
	bool async;	      /* BYTEPS_ENABLE_ASYNC: asynchronous training */
	bool key_log;	      /* PS_KEY_LOG: log every push and pull */
	int app_id;	      /* the KV server's app id (BytePS: 0) */
};

/* Fills opts from the environment (the defaults above where a variable is
 * unset). A variable with a bad value is an error that names it. */
PSL_EXPORT int psl_byteps_server_opts_from_env(struct psl_byteps_server_opts *opts);

/*
 * Runs a whole BytePS server node, as `python -c 'import byteps.server'`
 * does: psl_start, the KV server (on the server role only; a scheduler just
 * takes part), a barrier of every node, and psl_finalize when the workers
 * finalize. opts NULL: from the environment. Returns 0 when the job ended
 * normally, else a negative errno.
 */
PSL_EXPORT int psl_byteps_server_run(const struct psl_byteps_server_opts *opts);

struct psl_byteps_server;

/* Creates the server on a started server node (psl_start has returned).
 * opts NULL: from the environment. */
PSL_EXPORT int psl_byteps_server_new(const struct psl_byteps_server_opts *opts,
				     struct psl_byteps_server **out);
/* Frees it: call after psl_finalize (which answers held requests). */
PSL_EXPORT void psl_byteps_server_free(struct psl_byteps_server *s);

struct psl_byteps_server_stats {
	uint64_t keys;	       /* keys initialised */
	uint64_t pushes;       /* pushes accepted (init pushes included) */
	uint64_t pulls;	       /* pulls answered with data */
	uint64_t rounds;       /* sync rounds completed, over all keys */
	uint64_t errors;       /* requests answered with an error */
	uint64_t bytes_summed; /* bytes of pushed data added into a store */
};

PSL_EXPORT void psl_byteps_server_get_stats(struct psl_byteps_server *s,
					    struct psl_byteps_server_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* PSLITE_SERVER_H */
