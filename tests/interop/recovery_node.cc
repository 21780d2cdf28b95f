// A node of tests/interop/recovery.sh on C++ ps-lite (byteps branch): the
// counterpart of tests/integration/recovnode.c, so that C++ and pslite nodes
// can take each other's places in one job. Not built by the project: compile
// it against a ps-lite build of your own (docs/interop.md):
//
//   g++ -std=c++14 -O2 -pthread -I$PSLITE/include recovery_node.cc
//       $PSLITE/libps.a -lzmq -o recovery_node
//
// DMLC_ROLE says which node it is:
//   scheduler  starts, takes part in the start-up barrier, finalizes
//   server     a KVServer<uint64_t> whose handle overwrites: a push stores
//              the pushed values of each key, a pull answers the stored ones
//              (zeros for a key nobody pushed since this server started)
//   worker     RECOV_ROUNDS rounds (300), 10 ms apart, as recovnode's: push
//              one key of every server's range, wait, pull it, check every
//              value. C++ ps-lite reports no errors, so a round whose server
//              is lost waits (PS_RESEND=1 resends it to the replacement).
// Every node starts as BytePS's do: StartPS without the barrier, then a
// group Barrier of every node unless is_recovery() (a node that took a lost
// one's place skips it; the others passed it long ago), and prints
// "recovery_node ROLE RANK: ready (recovery N)". A worker prints "round N"
// every 20 rounds and "OK (N rounds)" (exit 0), or "FAILED ..." (exit 1).
// RECOV_END_FILE=PATH: a server finalizes only once PATH exists.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unistd.h>
#include <vector>

#include "ps/ps.h"

namespace {

const int kVals = 4; // values per key, as recovnode's

uint64_t value(uint64_t key, int round, int j)
{
	return key * 31 + static_cast<uint64_t>(round) * 7919 + static_cast<uint64_t>(j);
}

ps::Postoffice *office(ps::Node::Role role)
{
	if (role == ps::Node::SCHEDULER)
		return ps::Postoffice::GetScheduler();
	if (role == ps::Node::SERVER)
		return ps::Postoffice::GetServer();
	return ps::Postoffice::GetWorker();
}

// The server's store: key -> its values, replaced by every push.
std::mutex store_mu;
std::unordered_map<ps::Key, std::vector<uint64_t>> store;

void handle(const ps::KVMeta &req, const ps::KVPairs<uint64_t> &data,
	    ps::KVServer<uint64_t> *server)
{
	size_t n = data.keys.size();
	ps::KVPairs<uint64_t> res;
	std::lock_guard<std::mutex> lk(store_mu);
	if (req.push) {
		size_t per = n ? data.vals.size() / n : 0;
		for (size_t i = 0; i < n; i++)
			store[data.keys[i]].assign(data.vals.data() + i * per,
						   data.vals.data() + (i + 1) * per);
		server->Response(req, res);
		return;
	}
	res.keys = data.keys;
	res.vals.resize(n * kVals, 0);
	for (size_t i = 0; i < n; i++) {
		auto it = store.find(data.keys[i]);
		if (it == store.end())
			continue;
		for (size_t j = 0; j < kVals && j < it->second.size(); j++)
			res.vals[i * kVals + j] = it->second[j];
	}
	server->Response(req, res);
}

int worker_rounds(ps::KVWorker<uint64_t> *w, int rank)
{
	const char *e = getenv("RECOV_ROUNDS");
	int rounds = e ? atoi(e) : 300;
	const auto &ranges = ps::Postoffice::GetWorker()->GetServerKeyRanges();
	int ns = static_cast<int>(ranges.size());
	for (int round = 0; round < rounds; round++) {
		ps::SArray<ps::Key> keys(ns);
		ps::SArray<uint64_t> vals(ns * kVals), got;
		for (int r = 0; r < ns; r++) {
			keys[r] = ranges[r].begin() + static_cast<uint64_t>(rank) * 64 + round % 8;
			for (int j = 0; j < kVals; j++)
				vals[r * kVals + j] = value(keys[r], round, j);
		}
		w->Wait(w->ZPush(keys, vals));
		w->Wait(w->ZPull(keys, &got));
		for (size_t i = 0; i < vals.size(); i++) {
			if (i < got.size() && got[i] == vals[i])
				continue;
			printf("recovery_node worker %d: FAILED round %d: value %zu of key %" PRIu64
			       " is %" PRIu64 ", expected %" PRIu64 " (%zu values pulled)\n",
			       rank, round, i % kVals, static_cast<uint64_t>(keys[i / kVals]),
			       i < got.size() ? got[i] : 0, vals[i], got.size());
			return 1;
		}
		if (round % 20 == 0)
			printf("recovery_node worker %d: round %d\n", rank, round);
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	printf("recovery_node worker %d: OK (%d rounds)\n", rank, rounds);
	return 0;
}

} // namespace

int main(int, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	const char *r = getenv("DMLC_ROLE");
	std::string rs = r ? r : "";
	if (rs != "scheduler" && rs != "server" && rs != "worker") {
		fprintf(stderr, "recovery_node: set DMLC_ROLE to scheduler, server or worker\n");
		return 2;
	}
	ps::Node::Role role = ps::GetRole(rs);
	ps::StartPS(0, role, -1, false, argv[0]);
	ps::Postoffice *po = office(role);

	ps::KVServer<uint64_t> *server = nullptr;
	ps::KVWorker<uint64_t> *worker = nullptr;
	if (role == ps::Node::SERVER) {
		server = new ps::KVServer<uint64_t>(0);
		server->set_request_handle(handle);
	} else if (role == ps::Node::WORKER) {
		worker = new ps::KVWorker<uint64_t>(0, 0);
	}
	int rank = role == ps::Node::SCHEDULER ? 0 : po->my_rank();
	printf("recovery_node %s %d: ready (recovery %d)\n", rs.c_str(), rank,
	       po->is_recovery() ? 1 : 0);
	if (!po->is_recovery())
		po->Barrier(0, ps::kWorkerGroup + ps::kServerGroup + ps::kScheduler);
	int code = worker ? worker_rounds(worker, rank) : 0;
	const char *end = getenv("RECOV_END_FILE");
	while (server && end && *end && access(end, F_OK) != 0)
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
	ps::Finalize(0, role, true);
	return code;
}
