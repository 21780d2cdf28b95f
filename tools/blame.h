/*
 * Which node of a job pslite-run started is the misconfigured one: a node
 * whose counts (DMLC_NUM_SERVER, DMLC_NUM_WORKER, DMLC_GROUP_SIZE) differ
 * from the scheduler's is refused, and both the scheduler and the refused
 * node log a line naming the variable and both values (core/registration.c).
 * Which side is wrong only pslite-run knows: it set the values itself.
 * Pure functions (tests/unit/test_launch.c).
 */
#ifndef PSL_TOOLS_BLAME_H
#define PSL_TOOLS_BLAME_H

#include <stdbool.h>
#include <stddef.h>

/* A count mismatch read from one output line. */
struct psl_blame {
	char var[32];   /* DMLC_NUM_SERVER, DMLC_NUM_WORKER or DMLC_GROUP_SIZE */
	long node_val;  /* the refused node's value (when !sched_odd_line) */
	long sched_val; /* the scheduler's */
	char node[96];  /* "worker at 127.0.0.1:40001" */
	bool own;       /* the refused node's own line, not the scheduler's */
};

/*
 * Reads a line a pslite node logged: true when it is a refusal for other
 * counts (the scheduler's "refused the registration of ..." or the node's
 * "... refused this node's registration: ..."), with b filled in.
 */
bool psl_blame_parse(const char *line, struct psl_blame *b);

/*
 * Names the misconfigured node in out (one sentence, no newline): want is
 * the value pslite-run set for b->var, label the label of the child whose
 * line it was. Returns 1 when the refused node is the odd one, 2 when the
 * scheduler is, 0 when neither has what pslite-run set (out then repeats
 * both values).
 */
int psl_blame_judge(const struct psl_blame *b, long want, const char *label, char *out,
		    size_t len);

#endif
