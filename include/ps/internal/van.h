/*
 * What ps-lite programs use of ps-lite's ps::Van: the error codes, the
 * process-wide error handle (Van::set_err_handle), and Postoffice::van()'s
 * object with my_node() and IsReady().
 *
 * The error handle: ps-lite's byteps branch calls it when its UCX van fails
 * a transfer (StepMesh's and ps-lite's tests/test_benchmark.cc set one). On
 * pslite it is called when a KVWorker request fails (its server lost, its
 * connection reset, its deadline PS_REQUEST_TIMEOUT passed, the node not
 * started), on the pslite thread that completes the request, before the
 * request's callback; data points at the request's error (an int, pslite's
 * negative errno), reason is the ERROR line's text. Over every van, where
 * ps-lite's UCX van alone calls it. Set it before requests are made, as in
 * ps-lite (it is not guarded against a request failing while it is set).
 *
 * The van itself is a C plugin that pslite chooses and drives: a Van object
 * describes its node (my_node: role, id, the host and port the others reach
 * it at, is_recovery) and cannot send, start or stop anything.
 */
#ifndef PS_INTERNAL_VAN_H_
#define PS_INTERNAL_VAN_H_

#include <pslite.h>

#include <cerrno>
#include <functional>
#include <mutex>
#include <string>

#include "dmlc/logging.h"
#include "ps/internal/message.h"

namespace ps {

typedef enum ErrorCode {
	PS_OK,
	PS_ERR_TIMED_OUT,
	PS_ERR_NOT_CONNECTED,
	PS_ERR_CONNECTION_RESET,
	PS_ERR_OTHER
} ErrorCode;

/* (a template only so that the handle can be defined in a header) */
template <typename Unused = void>
struct VanErrHandle {
	using ErrHandle = std::function<void(void *data, ErrorCode status, std::string reason)>;
	static ErrHandle err_handle_;
};
template <typename Unused>
typename VanErrHandle<Unused>::ErrHandle VanErrHandle<Unused>::err_handle_ = nullptr;

class Van : public VanErrHandle<> {
public:
	/* handle: called for every failed KVWorker request of this process
	 * from now on (an empty handle is refused, as in ps-lite) */
	static void set_err_handle(const ErrHandle &err_handle)
	{
		CHECK(err_handle) << "invalid error handle";
		err_handle_ = err_handle;
	}

	/* pslite's error (a negative errno) as ps-lite's code */
	static ErrorCode CodeOf(int err)
	{
		switch (err) {
		case 0:
			return PS_OK;
		case -ETIMEDOUT:
			return PS_ERR_TIMED_OUT;
		case -ECONNRESET:
		case -EPIPE:
		case -ECONNABORTED:
			return PS_ERR_CONNECTION_RESET;
		case -ENOTCONN:
		case -ENOLINK:
		case -ECONNREFUSED:
		case -EHOSTUNREACH:
		case -ESHUTDOWN:
			return PS_ERR_NOT_CONNECTED;
		default:
			return PS_ERR_OTHER;
		}
	}

	/* Calls the handle, if one is set, with err and reason. */
	static void ReportError(int err, const std::string &reason)
	{
		ErrHandle h = err_handle_;
		if (h)
			h(&err, CodeOf(err), reason);
	}

	/* This node as the others see it (ps-lite's my_node()): its role, and
	 * once it started its id, host, port and is_recovery; before the start
	 * id and port are Node::kEmpty. */
	const Node &my_node() const
	{
		std::lock_guard<std::mutex> lk(mu_);
		if (node_.id == Node::kEmpty) {
			select_();
			char host[256];
			int port = 0;
			if (psl_my_address(host, sizeof host, &port) == 0 && psl_my_id() >= 0) {
				node_.hostname = host;
				node_.port = port;
				node_.is_recovery = psl_is_recovery();
				node_.id = psl_my_id(); /* last: the node is complete */
			}
		}
		return node_;
	}
	/* this node has started (it has its id) */
	bool IsReady() const { return my_node().id != Node::kEmpty; }

	/* (made by Postoffice: select makes its node the calling thread's) */
	Van(Node::Role role, std::function<void()> select) : select_(std::move(select))
	{
		node_.role = role;
	}

private:
	Van(const Van &) = delete;
	Van &operator=(const Van &) = delete;

	std::function<void()> select_;
	mutable std::mutex mu_;
	mutable Node node_;
};

} // namespace ps

#endif /* PS_INTERNAL_VAN_H_ */
