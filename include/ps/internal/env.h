/*
 * ps::Environment: where a ps-lite program reads its settings. pslite reads
 * its own from the process environment, so Init() writes the given values
 * there too (setenv): call it before StartPS, as in ps-lite.
 */
#ifndef PS_INTERNAL_ENV_H_
#define PS_INTERNAL_ENV_H_

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ps {

class Environment {
public:
	static Environment *Get() { return Shared().get(); }
	static std::shared_ptr<Environment> _GetSharedRef() { return Shared(); }

	/* The values win over the process environment, for the program and
	 * for pslite alike. */
	static Environment *Init(const std::unordered_map<std::string, std::string> &envs)
	{
		Environment *env = Get();
		std::lock_guard<std::mutex> lk(env->mu_);
		for (const auto &kv : envs) {
			env->kvs_[kv.first] = kv.second;
			setenv(kv.first.c_str(), kv.second.c_str(), 1);
		}
		return env;
	}

	/* The value of k, or nullptr if it is not set. */
	const char *find(const char *k)
	{
		std::lock_guard<std::mutex> lk(mu_);
		auto it = kvs_.find(k);
		return it == kvs_.end() ? std::getenv(k) : it->second.c_str();
	}

private:
	Environment() = default;
	static std::shared_ptr<Environment> Shared()
	{
		static std::shared_ptr<Environment> inst(new Environment());
		return inst;
	}

	std::mutex mu_;
	std::unordered_map<std::string, std::string> kvs_;
};

} // namespace ps

#endif /* PS_INTERNAL_ENV_H_ */
