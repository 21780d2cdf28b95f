/*
 * ps::KVWorker<Val> on pslite's psl_kv_worker.
 *
 * A request is sent as one pslite request, which pslite splits by the
 * servers' key ranges; with a custom slicer each of the slicer's slices is
 * its own pslite request (pslite sends each key to the server whose range
 * holds it). The zero-copy forms send from and receive into the caller's
 * SArrays and hold a copy of them until the request completes. A pull into
 * an empty array (or, with a custom slicer, any pull) first learns how
 * many values arrive: pslite's pull needs the room up front, so it asks
 * again with room when the answer did not fit (a second round trip).
 * Callbacks run on a pslite receive thread, before Wait returns; a request
 * that fails (a server lost, its deadline passed) is logged as an ERROR,
 * passed to Van::set_err_handle's handle if one is set, and completes: its
 * callback runs and Wait returns.
 */
#ifndef PS_INTERNAL_KV_WORKER_H_
#define PS_INTERNAL_KV_WORKER_H_

#include <pslite.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/kv_pairs.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/pslite_bridge.h"
#include "ps/internal/request_table.h"
#include "ps/simple_app.h"

namespace ps {

template <typename Val>
class KVWorker : public SimpleApp {
public:
	using Callback = std::function<void()>;
	using SlicedKVs = std::vector<std::pair<bool, KVPairs<Val>>>;
	using Slicer = std::function<void(const KVPairs<Val> &send, const std::vector<Range> &ranges,
					  SlicedKVs *sliced)>;
	/* (ps-lite's: whether pulls land in place; pslite's always may) */
	bool is_worker_zpull_ = true;

	explicit KVWorker(int app_id, int customer_id, int instance_idx = 0)
	{
		SetIds(app_id, customer_id, Postoffice::GetWorker(instance_idx));
		started_ = Postoffice::WhenStarted([this, app_id, customer_id] {
			postoffice_->Select();
			int rc = psl_kv_worker_new(app_id, customer_id, detail::DType<Val>(), &w_);
			CHECK(rc == 0) << "KVWorker app " << app_id << " customer " << customer_id
				       << ": " << detail::Reason(rc);
		});
	}
	/* waits for the requests still out */
	~KVWorker() override
	{
		Postoffice::CancelWhenStarted(started_);
		if (w_)
			psl_kv_worker_free(w_);
	}

	/* copy keys, vals and lens, then ZPush; lens: empty or one count per key */
	int Push(const std::vector<Key> &keys, const std::vector<Val> &vals,
		 const std::vector<int> &lens = {}, int cmd = 0, const Callback &cb = nullptr,
		 int priority = 0)
	{
		return ZPush(SArray<Key>(keys), SArray<Val>(vals), SArray<int>(lens), cmd, cb,
			     priority);
	}
	/* pulls into *vals (resized if empty) and *lens (if not nullptr), which
	 * must stay alive until the request completes */
	int Pull(const std::vector<Key> &keys, std::vector<Val> *vals, std::vector<int> *lens = nullptr,
		 int cmd = 0, const Callback &cb = nullptr, int priority = 0)
	{
		(void)priority;
		KVPairs<Val> kv;
		kv.keys = SArray<Key>(keys);
		return Request(PULL, kv, vals, lens, cmd, cb);
	}
	/* push vals, then pull the same keys into *outs (sized as vals if empty) */
	int PushPull(const std::vector<Key> &keys, const std::vector<Val> &vals, std::vector<Val> *outs,
		     std::vector<int> *lens = nullptr, int cmd = 0, const Callback &cb = nullptr,
		     int priority = 0)
	{
		(void)priority;
		KVPairs<Val> kv;
		kv.keys = SArray<Key>(keys);
		kv.vals = SArray<Val>(vals);
		if (lens && !lens->empty())
			kv.lens = SArray<int>(*lens);
		return Request(PUSHPULL, kv, outs, lens, cmd, cb);
	}

	/* until request timestamp completed (its callback ran) */
	void Wait(int timestamp) override { table_.Wait(timestamp); }

	int ZPush(const SArray<Key> &keys, const SArray<Val> &vals, const SArray<int> &lens = {},
		  int cmd = 0, const Callback &cb = nullptr, int priority = 0)
	{
		(void)priority;
		KVPairs<Val> kv;
		kv.keys = keys;
		kv.vals = vals;
		kv.lens = lens;
		return Request<SArray<Val>, SArray<int>>(PUSH, kv, nullptr, nullptr, cmd, cb);
	}
	int ZPull(const SArray<Key> &keys, SArray<Val> *vals, SArray<int> *lens = nullptr, int cmd = 0,
		  const Callback &cb = nullptr, int priority = 0)
	{
		(void)priority;
		KVPairs<Val> kv;
		kv.keys = keys;
		return Request(PULL, kv, vals, lens, cmd, cb);
	}
	int ZPushPull(const SArray<Key> &keys, const SArray<Val> &vals, SArray<Val> *outs,
		      SArray<int> *lens = nullptr, int cmd = 0, const Callback &cb = nullptr,
		      int priority = 0)
	{
		(void)priority;
		KVPairs<Val> kv;
		kv.keys = keys;
		kv.vals = vals;
		if (lens && !lens->empty())
			kv.lens = *lens;
		return Request(PUSHPULL, kv, outs, lens, cmd, cb);
	}

	void set_slicer(const Slicer &slicer)
	{
		CHECK(slicer) << "invalid slicer";
		slicer_ = slicer;
	}

private:
	enum Kind { PUSH, PULL, PUSHPULL };
	struct Op;
	/* one pslite request: a slice of the C++ request */
	struct Part {
		Op *op;
		KVPairs<Val> kv;
		psl_kv ckv = {};
		psl_kv_out out = {};
		std::vector<Val> buf;  /* where its values land unless in the caller's array */
		std::vector<int> lens; /* and its lens */
		bool buffered = false;
		int status = 0;
		std::string why;
	};
	struct Op {
		KVWorker *self;
		int ts;
		Kind kind;
		int cmd;
		Callback cb;
		KVPairs<Val> hold;	/* the caller's arrays, kept until completion */
		SArray<Val> hold_out;
		std::atomic<int> left{1};
		std::vector<std::unique_ptr<Part>> parts;
		std::function<void(Op &)> gather; /* puts buffered values in place */
	};

	template <typename C, typename D>
	int Request(Kind kind, const KVPairs<Val> &kv, C *outs, D *lens, int cmd, const Callback &cb)
	{
		CHECK(kind == PUSH || outs) << "a pull needs an array for the values, not nullptr";
		size_t nkeys = kv.keys.size();
		CHECK(!lens || lens->empty() || lens->size() == nkeys)
			<< "lens has " << lens->size() << " counts for " << nkeys << " keys";
		Op *op = new Op();
		op->self = this;
		op->ts = table_.Open();
		op->kind = kind;
		op->cmd = cmd;
		op->cb = cb;
		op->hold = kv;
		for (auto &s : Slices(kv)) {
			op->parts.emplace_back(new Part());
			op->parts.back()->op = op;
			op->parts.back()->kv = s;
		}
		if (kind != PUSH)
			PlaceOut(*op, outs, lens, kv);
		int ts = op->ts;
		Launch(op);
		return ts;
	}

	/* the default: the whole request, split by pslite */
	std::vector<KVPairs<Val>> Slices(const KVPairs<Val> &kv)
	{
		std::vector<KVPairs<Val>> out;
		if (kv.keys.empty())
			return out;
		if (!slicer_) {
			out.push_back(kv);
			return out;
		}
		const std::vector<Range> &ranges = postoffice_->GetServerKeyRanges();
		SlicedKVs sliced;
		slicer_(kv, ranges, &sliced);
		for (size_t i = 0; i < sliced.size(); i++) {
			if (!sliced[i].first || sliced[i].second.keys.empty())
				continue;
			CheckSlice(sliced[i].second, ranges, i);
			out.push_back(sliced[i].second);
		}
		return out;
	}
	static void CheckSlice(const KVPairs<Val> &s, const std::vector<Range> &ranges, size_t i)
	{
		static std::atomic<bool> told{false};
		if (i < ranges.size() && s.keys.front() >= ranges[i].begin() &&
		    s.keys.back() < ranges[i].end())
			return;
		if (!told.exchange(true))
			LOG(WARNING) << "the custom slicer put keys " << s.keys.front() << " to "
				     << s.keys.back() << " in slice " << i
				     << ", outside server " << i << "'s key range: pslite sends "
				     << "each key to the server whose range holds it";
	}

	template <typename T>
	static psl_mem_type MemOf(const SArray<T> &a) { return detail::Mem(a.src_device_type_); }
	template <typename T>
	static int DevOf(const SArray<T> &a) { return detail::Dev(a.src_device_type_, a.src_device_id_); }
	template <typename T>
	static psl_mem_type MemOf(const std::vector<T> &) { return PSL_MEM_HOST; }
	template <typename T>
	static int DevOf(const std::vector<T> &) { return 0; }
	static void Keep(Op &op, SArray<Val> *outs) { op.hold_out = *outs; }
	static void Keep(Op &, std::vector<Val> *) {}

	/* Where the answers land: straight in *outs for one slice with room,
	 * else in each slice's buffer, gathered on completion. */
	template <typename C, typename D>
	void PlaceOut(Op &op, C *outs, D *lens, const KVPairs<Val> &kv)
	{
		size_t nkeys = kv.keys.size();
		if (lens && lens->empty())
			lens->resize(nkeys);
		if (op.kind == PUSHPULL && outs->empty())
			outs->resize(kv.vals.size());
		if (op.parts.size() == 1 && !outs->empty()) {
			Part &p = *op.parts[0];
			p.out.vals = outs->data();
			p.out.cap = outs->size();
			p.out.lens = lens ? lens->data() : nullptr;
			p.out.mem = MemOf(*outs);
			p.out.dev = DevOf(*outs);
			Keep(op, outs);
			return;
		}
		size_t per = nkeys && outs->size() % nkeys == 0 ? outs->size() / nkeys : 0;
		for (auto &pp : op.parts) {
			Part &p = *pp;
			p.buffered = true;
			p.buf.resize(op.kind == PUSHPULL ? p.kv.vals.size() : per * p.kv.keys.size());
			p.out.vals = p.buf.empty() ? nullptr : p.buf.data();
			p.out.cap = p.buf.size();
			if (lens) {
				p.lens.resize(p.kv.keys.size());
				p.out.lens = p.lens.data();
			}
		}
		op.gather = [outs, lens](Op &o) { Gather(o, outs, lens); };
	}

	template <typename C, typename D>
	static void Gather(Op &op, C *outs, D *lens)
	{
		std::vector<Part *> parts;
		size_t total = 0, nkeys = 0;
		for (auto &p : op.parts) {
			parts.push_back(p.get());
			total += p->out.num_vals;
			nkeys += p->kv.keys.size();
		}
		std::sort(parts.begin(), parts.end(), [](const Part *a, const Part *b) {
			return a->kv.keys.front() < b->kv.keys.front();
		});
		if (outs->empty())
			outs->resize(total);
		if (outs->size() < total || (lens && lens->size() < nkeys)) {
			LOG(ERROR) << "request " << op.ts << ": " << total << " values arrived for an "
				   << "array of " << outs->size() << ": not stored";
			return;
		}
		Val *dst = outs->data();
		int *ldst = lens ? lens->data() : nullptr;
		for (Part *p : parts) {
			if (p->out.num_vals)
				std::memcpy(dst, p->buf.data(), p->out.num_vals * sizeof(Val));
			dst += p->out.num_vals;
			if (ldst) {
				std::memcpy(ldst, p->lens.data(), p->kv.keys.size() * sizeof(int));
				ldst += p->kv.keys.size();
			}
		}
	}

	static void Fill(Part &p)
	{
		p.ckv.keys = p.kv.keys.data();
		p.ckv.num_keys = p.kv.keys.size();
		p.ckv.vals = p.kv.vals.data();
		p.ckv.num_vals = p.kv.vals.size();
		p.ckv.lens = p.kv.lens.empty() ? nullptr : p.kv.lens.data();
		p.ckv.mem = MemOf(p.kv.vals);
		p.ckv.dev = DevOf(p.kv.vals);
	}

	static int Issue(Part &p)
	{
		psl_kv_worker *w = p.op->self->w_;
		int cmd = p.op->cmd, rc;
		if (!w) {
			p.why = "the node has not started: call ps::StartPS (or Start) first";
			return -ESHUTDOWN;
		}
		switch (p.op->kind) {
		case PUSH:
			rc = psl_kv_zpush(w, &p.ckv, cmd, OnPart, &p);
			break;
		case PULL:
			rc = psl_kv_zpull(w, p.ckv.keys, p.ckv.num_keys, &p.out, cmd, OnPart, &p);
			break;
		default:
			rc = psl_kv_zpushpull(w, &p.ckv, &p.out, cmd, OnPart, &p);
			break;
		}
		if (rc < 0)
			p.why = detail::Reason(rc);
		return rc;
	}

	static void Launch(Op *op)
	{
		op->left = static_cast<int>(op->parts.size()) + 1;
		for (auto &p : op->parts) {
			Fill(*p);
			int rc = Issue(*p);
			if (rc < 0)
				PartDone(*p, rc);
		}
		Release(op);
	}

	/* pslite's completion of one part. A buffered pull that did not fit
	 * asks again with the room the answer said it needs. */
	static void OnPart(int, int status, void *arg)
	{
		Part &p = *static_cast<Part *>(arg);
		if (status == -EMSGSIZE && p.buffered && p.op->kind == PULL &&
		    p.out.num_vals > p.buf.size()) {
			p.buf.resize(p.out.num_vals);
			p.out.vals = p.buf.data();
			p.out.cap = p.buf.size();
			p.out.num_vals = 0;
			int rc = Issue(p);
			if (rc >= 0)
				return;
			status = rc;
		}
		PartDone(p, status);
	}
	static void PartDone(Part &p, int status)
	{
		p.status = status;
		Release(p.op);
	}
	static void Release(Op *op)
	{
		if (--op->left == 0)
			Complete(op);
	}
	static void Complete(Op *op)
	{
		bool ok = true;
		for (auto &p : op->parts) {
			if (!p->status || !ok)
				continue;
			ok = false;
			std::string why = p->why.empty() ? psl_strerror(p->status) : p->why;
			LOG(ERROR) << "KVWorker request " << op->ts << " failed: " << why;
			Van::ReportError(p->status, why);
		}
		if (ok && op->gather)
			op->gather(*op);
		if (op->cb)
			op->cb();
		op->self->table_.Close(op->ts);
		delete op;
	}

	psl_kv_worker *w_ = nullptr;
	int started_ = -1; /* (made before StartPS: created at its end) */
	Slicer slicer_;
	detail::RequestTable table_;
};

} // namespace ps

#endif /* PS_INTERNAL_KV_WORKER_H_ */
