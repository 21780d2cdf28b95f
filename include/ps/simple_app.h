/*
 * ps::SimpleApp: requests and responses of an integer head and a text
 * body between nodes, on pslite's psl_simple_app. Handlers run on a pslite
 * receive thread; a request is answered with Response() there or later
 * (from a copy of its SimpleData). Without a request handle, a request is
 * answered with an empty body.
 */
#ifndef PS_SIMPLE_APP_H_
#define PS_SIMPLE_APP_H_

#include <pslite.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ps/internal/message.h"
#include "ps/internal/postoffice.h"

namespace ps {

struct SimpleData {
	int head;
	std::string body;
	int sender;
	int timestamp;
	int customer_id;
};

class SimpleApp {
public:
	/* postoffice: whose node the app belongs to in a joint process
	 * (Postoffice::GetServer() or GetWorker()); nullptr: the process's */
	explicit SimpleApp(int app_id, int customer_id, Postoffice *postoffice = nullptr)
		: SimpleApp()
	{
		app_id_ = app_id;
		customer_id_ = customer_id;
		postoffice_ = postoffice ? postoffice : Postoffice::Get();
		started_ = Postoffice::WhenStarted([this] { Open(); });
	}
	virtual ~SimpleApp()
	{
		Postoffice::CancelWhenStarted(started_);
		if (app_)
			psl_simple_app_free(app_);
	}
	SimpleApp(const SimpleApp &) = delete;
	SimpleApp &operator=(const SimpleApp &) = delete;

	/* Sends head and body to recv_id (a node id or a node group); returns
	 * the timestamp that Wait takes. */
	virtual int Request(int req_head, const std::string &req_body, int recv_id)
	{
		Open();
		int ts = psl_simple_request(app_, req_head, req_body.data(), req_body.size(), recv_id);
		CHECK(ts >= 0) << "SimpleApp request to node " << recv_id << ": "
			       << detail::Reason(ts);
		return ts;
	}
	/* Until every receiver answered request timestamp. */
	virtual void Wait(int timestamp)
	{
		Open();
		int rc = psl_simple_wait(app_, timestamp);
		if (rc)
			LOG(ERROR) << "SimpleApp request " << timestamp << ": " << detail::Reason(rc);
	}
	virtual void Response(const SimpleData &recv_req, const std::string &res_body = "")
	{
		Open();
		psl_simple_msg m = {};
		m.head = recv_req.head;
		m.sender = recv_req.sender;
		m.timestamp = recv_req.timestamp;
		m.app_id = app_id_;
		m.customer_id = recv_req.customer_id;
		m.request = true;
		int rc = psl_simple_respond(app_, &m, res_body.data(), res_body.size());
		if (rc)
			LOG(ERROR) << "SimpleApp response to node " << recv_req.sender << ": "
				   << detail::Reason(rc);
	}

	using Handle = std::function<void(const SimpleData &recved, SimpleApp *app)>;
	virtual void set_request_handle(const Handle &request_handle)
	{
		CHECK(request_handle) << "invalid request handle";
		std::lock_guard<std::mutex> lk(handle_mu_);
		request_handle_ = std::make_shared<Handle>(request_handle);
	}
	virtual void set_response_handle(const Handle &response_handle)
	{
		CHECK(response_handle) << "invalid response handle";
		std::lock_guard<std::mutex> lk(handle_mu_);
		response_handle_ = std::make_shared<Handle>(response_handle);
	}

protected:
	/* for KVWorker and KVServer: their simple messages get an app of
	 * their ids when first used */
	SimpleApp()
	{
		set_request_handle([](const SimpleData &recved, SimpleApp *app) { app->Response(recved); });
		set_response_handle([](const SimpleData &, SimpleApp *) {});
	}
	void SetIds(int app_id, int customer_id, Postoffice *postoffice)
	{
		app_id_ = app_id;
		customer_id_ = customer_id;
		postoffice_ = postoffice;
	}

	Postoffice *postoffice_ = nullptr;

private:
	void Open()
	{
		std::lock_guard<std::mutex> lk(open_mu_);
		if (app_)
			return;
		postoffice_->Select();
		int rc = psl_simple_app_new(app_id_, customer_id_, OnMessage, OnMessage, this, &app_);
		CHECK(rc == 0) << "SimpleApp " << app_id_ << " customer " << customer_id_ << ": "
			       << detail::Reason(rc);
	}
	static void OnMessage(psl_simple_app *, const psl_simple_msg *msg, void *arg)
	{
		auto self = static_cast<SimpleApp *>(arg);
		SimpleData d;
		d.head = msg->head;
		d.body.assign(msg->body ? msg->body : "", msg->body ? msg->body_len : 0);
		d.sender = msg->sender;
		d.timestamp = msg->timestamp;
		d.customer_id = msg->customer_id;
		std::shared_ptr<Handle> h; /* called in place: a handle keeps state */
		{
			std::lock_guard<std::mutex> lk(self->handle_mu_);
			h = msg->request ? self->request_handle_ : self->response_handle_;
		}
		(*h)(d, self);
	}

	int app_id_ = 0;
	int customer_id_ = 0;
	psl_simple_app *app_ = nullptr;
	int started_ = -1; /* (made before StartPS: opened at its end) */
	std::mutex open_mu_;
	std::mutex handle_mu_;
	std::shared_ptr<Handle> request_handle_;
	std::shared_ptr<Handle> response_handle_;
};

} // namespace ps

#endif /* PS_SIMPLE_APP_H_ */
