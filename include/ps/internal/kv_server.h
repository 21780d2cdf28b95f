/*
 * ps::KVServer<Val> on pslite's psl_kv_server, and KVServerDefaultHandle.
 *
 * The handle runs on a pslite receive thread with the request's keys,
 * values and lens in SArrays that share pslite's receive buffer (no copy):
 * a copy of them keeps that buffer after the request is answered. Each
 * request is answered once with Response(meta, res), at once or later from
 * any thread, with a copy of its KVMeta; res is sent from its own memory
 * (zero-copy), held until pslite has sent it. Requests that arrive before
 * set_request_handle wait for it. A server made before StartPS joins the
 * node when it starts.
 */
#ifndef PS_INTERNAL_KV_SERVER_H_
#define PS_INTERNAL_KV_SERVER_H_

#include <pslite.h>

#include <cerrno>
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ps/internal/kv_pairs.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/pslite_bridge.h"
#include "ps/simple_app.h"

namespace ps {

template <typename Val>
class KVServer : public SimpleApp {
public:
	/* is_scheduler: a server on the scheduler node */
	explicit KVServer(int app_id, bool is_scheduler = false, int instance_idx = 0)
		: instance_idx_(instance_idx)
	{
		SetIds(app_id, app_id,
		       is_scheduler ? Postoffice::GetScheduler() : Postoffice::GetServer(instance_idx));
		CHECK(postoffice_) << "KVServer(" << app_id << ", is_scheduler = true) on a node "
				   << "that is not the scheduler";
		started_ = Postoffice::WhenStarted([this, app_id] {
			postoffice_->Select();
			int rc = psl_kv_server_new(app_id, detail::DType<Val>(), OnRequest, this, &s_);
			CHECK(rc == 0) << "KVServer app " << app_id << ": " << detail::Reason(rc);
		});
	}
	/* (requests still waiting for a handle fail with ESHUTDOWN) */
	~KVServer() override
	{
		Postoffice::CancelWhenStarted(started_);
		for (psl_kv_request *req : waiting_)
			psl_kv_respond_error(req, -ESHUTDOWN);
		if (s_)
			psl_kv_server_free(s_);
	}

	/* (the SimpleApp forms, for the server's simple messages) */
	using SimpleApp::Response;
	using SimpleApp::set_request_handle;

	using ReqHandle = std::function<void(const KVMeta &req_meta, const KVPairs<Val> &req_data,
					     KVServer *server)>;
	void set_request_handle(const ReqHandle &request_handle)
	{
		CHECK(request_handle) << "invalid request handle";
		auto h = std::make_shared<ReqHandle>(request_handle);
		std::vector<psl_kv_request *> waiting;
		{
			std::lock_guard<std::mutex> lk(mu_);
			handle_ = h;
			waiting.swap(waiting_);
		}
		for (psl_kv_request *req : waiting)
			Dispatch(req, h);
	}

	/* Answers req: a push with nothing, a pull with res's keys, values
	 * and (if not empty) lens. */
	void Response(const KVMeta &req, const KVPairs<Val> &res = KVPairs<Val>())
	{
		psl_kv_request *r = Take(IdOf(req));
		if (!r) {
			LOG(ERROR) << "KVServer::Response to request " << req.timestamp << " of node "
				   << req.sender << ": no such request waits for an answer "
				   << "(answered already?)";
			return;
		}
		int rc;
		if (res.keys.empty()) {
			rc = psl_kv_respond(r, nullptr);
		} else {
			auto held = new KVPairs<Val>(res);
			psl_kv kv = {};
			kv.keys = held->keys.data();
			kv.num_keys = held->keys.size();
			kv.vals = held->vals.data();
			kv.num_vals = held->vals.size();
			kv.lens = held->lens.empty() ? nullptr : held->lens.data();
			kv.mem = detail::Mem(held->vals.dst_device_type_);
			kv.dev = detail::Dev(held->vals.dst_device_type_, held->vals.dst_device_id_);
			rc = psl_kv_zrespond(r, &kv, Sent, held);
		}
		if (rc)
			LOG(ERROR) << "KVServer::Response to request " << req.timestamp << " of node "
				   << req.sender << ": " << detail::Reason(rc);
	}

	/* A one-key push of keys[0] from the worker of rank worker_rank
	 * arrives in vals (held while the server exists). */
	void RegisterRecvBufferWithRank(int worker_rank, SArray<Key> &keys, const SArray<Val> &vals,
					const SArray<int> &lens = {}, int cmd = 0)
	{
		(void)lens;
		(void)cmd;
		CHECK(!keys.empty()) << "RegisterRecvBufferWithRank: no key";
		CHECK(s_) << "RegisterRecvBufferWithRank before StartPS";
		int rc = psl_kv_server_recv_buffer(
			s_, worker_rank, keys[0], vals.data(), vals.size() * sizeof(Val),
			detail::Mem(vals.dst_device_type_),
			detail::Dev(vals.dst_device_type_, vals.dst_device_id_));
		CHECK(rc == 0) << "RegisterRecvBufferWithRank(worker rank " << worker_rank << ", key "
			       << keys[0] << "): " << detail::Reason(rc);
		std::lock_guard<std::mutex> lk(mu_);
		recv_bufs_.push_back(vals);
	}
	/* the same by the worker's node id (ps-lite's older form) */
	void RegisterRecvBuffer(int worker_id, SArray<Key> &keys, const SArray<Val> &vals,
				const SArray<int> &lens = {}, int cmd = 0)
	{
		RegisterRecvBufferWithRank(Postoffice::IDtoRank(worker_id), keys, vals, lens, cmd);
	}

	int instance_idx_;

private:
	using ReqId = std::tuple<int, int, int, bool, Key>;
	static ReqId IdOf(const KVMeta &m)
	{
		return std::make_tuple(m.sender, m.customer_id, m.timestamp, m.push, m.key);
	}
	psl_kv_request *Take(const ReqId &id)
	{
		std::lock_guard<std::mutex> lk(mu_);
		auto it = open_.find(id);
		if (it == open_.end())
			return nullptr;
		psl_kv_request *r = it->second;
		open_.erase(it);
		return r;
	}
	static void Sent(void *held) { delete static_cast<KVPairs<Val> *>(held); }

	template <typename T>
	static void Share(SArray<T> &a, const std::shared_ptr<psl_kv_request> &keep, const T *p,
			  size_t n)
	{
		a.reset(const_cast<T *>(p), n, [keep](T *) {});
	}

	static KVMeta MetaOf(const psl_kv_request *req)
	{
		KVMeta m;
		m.cmd = req->meta.cmd;
		m.push = req->meta.push;
		m.sender = req->meta.sender;
		m.timestamp = req->meta.timestamp;
		m.customer_id = req->meta.customer_id;
		m.key = req->meta.key;
		m.addr = req->meta.addr;
		m.val_len = req->meta.val_len;
		m.option = req->meta.option;
		return m;
	}

	/* A request that arrives before set_request_handle waits for it. */
	static void OnRequest(psl_kv_server *, psl_kv_request *req, void *arg)
	{
		auto self = static_cast<KVServer *>(arg);
		std::shared_ptr<ReqHandle> h; /* called in place: a handle keeps state */
		{
			std::lock_guard<std::mutex> lk(self->mu_);
			if (!self->handle_) {
				self->waiting_.push_back(req);
				return;
			}
			h = self->handle_;
		}
		self->Dispatch(req, h);
	}

	void Dispatch(psl_kv_request *req, const std::shared_ptr<ReqHandle> &h)
	{
		KVMeta meta = MetaOf(req);
		psl_kv_request_hold(req);
		std::shared_ptr<psl_kv_request> keep(req, psl_kv_request_release);
		KVPairs<Val> data;
		Share(data.keys, keep, req->kv.keys, req->kv.num_keys);
		Share(data.vals, keep, static_cast<const Val *>(req->kv.vals), req->kv.num_vals);
		data.vals.dst_device_type_ = req->kv.mem == PSL_MEM_CUDA ? GPU : CPU;
		data.vals.dst_device_id_ = req->kv.mem == PSL_MEM_CUDA ? req->kv.dev : 0;
		if (req->kv.lens)
			Share(data.lens, keep, static_cast<const int *>(req->kv.lens), req->kv.num_keys);
		bool fresh;
		{
			std::lock_guard<std::mutex> lk(mu_);
			fresh = open_.emplace(IdOf(meta), req).second;
		}
		if (!fresh) {
			LOG(ERROR) << "KVServer: request " << meta.timestamp << " of node " << meta.sender
				   << " arrived twice: answered with an error";
			psl_kv_respond_error(req, -EALREADY);
			return;
		}
		(*h)(meta, data, this);
	}

	std::mutex mu_;
	std::map<ReqId, psl_kv_request *> open_;
	std::shared_ptr<ReqHandle> handle_;
	std::vector<psl_kv_request *> waiting_; /* arrived before the handle */
	std::vector<SArray<Val>> recv_bufs_;
	psl_kv_server *s_ = nullptr;
	int started_ = -1; /* (made before StartPS: created at its end) */
};

/*
 * ps-lite's ready request handle: a push adds its values to what each key
 * holds (element by element), a pull answers each key's values; a key
 * never pushed is pulled as one zero. Keys may hold any number of values
 * (lens, or vals.size() / keys.size() each).
 */
template <typename Val>
struct KVServerDefaultHandle {
	void operator()(const KVMeta &req_meta, const KVPairs<Val> &req_data, KVServer<Val> *server)
	{
		std::unique_lock<std::mutex> lk(*mu);
		size_t n = req_data.keys.size();
		if (req_meta.push) {
			size_t off = 0;
			for (size_t i = 0; i < n; ++i) {
				size_t len = CountOf(req_data, i);
				std::vector<Val> &v = store[req_data.keys[i]];
				if (v.size() < len)
					v.resize(len);
				for (size_t j = 0; j < len && off + j < req_data.vals.size(); ++j)
					v[j] += req_data.vals[off + j];
				off += len;
			}
			lk.unlock();
			server->Response(req_meta);
			return;
		}
		KVPairs<Val> res;
		res.keys = req_data.keys;
		std::vector<Val> vals;
		std::vector<int> lens;
		for (size_t i = 0; i < n; ++i) {
			std::vector<Val> &v = store[req_data.keys[i]];
			if (v.empty())
				v.resize(1);
			vals.insert(vals.end(), v.begin(), v.end());
			lens.push_back(static_cast<int>(v.size()));
		}
		res.vals = SArray<Val>(vals);
		if (!std::all_of(lens.begin(), lens.end(), [&](int l) { return l == lens[0]; }))
			res.lens = SArray<int>(lens);
		lk.unlock();
		server->Response(req_meta, res);
	}

	std::unordered_map<Key, std::vector<Val>> store;
	/* (copies of the handle share it: a handle is copied into the server) */
	std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();

private:
	static size_t CountOf(const KVPairs<Val> &d, size_t i)
	{
		if (!d.lens.empty())
			return static_cast<size_t>(d.lens[static_cast<int>(i)]);
		return d.keys.empty() ? 0 : d.vals.size() / d.keys.size();
	}
};

} // namespace ps

#endif /* PS_INTERNAL_KV_SERVER_H_ */
