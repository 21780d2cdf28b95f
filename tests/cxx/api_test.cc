// ps-lite's public C++ API as pslite's headers have it: every call of
// ps-lite's include/ps and include/dmlc (byteps branch as of 1f763c2) that
// pslite provides, referenced with ps-lite's signatures, so that a header
// that drifts from them breaks the build. Where pslite's declaration is
// ps-lite's exactly, a pointer of ps-lite's type takes it; where pslite's has
// more (a defaulted parameter, a default argument), a call with ps-lite's
// arguments must compile and give ps-lite's type. What ps-lite has and
// pslite does not is listed in docs/coming-from-ps-lite.md ("ps-lite's API
// in pslite"). The checks that need no job run too: exit 0 and
// "api_test: OK (N checks)", or 1 with a line per failed check.
#include <ps/ps.h>

#include <cerrno>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

using namespace ps;

#define SAME_TYPE(expr, type)                                              \
	static_assert(std::is_same<decltype(expr), type>::value, #expr " is " #type \
							       " in ps-lite")

#define EXPECT_PROGRAM "api_test"
#include "expect.h"

namespace {

template <typename T>
T &Ref();

/* ---- ps/ps.h ---- */
void PsH()
{
	int (*num_workers)() = &NumWorkers;
	int (*num_servers)() = &NumServers;
	bool (*is_server)() = &IsServer;
	bool (*is_scheduler)() = &IsScheduler;
	int (*my_rank)() = &MyRank;
	Node::Role (*get_role)(const std::string) = &GetRole;
	void (*start_ps)(int, Node::Role, int, bool, const char *) = &StartPS;
	void (*finalize)(int, Node::Role, const bool) = &Finalize;
	void (*exit_cb)(const std::function<void()> &) = &RegisterExitCallback;
	(void)num_workers, (void)num_servers, (void)is_server, (void)is_scheduler, (void)my_rank;
	(void)get_role, (void)start_ps, (void)finalize, (void)exit_cb;
	/* ps-lite's default arguments */
	SAME_TYPE(StartPS(0, Node::WORKER, -1, true), void);
	SAME_TYPE(Finalize(0, Node::WORKER), void);
	/* (dmlc ps-lite's, which pslite has too) */
	bool (*is_worker)() = &IsWorker;
	(void)is_worker;
	SAME_TYPE(Start(0), void);
	SAME_TYPE(StartAsync(0), void);
	SAME_TYPE(Finalize(0, true), void);
}

/* ---- ps/base.h, ps/range.h ---- */
static_assert(std::is_same<Key, uint64_t>::value, "ps::Key");
static_assert(kMaxKey == ~static_cast<uint64_t>(0), "kMaxKey");
static_assert(kScheduler == 1 && kServerGroup == 2 && kWorkerGroup == 4, "node groups");
void RangeH()
{
	Range r0;
	Range r(1, 5);
	uint64_t (Range::*b)() const = &Range::begin;
	uint64_t (Range::*e)() const = &Range::end;
	uint64_t (Range::*s)() const = &Range::size;
	(void)r0, (void)b, (void)e, (void)s;
	Expect(r.size() == 4 && r.begin() == 1 && r.end() == 5, "Range");
}

/* ---- ps/sarray.h ---- */
template <typename V>
void SArrayH()
{
	using A = SArray<V>;
	static_assert(UNK == 0 && CPU == 1 && GPU == 2, "DeviceType");
	static_assert(std::is_constructible<A, size_t>::value, "SArray(size)");
	static_assert(std::is_constructible<A, size_t, V>::value, "SArray(size, val)");
	static_assert(std::is_constructible<A, const SArray<uint8_t> &>::value,
		      "SArray(SArray<W>)");
	static_assert(std::is_constructible<A, V *, size_t>::value, "SArray(data, size)");
	static_assert(std::is_constructible<A, V *, size_t, bool>::value, "SArray(data, size, del)");
	static_assert(std::is_constructible<A, V *, size_t, DeviceType, int, DeviceType, int>::value,
		      "SArray(data, size, devices)");
	static_assert(
		std::is_constructible<A, V *, size_t, DeviceType, int, DeviceType, int, bool>::value,
		"SArray(data, size, devices, deletable)");
	static_assert(std::is_constructible<A, const std::vector<V> &>::value, "SArray(vector)");
	static_assert(std::is_constructible<A, const std::shared_ptr<std::vector<V>> &>::value,
		      "SArray(shared_ptr<vector>)");
	static_assert(!std::is_convertible<const std::vector<V> &, A>::value,
		      "SArray(vector) is explicit");
	SAME_TYPE(Ref<A>() = Ref<const SArray<uint8_t>>(), void);
	SAME_TYPE(Ref<A>() = std::initializer_list<int>(), void);
	void (A::*copy_from_ptr)(const V *, size_t) = &A::CopyFrom;
	void (A::*copy_from_arr)(const A &) = &A::CopyFrom;
	SAME_TYPE(Ref<A>().CopyFrom(Ref<const V *>(), Ref<const V *>()), void);
	SAME_TYPE(Ref<A>().reset(Ref<V *>(), size_t(1), Ref<void (*)(V *)>()), void);
	SAME_TYPE(Ref<A>().reset(Ref<V *>(), size_t(1), Ref<void (*)(V *)>(), GPU, 0, CPU, 0),
		  void);
	void (A::*resize)(size_t, V) = &A::resize;
	void (A::*reserve)(size_t) = &A::reserve;
	void (A::*clear)() = &A::clear;
	bool (A::*empty)() const = &A::empty;
	size_t (A::*size)() const = &A::size;
	size_t (A::*capacity)() const = &A::capacity;
	V *(A::*begin)() = &A::begin;
	const V *(A::*cbegin)() const = &A::begin;
	V *(A::*end)() = &A::end;
	const V *(A::*cend)() const = &A::end;
	V *(A::*data)() const = &A::data;
	std::shared_ptr<V> &(A::*ptr)() = &A::ptr;
	const std::shared_ptr<V> &(A::*cptr)() const = &A::ptr;
	V (A::*back)() const = &A::back;
	V (A::*front)() const = &A::front;
	V &(A::*at)(int) = &A::operator[];
	const V &(A::*cat)(int) const = &A::operator[];
	void (A::*push_back)(const V &) = &A::push_back;
	void (A::*pop_back)() = &A::pop_back;
	void (A::*append)(const A &) = &A::append;
	A (A::*segment)(size_t, size_t) const = &A::segment;
	std::string (A::*debug)() const = &A::DebugString;
	DeviceType A::*sdt = &A::src_device_type_;
	int A::*sdi = &A::src_device_id_;
	DeviceType A::*ddt = &A::dst_device_type_;
	int A::*ddi = &A::dst_device_id_;
	Range (*find_range)(const A &, V, V) = &FindRange<V>;
	std::string (*debug_str)(const V *, int, int) = &DebugStr<V>;
	SAME_TYPE(DebugStr(Ref<const V *>(), 3), std::string);
	SAME_TYPE(Ref<std::ostream>() << Ref<const A>(), std::ostream &);
	(void)copy_from_ptr, (void)copy_from_arr, (void)resize, (void)reserve, (void)clear;
	(void)empty, (void)size, (void)capacity, (void)begin, (void)cbegin, (void)end, (void)cend;
	(void)data, (void)ptr, (void)cptr, (void)back, (void)front, (void)at, (void)cat;
	(void)push_back, (void)pop_back, (void)append, (void)segment, (void)debug;
	(void)sdt, (void)sdi, (void)ddt, (void)ddi, (void)find_range, (void)debug_str;
	Expect(std::string(DeviceTypeName[GPU]) == "GPU", "DeviceTypeName");
}

/* ---- ps/internal/env.h, utils.h, message.h ---- */
void EnvUtilsMessageH()
{
	Environment *(*get)() = &Environment::Get;
	std::shared_ptr<Environment> (*shared)() = &Environment::_GetSharedRef;
	Environment *(*init)(const std::unordered_map<std::string, std::string> &) =
		&Environment::Init;
	const char *(Environment::*find)(const char *) = &Environment::find;
	int (*get_env_int)(const char *, int) = &GetEnv;
	std::string (*get_env_str)(const char *, std::string) = &GetEnv<std::string>;
	(void)get, (void)shared, (void)init, (void)find, (void)get_env_int, (void)get_env_str;
	struct NoCopy {
		NoCopy() {}
		DISALLOW_COPY_AND_ASSIGN(NoCopy);
	};
	static_assert(!std::is_copy_constructible<NoCopy>::value ||
			      std::is_copy_constructible<NoCopy>::value,
		      "DISALLOW_COPY_AND_ASSIGN expands in a class");
	SAME_TYPE(LL << 1, std::ostream &);

	static_assert(CHAR == 0 && INT8 == 1 && UINT64 == 8 && FLOAT == 9 && DOUBLE == 10 &&
			      OTHER == 11,
		      "DataType");
	Expect(std::string(DataTypeName[FLOAT]) == "FLOAT", "DataTypeName");
	bool (*same_type)() = &SameType<const int, int>;
	DataType (*data_type)() = &GetDataType<float>;
	(void)same_type, (void)data_type;
	Expect(GetDataType<const int32_t>() == INT32 && GetDataType<double>() == DOUBLE &&
		       GetDataType<char>() == OTHER,
	       "GetDataType");

	static_assert(Node::SERVER == 0 && Node::WORKER == 1 && Node::SCHEDULER == 2 &&
			      Node::JOINT == 3,
		      "Node::Role");
	Node n;
	n.role = Node::WORKER;
	n.id = 9;
	n.customer_id = 0;
	n.hostname = "h";
	n.port = 1234;
	n.is_recovery = false;
	std::string (Node::*debug)() const = &Node::DebugString;
	std::string (Node::*short_debug)() const = &Node::ShortDebugString;
	(void)debug, (void)short_debug;
	const int empty = Node::kEmpty;
	Expect(n.ShortDebugString() == "W[9]" && Node().id == empty, "Node");
}

/* ---- ps/internal/postoffice.h ---- */
void PostofficeH()
{
	Postoffice *(*get)() = &Postoffice::Get;
	Postoffice *(*get_server)(int) = &Postoffice::GetServer;
	Postoffice *(*get_scheduler)() = &Postoffice::GetScheduler;
	Postoffice *(*get_worker)(int) = &Postoffice::GetWorker;
	SAME_TYPE(Postoffice::GetServer(), Postoffice *);
	SAME_TYPE(Postoffice::GetWorker(), Postoffice *);
	void (Postoffice::*start)(int, const Node::Role, int, const bool, const char *) =
		&Postoffice::Start;
	void (Postoffice::*finalize)(const int, const bool) = &Postoffice::Finalize;
	SAME_TYPE(Ref<Postoffice>().Finalize(0), void);
	const std::vector<int> &(Postoffice::*node_ids)(int) const = &Postoffice::GetNodeIDs;
	const std::vector<Range> &(Postoffice::*ranges)() = &Postoffice::GetServerKeyRanges;
	static_assert(std::is_same<Postoffice::Callback, std::function<void()>>::value,
		      "Postoffice::Callback");
	void (Postoffice::*exit_cb)(const Postoffice::Callback &) =
		&Postoffice::RegisterExitCallback;
	int (Postoffice::*gw)(int, int) = &Postoffice::GroupWorkerRankToInstanceID;
	int (Postoffice::*gs)(int, int) = &Postoffice::GroupServerRankToInstanceID;
	int (Postoffice::*ig)(int) = &Postoffice::InstanceIDtoGroupRank;
	int (*w2id)(int) = &Postoffice::WorkerRankToID;
	int (*s2id)(int) = &Postoffice::ServerRankToID;
	int (*id2r)(int) = &Postoffice::IDtoRank;
	int (Postoffice::*group_size)() const = &Postoffice::group_size;
	int (Postoffice::*num_workers)() const = &Postoffice::num_workers;
	int (Postoffice::*num_servers)() const = &Postoffice::num_servers;
	int (Postoffice::*nwi)() const = &Postoffice::num_worker_instances;
	int (Postoffice::*nsi)() const = &Postoffice::num_server_instances;
	int (Postoffice::*my_rank)() const = &Postoffice::my_rank;
	int (Postoffice::*preferred_rank)() const = &Postoffice::preferred_rank;
	int (Postoffice::*is_worker)() const = &Postoffice::is_worker;
	int (Postoffice::*is_server)() const = &Postoffice::is_server;
	int (Postoffice::*is_scheduler)() const = &Postoffice::is_scheduler;
	std::string (Postoffice::*role_str)() const = &Postoffice::role_str;
	int (Postoffice::*verbose)() const = &Postoffice::verbose;
	bool (Postoffice::*is_recovery)() const = &Postoffice::is_recovery;
	void (Postoffice::*barrier)(int, int) = &Postoffice::Barrier;
	std::vector<int> (Postoffice::*dead)(int) = &Postoffice::GetDeadNodes;
	(void)dead;
	(void)get, (void)get_server, (void)get_scheduler, (void)get_worker, (void)start;
	(void)finalize, (void)node_ids, (void)ranges, (void)exit_cb, (void)gw, (void)gs, (void)ig;
	(void)w2id, (void)s2id, (void)id2r, (void)group_size, (void)num_workers, (void)num_servers;
	(void)nwi, (void)nsi, (void)my_rank, (void)preferred_rank, (void)is_worker, (void)is_server;
	(void)is_scheduler, (void)role_str, (void)verbose, (void)is_recovery, (void)barrier;
	Expect(Postoffice::WorkerRankToID(0) == 9 && Postoffice::ServerRankToID(2) == 12 &&
		       Postoffice::IDtoRank(11) == 1 && Postoffice::IDtoRank(1) == 0,
	       "the id <-> rank mapping is ps-lite's");
	int v = 0;
	PS_VLOG(100) << (v = 1);
	Expect(v == 0, "PS_VLOG");
}

/* ---- ps/internal/van.h: the error handle ---- */
void VanH()
{
	static_assert(PS_OK == 0 && PS_ERR_TIMED_OUT == 1 && PS_ERR_NOT_CONNECTED == 2 &&
			      PS_ERR_CONNECTION_RESET == 3 && PS_ERR_OTHER == 4,
		      "ErrorCode");
	static_assert(std::is_same<Van::ErrHandle, std::function<void(void *, ErrorCode,
								       std::string)>>::value,
		      "Van::ErrHandle");
	void (*set)(const Van::ErrHandle &) = &Van::set_err_handle;
	Van *(Postoffice::*van)() = &Postoffice::van;
	const Node &(Van::*my_node)() const = &Van::my_node;
	bool (Van::*ready)() const = &Van::IsReady;
	(void)van, (void)my_node, (void)ready;
	Van::ErrHandle *h = &Van::err_handle_;
	(void)set, (void)h;
	Expect(Van::CodeOf(-ETIMEDOUT) == PS_ERR_TIMED_OUT &&
		       Van::CodeOf(-ECONNRESET) == PS_ERR_CONNECTION_RESET &&
		       Van::CodeOf(-ENOLINK) == PS_ERR_NOT_CONNECTED && Van::CodeOf(-EINVAL) == PS_ERR_OTHER,
	       "pslite's errors as ps-lite's codes");
}

/* ---- ps/simple_app.h ---- */
void SimpleAppH()
{
	SimpleData d;
	d.head = 1;
	d.body = "b";
	d.sender = 9;
	d.timestamp = 0;
	d.customer_id = 0;
	static_assert(std::is_constructible<SimpleApp, int, int, Postoffice *>::value,
		      "SimpleApp(app_id, customer_id, postoffice)");
	int (SimpleApp::*request)(int, const std::string &, int) = &SimpleApp::Request;
	void (SimpleApp::*wait)(int) = &SimpleApp::Wait;
	void (SimpleApp::*response)(const SimpleData &, const std::string &) = &SimpleApp::Response;
	SAME_TYPE(Ref<SimpleApp>().Response(d), void);
	static_assert(std::is_same<SimpleApp::Handle,
				   std::function<void(const SimpleData &, SimpleApp *)>>::value,
		      "SimpleApp::Handle");
	void (SimpleApp::*req_h)(const SimpleApp::Handle &) = &SimpleApp::set_request_handle;
	void (SimpleApp::*res_h)(const SimpleApp::Handle &) = &SimpleApp::set_response_handle;
	static_assert(std::has_virtual_destructor<SimpleApp>::value, "virtual ~SimpleApp");
	(void)request, (void)wait, (void)response, (void)req_h, (void)res_h;
}

/* ---- ps/kv_app.h ---- */
template <typename Val>
void KVAppH()
{
	using W = KVWorker<Val>;
	using S = KVServer<Val>;
	using Cb = typename W::Callback;
	static_assert(std::is_same<Cb, std::function<void()>>::value, "KVWorker::Callback");
	static_assert(std::is_base_of<SimpleApp, W>::value && std::is_base_of<SimpleApp, S>::value,
		      "KVWorker and KVServer are SimpleApps");
	KVPairs<Val> kv;
	SArray<Key> KVPairs<Val>::*keys = &KVPairs<Val>::keys;
	SArray<Val> KVPairs<Val>::*vals = &KVPairs<Val>::vals;
	SArray<int> KVPairs<Val>::*lens = &KVPairs<Val>::lens;
	(void)kv, (void)keys, (void)vals, (void)lens;

	static_assert(std::is_constructible<W, int, int>::value &&
			      std::is_constructible<W, int, int, int>::value,
		      "KVWorker(app_id, customer_id[, instance_idx])");
	bool W::*zpull = &W::is_worker_zpull_;
	(void)zpull;
/* (ps-lite's arguments, for the calls below) */
#define K Ref<const std::vector<Key>>()
#define V Ref<const std::vector<Val>>()
#define L Ref<const std::vector<int>>()
#define CB Ref<const Cb>()
#define SK Ref<const SArray<Key>>()
#define SV Ref<const SArray<Val>>()
	SAME_TYPE(Ref<W>().Push(K, V), int);
	SAME_TYPE(Ref<W>().Push(K, V, L, 0, CB), int);
	SAME_TYPE(Ref<W>().Pull(K, Ref<std::vector<Val> *>()), int);
	SAME_TYPE(Ref<W>().Pull(K, Ref<std::vector<Val> *>(), Ref<std::vector<int> *>(), 0, CB),
		  int);
	void (W::*wait)(int) = &W::Wait;
	(void)wait;
	SAME_TYPE(Ref<W>().ZPush(SK, SV), int);
	SAME_TYPE(Ref<W>().ZPush(SK, SV, Ref<const SArray<int>>(), 0, CB), int);
	SAME_TYPE(Ref<W>().ZPull(SK, Ref<SArray<Val> *>()), int);
	SAME_TYPE(Ref<W>().ZPull(SK, Ref<SArray<Val> *>(), Ref<SArray<int> *>(), 0, CB), int);
	static_assert(
		std::is_same<typename W::SlicedKVs, std::vector<std::pair<bool, KVPairs<Val>>>>::value,
		"KVWorker::SlicedKVs");
	static_assert(std::is_same<typename W::Slicer,
				   std::function<void(const KVPairs<Val> &, const std::vector<Range> &,
						      typename W::SlicedKVs *)>>::value,
		      "KVWorker::Slicer");
	void (W::*set_slicer)(const typename W::Slicer &) = &W::set_slicer;
	(void)set_slicer;

	KVMeta m;
	m.cmd = 0;
	m.push = true;
	m.sender = 9;
	m.timestamp = 0;
	m.customer_id = 0;
	m.key = Key(1);
	m.addr = uint64_t(0);
	m.val_len = 0;
	m.option = 0;
	(void)m;

	static_assert(std::is_constructible<S, int>::value && std::is_constructible<S, int, bool>::value &&
			      std::is_constructible<S, int, bool, int>::value,
		      "KVServer(app_id[, is_scheduler[, instance_idx]])");
	static_assert(std::is_same<typename S::ReqHandle,
				   std::function<void(const KVMeta &, const KVPairs<Val> &, S *)>>::value,
		      "KVServer::ReqHandle");
	void (S::*set_handle)(const typename S::ReqHandle &) = &S::set_request_handle;
	void (S::*response)(const KVMeta &, const KVPairs<Val> &) = &S::Response;
	SAME_TYPE(Ref<S>().Response(m), void);
	void (S::*recv_buf)(int, SArray<Key> &, const SArray<Val> &, const SArray<int> &, int) =
		&S::RegisterRecvBuffer;
	void (S::*recv_buf_rank)(int, SArray<Key> &, const SArray<Val> &, const SArray<int> &,
				 int) = &S::RegisterRecvBufferWithRank;
	SAME_TYPE(Ref<S>().RegisterRecvBufferWithRank(0, Ref<SArray<Key>>(), SV), void);
#undef K
#undef V
#undef L
#undef CB
#undef SK
#undef SV
	int S::*instance_idx = &S::instance_idx_;
	(void)set_handle, (void)response, (void)recv_buf, (void)recv_buf_rank, (void)instance_idx;

	/* a KVServerDefaultHandle is a KVServer's request handle */
	static_assert(std::is_convertible<KVServerDefaultHandle<Val>, typename S::ReqHandle>::value,
		      "KVServerDefaultHandle");
}

/* ---- dmlc/base.h, dmlc/logging.h ---- */
void DmlcH()
{
	static_assert(DMLC_USE_CXX11 && DMLC_LOG_FATAL_THROW == 1, "dmlc/base.h switches");
	void (*init_logging)(const char *) = &dmlc::InitLogging;
	(void)init_logging;
	static_assert(std::is_base_of<std::runtime_error, dmlc::Error>::value &&
			      std::is_constructible<dmlc::Error, const std::string &>::value,
		      "dmlc::Error");
	static_assert(std::is_constructible<dmlc::LogMessage, const char *, int>::value &&
			      std::is_constructible<dmlc::LogMessageFatal, const char *, int>::value,
		      "dmlc::LogMessage(file, line), LogMessageFatal(file, line)");
	SAME_TYPE(LOG(INFO) << 1, std::ostream &);
	SAME_TYPE(LG << 1, std::ostream &);
	SAME_TYPE(LOG_EVERY_N(INFO, 10) << 1, std::ostream &);
	std::vector<int> v;
	std::string s;
	Expect(dmlc::BeginPtr(v) == nullptr && dmlc::BeginPtr(s) == nullptr, "BeginPtr of empty");
	v.push_back(1);
	s = "x";
	const std::vector<int> &cv = v;
	Expect(dmlc::BeginPtr(v) == &v[0] && dmlc::BeginPtr(cv) == &v[0] && *dmlc::BeginPtr(s) == 'x',
	       "BeginPtr");
	int x = 1;
	DCHECK_EQ(x, 1);
	DLOG_IF(INFO, false) << "not shown";
	LOG_IF(INFO, false) << "not shown";
	VLOG(100) << "not shown";
	Expect(CHECK_NOTNULL(&x) == &x, "CHECK_NOTNULL");
}

/* A request that fails reaches the error handle, then completes. */
void ErrHandleRuns()
{
	int calls = 0, err = 0;
	ErrorCode code = PS_OK;
	std::string reason;
	Van::set_err_handle([&](void *data, ErrorCode status, std::string why) {
		calls++;
		err = *static_cast<int *>(data);
		code = status;
		reason = why;
	});
	{
		KVWorker<float> kv(0, 0); /* no StartPS: the request fails at once */
		int cbs = 0;
		kv.Wait(kv.Push({1, 2}, {1.0f, 2.0f}, {}, 0, [&] { cbs++; }));
		Expect(cbs == 1, "the failed request's callback ran and Wait returned");
	}
	Expect(calls == 1 && err == -ESHUTDOWN && code == PS_ERR_NOT_CONNECTED &&
		       reason.find("has not started") != std::string::npos,
	       "Van::set_err_handle's handle got the failed request (" + std::to_string(calls) +
		       " calls, " + std::to_string(err) + ", " + reason + ")");
	bool thrown = false;
	try {
		Van::set_err_handle(nullptr);
	} catch (const dmlc::Error &) {
		thrown = true;
	}
	Expect(thrown, "an empty error handle is refused");
	Van::err_handle_ = nullptr;
}

} // namespace

int main()
{
	PsH();
	RangeH();
	SArrayH<float>();
	SArrayH<int64_t>();
	SArrayH<char>();
	EnvUtilsMessageH();
	PostofficeH();
	VanH();
	SimpleAppH();
	KVAppH<float>();
	KVAppH<int>();
	KVAppH<char>();
	DmlcH();
	ErrHandleRuns();
	return ExpectReport();
}
