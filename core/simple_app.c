/* SimpleApp: request/response with a head and a body (ps-lite's SimpleApp). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "customer.h"
#include "log.h"
#include "postoffice.h"
#include "van_host.h"

struct psl_simple_app {
	struct psl__customer c;
	psl_simple_handler on_request;
	psl_simple_handler on_response;
	void *arg;
};

static int send_msg(struct psl_simple_app *app, int recver, int head, const void *body,
		    size_t len, bool request, int customer_id, int ts)
{
	struct psl__meta m;
	psl__enter(app->c.office);
	psl__meta_init(&m);
	m.head = head;
	m.app_id = app->c.app_id;
	m.customer_id = customer_id;
	m.timestamp = ts;
	m.request = request;
	m.simple_app = true;
	m.body = body;
	m.body_size = (int)len;
	m.recver = recver;
	m.key = 0;
	m.val_len = 0;
	m.option = 0;
	m.sid = 0;
	return psl__send(app->c.office, &m, NULL, 0, NULL);
}

/* The argument check of a request or response that failed. */
static int bad_args(const char *call, const struct psl_simple_app *app, const void *body,
		    size_t len)
{
	return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "%s: %s", call,
			!app ? "app is NULL"
			: len && !body ? "body is NULL but len is not 0"
				       : "len is above 2^31-1 bytes");
}

int psl_simple_request(struct psl_simple_app *app, int head, const void *body, size_t len,
		       int recv_id)
{
	struct psl__office *o;
	struct psl__customer *c;
	struct psl__req *r;
	int *ids, n, i, ts;
	bool done = false;

	psl__clear_error();
	if (!app || (len && !body) || len > 0x7fffffff)
		return bad_args("psl_simple_request", app, body, len);
	if (app->c.office->state != PSL__READY)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_simple_request: pslite is not "
				"started on this node (or is finalizing)");
	c = &app->c;
	o = c->office;
	ids = malloc(sizeof(int) * (size_t)(o->cfg.num_workers + o->cfg.num_servers + 1));
	if (!ids)
		return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_simple_request: out of memory");
	if (recv_id >= 1 && recv_id <= 7) {
		n = psl__group_members(o, recv_id, ids);
		if (o->cfg.group_size > 1 && o->role != PSL_SCHEDULER) {
			/* instance groups: instance i of each member group, as KV requests */
			int k = 0;
			for (i = 0; i < n; i++)
				if (ids[i] == 1 || psl_id_to_rank(ids[i]) % o->cfg.group_size ==
							   o->cfg.instance)
					ids[k++] = ids[i];
			n = k;
		}
	} else if (recv_id >= 8 && recv_id <= o->max_id && o->peers[recv_id].known) {
		ids[0] = recv_id;
		n = 1;
	} else {
		free(ids);
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_simple_request: recv_id %d is neither "
				"a node group (1-7) nor a node id of this job", recv_id);
	}
	pthread_mutex_lock(&c->mu);
	r = psl__req_new_locked(c);
	if (!r) {
		pthread_mutex_unlock(&c->mu);
		free(ids);
		return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_simple_request: out of memory");
	}
	for (i = 0; i < n; i++)
		psl__req_expect_locked(c, r, ids[i]);
	ts = r->ts;
	if (!r->awaiting) {
		r->state = PSL__REQ_COMPLETING;
		done = true;
	}
	pthread_mutex_unlock(&c->mu);
	if (done) {
		psl__req_finish(c, r);
		free(ids);
		return ts;
	}
	for (i = 0; i < n; i++) {
		int rc = psl__send_check(o, ids[i]);
		if (!rc)
			rc = send_msg(app, ids[i], head, body, len, true, c->customer_id, ts);
		if (rc) {
			pthread_mutex_lock(&c->mu);
			r = psl__req_find_locked(c, ts);
			done = r && psl__req_answer_locked(c, r, ids[i], rc);
			pthread_mutex_unlock(&c->mu);
			if (done)
				psl__req_finish(c, r);
		}
	}
	free(ids);
	return ts;
}

int psl_simple_respond(struct psl_simple_app *app, const struct psl_simple_msg *req,
		       const void *body, size_t len)
{
	psl__clear_error();
	if (!req)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_simple_respond: req is NULL");
	if (!app || (len && !body) || len > 0x7fffffff)
		return bad_args("psl_simple_respond", app, body, len);
	return psl__ret("psl_simple_respond",
			send_msg(app, req->sender, req->head, body, len, false, req->customer_id,
				 req->timestamp));
}

int psl_simple_wait(struct psl_simple_app *app, int ts)
{
	psl__clear_error();
	if (!app)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_simple_wait: app is NULL");
	if (ts < 0)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_simple_wait: ts %d is negative: pass "
				"what psl_simple_request returned", ts);
	psl__enter(app->c.office);
	return psl__ret("psl_simple_wait", psl__req_wait(&app->c, ts));
}

static void sa_on_msg(struct psl__customer *c, struct psl__meta *m, struct psl_van_rmsg *raw)
{
	struct psl_simple_app *app = (struct psl_simple_app *)c;
	struct psl_simple_msg msg = {
		.head = m->head,
		.body = m->body,
		.body_len = (size_t)m->body_size,
		.sender = m->sender,
		.timestamp = m->timestamp,
		.app_id = m->app_id,
		.customer_id = m->customer_id,
		.request = m->request,
	};
	char d[96];

	if (m->request) {
		if (app->on_request)
			PSL__USER_CALL(app->on_request(app, &msg, app->arg));
		else
			psl_simple_respond(app, &msg, NULL, 0);
	} else {
		struct psl__req *r;
		bool done;
		pthread_mutex_lock(&c->mu);
		r = psl__req_find_locked(c, m->timestamp);
		if (!r || !psl__req_awaits_locked(c, r, m->sender)) {
			pthread_mutex_unlock(&c->mu);
			PSL_WARN("dropped a SimpleApp response from %s for request %d of app %d: "
				 "no such request is waiting for that node",
				 psl__node_desc(c->office, m->sender, d, sizeof(d)), m->timestamp, c->app_id);
			psl__raw_release(raw);
			return;
		}
		pthread_mutex_unlock(&c->mu);
		if (app->on_response)
			PSL__USER_CALL(app->on_response(app, &msg, app->arg));
		pthread_mutex_lock(&c->mu);
		r = psl__req_find_locked(c, m->timestamp);
		done = r && psl__req_answer_locked(c, r, m->sender, 0);
		pthread_mutex_unlock(&c->mu);
		if (done)
			psl__req_finish(c, r);
	}
	psl__raw_release(raw);
}

static const struct psl__customer_ops sa_ops = {
	.on_msg = sa_on_msg,
};

int psl_simple_app_new(int app_id, int customer_id, psl_simple_handler on_request,
		       psl_simple_handler on_response, void *arg, struct psl_simple_app **out)
{
	struct psl__office *o;
	struct psl_simple_app *app;
	int rc;

	psl__clear_error();
	if (!out)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_simple_app_new: out is NULL");
	o = psl__enter_selected();
	if (o->state != PSL__READY)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_simple_app_new: pslite is not "
				"started on this node: call psl_start first");
	app = calloc(1, sizeof(*app));
	if (!app)
		return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_simple_app_new: out of memory");
	rc = psl__customer_init(o, &app->c, app_id, customer_id, &sa_ops);
	if (rc) {
		free(app);
		return psl__ret("psl_simple_app_new", rc);
	}
	app->c.timeout_ms = o->cfg.request_timeout_s * 1000;
	app->on_request = on_request;
	app->on_response = on_response;
	app->arg = arg;
	rc = psl__customer_add(&app->c);
	if (rc) {
		rc = PSL_FAIL(rc, PSL_LOG_WARN, "psl_simple_app_new: app %d customer %d already "
			      "exists on this node: free it first or use another customer_id",
			      app_id, customer_id);
		psl__customer_remove(app->c.office, &app->c);
		free(app);
		return rc;
	}
	*out = app;
	return 0;
}

void psl_simple_app_free(struct psl_simple_app *app)
{
	if (!app || psl__customer_in_own_callback(&app->c, false, "psl_simple_app_free"))
		return;
	psl__customer_remove(app->c.office, &app->c);
	free(app);
}
