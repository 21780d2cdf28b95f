/*
 * The timestamps of a KVWorker's requests: one C++ request may be several
 * of pslite's (one per slice of a custom slicer, a pull that learns its
 * size first), so the C++ layer numbers its own and Wait() waits for them
 * here. A timestamp is pending from Open() until Close(); one that is not
 * pending is complete.
 */
#ifndef PS_INTERNAL_REQUEST_TABLE_H_
#define PS_INTERNAL_REQUEST_TABLE_H_

#include <condition_variable>
#include <mutex>
#include <unordered_set>

namespace ps {
namespace detail {

class RequestTable {
public:
	int Open()
	{
		std::lock_guard<std::mutex> lk(mu_);
		int ts = next_++;
		if (next_ < 0)
			next_ = 0;
		pending_.insert(ts);
		return ts;
	}
	void Close(int ts)
	{
		std::lock_guard<std::mutex> lk(mu_);
		pending_.erase(ts);
		cv_.notify_all();
	}
	void Wait(int ts)
	{
		std::unique_lock<std::mutex> lk(mu_);
		cv_.wait(lk, [&] { return !pending_.count(ts); });
	}

private:
	std::mutex mu_;
	std::condition_variable cv_;
	std::unordered_set<int> pending_;
	int next_ = 0;
};

} // namespace detail
} // namespace ps

#endif /* PS_INTERNAL_REQUEST_TABLE_H_ */
