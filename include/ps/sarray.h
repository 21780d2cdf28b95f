/*
 * ps::SArray<V>: a shared array. Copies share one buffer (a shared_ptr):
 * copying an SArray, taking a segment of it or viewing it as another
 * element type never copies the data, and the buffer lives as long as any
 * of them. A zero-copy request (ZPush, ZPull, ZPushPull, a server's
 * Response) holds such a copy until it completes, so the caller may drop
 * its own at once.
 *
 * The device fields say where the buffer lives: on a worker the src_device
 * fields, on a server the dst_device fields (CPU: host memory, GPU: a CUDA
 * device's memory, its ordinal in the id).
 */
#ifndef PS_SARRAY_H_
#define PS_SARRAY_H_

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "ps/internal/utils.h"
#include "ps/range.h"

namespace ps {

enum DeviceType { UNK, CPU, GPU };

static const char *const DeviceTypeName[] = {"UNK", "CPU", "GPU"};

template <typename V>
class SArray {
public:
	SArray() {}
	~SArray() {}

	explicit SArray(size_t size, V val = 0) { resize(size, val); }

	/* the same bytes seen as W's (sizes must divide) */
	template <typename W>
	explicit SArray(const SArray<W> &arr)
	{
		*this = arr;
	}
	template <typename W>
	void operator=(const SArray<W> &arr)
	{
		size_ = arr.size() * sizeof(W) / sizeof(V);
		CHECK_EQ(size_ * sizeof(V), arr.size() * sizeof(W))
			<< "an SArray of " << arr.size() << " x " << sizeof(W)
			<< " bytes is no whole number of " << sizeof(V) << "-byte values";
		capacity_ = arr.capacity() * sizeof(W) / sizeof(V);
		ptr_ = std::shared_ptr<V>(arr.ptr(), reinterpret_cast<V *>(arr.data()));
		CopyDevice(arr);
	}

	/* the caller's memory; deletable: delete[] it when the last copy goes */
	SArray(V *data, size_t size, bool deletable = false)
	{
		if (deletable)
			reset(data, size, [](V *p) { delete[] p; });
		else
			reset(data, size, [](V *) {});
	}
	SArray(V *data, size_t size, DeviceType src_device_type, int src_device_id,
	       DeviceType dst_device_type, int dst_device_id, bool deletable = false)
	{
		if (deletable) {
			CHECK(src_device_type == CPU) << "only host memory can be deleted by SArray";
			reset(data, size, [](V *p) { delete[] p; }, src_device_type,
			      src_device_id, dst_device_type, dst_device_id);
		} else {
			reset(data, size, [](V *) {}, src_device_type, src_device_id,
			      dst_device_type, dst_device_id);
		}
	}

	explicit SArray(const std::vector<V> &vec) { CopyFrom(vec.data(), vec.size()); }
	/* shares the vector (no copy) */
	explicit SArray(const std::shared_ptr<std::vector<V>> &vec)
	{
		ptr_ = std::shared_ptr<V>(vec, vec->data());
		size_ = vec->size();
		capacity_ = size_;
	}
	template <typename W>
	SArray(const std::initializer_list<W> &list)
	{
		CopyFrom(list.begin(), list.end());
	}
	template <typename W>
	void operator=(const std::initializer_list<W> &list)
	{
		CopyFrom(list.begin(), list.end());
	}

	void CopyFrom(const V *data, size_t size)
	{
		resize(size);
		if (size)
			std::memcpy(this->data(), data, size * sizeof(V));
	}
	void CopyFrom(const SArray<V> &other)
	{
		if (this != &other)
			CopyFrom(other.data(), other.size());
	}
	template <typename ForwardIt>
	void CopyFrom(const ForwardIt &first, const ForwardIt &last)
	{
		size_t n = static_cast<size_t>(std::distance(first, last));
		V *data = new V[n];
		std::copy(first, last, data);
		reset(data, n, [](V *p) { delete[] p; });
	}

	template <typename Deleter>
	void reset(V *data, size_t size, Deleter del, DeviceType src_device_type = CPU,
		   int src_device_id = 0, DeviceType dst_device_type = CPU, int dst_device_id = 0)
	{
		size_ = size;
		capacity_ = size;
		ptr_.reset(data, del);
		src_device_type_ = src_device_type;
		src_device_id_ = src_device_id;
		dst_device_type_ = dst_device_type;
		dst_device_id_ = dst_device_id;
	}

	/* grows into a new buffer when the capacity is short (the old one
	 * stays with the other copies); new values are val */
	void resize(size_t size, V val = 0)
	{
		size_t cur = size_;
		if (capacity_ >= size) {
			size_ = size;
		} else {
			V *fresh = new V[size + 5];
			if (cur)
				std::memcpy(fresh, data(), cur * sizeof(V));
			reset(fresh, size, [](V *p) { delete[] p; });
		}
		for (size_t i = cur; i < size; i++)
			data()[i] = val;
	}
	void reserve(size_t size)
	{
		if (capacity_ >= size)
			return;
		size_t old = size_;
		resize(size);
		size_ = old;
	}
	void clear() { reset(nullptr, 0, [](V *) {}); }

	bool empty() const { return size_ == 0; }
	size_t size() const { return size_; }
	size_t capacity() const { return capacity_; }
	V *begin() { return data(); }
	const V *begin() const { return data(); }
	V *end() { return data() + size_; }
	const V *end() const { return data() + size_; }
	V *data() const { return ptr_.get(); }
	std::shared_ptr<V> &ptr() { return ptr_; }
	const std::shared_ptr<V> &ptr() const { return ptr_; }
	V back() const
	{
		CHECK(!empty()) << "back() of an empty SArray";
		return data()[size_ - 1];
	}
	V front() const
	{
		CHECK(!empty()) << "front() of an empty SArray";
		return data()[0];
	}
	V &operator[](int i) { return data()[i]; }
	const V &operator[](int i) const { return data()[i]; }

	void push_back(const V &val)
	{
		if (size_ == capacity_)
			reserve(size_ * 2 + 5);
		data()[size_++] = val;
	}
	void pop_back()
	{
		if (size_)
			--size_;
	}
	void append(const SArray<V> &arr)
	{
		if (arr.empty())
			return;
		size_t old = size_;
		resize(size_ + arr.size());
		std::memcpy(data() + old, arr.data(), arr.size() * sizeof(V));
	}

	/* [begin, end) of this array, sharing its buffer */
	SArray<V> segment(size_t begin, size_t end) const
	{
		CHECK_GE(end, begin);
		CHECK_LE(end, size());
		SArray<V> ret;
		ret.ptr_ = std::shared_ptr<V>(ptr_, data() + begin);
		ret.size_ = end - begin;
		ret.capacity_ = end - begin;
		ret.CopyDevice(*this);
		return ret;
	}

	std::string DebugString() const
	{
		std::stringstream ss;
		ss << "[data_size=" << size() << " " << DeviceTypeName[src_device_type_] << "["
		   << src_device_id_ << "]->" << DeviceTypeName[dst_device_type_] << "["
		   << dst_device_id_ << "]]";
		return ss.str();
	}

	DeviceType src_device_type_ = CPU;
	int src_device_id_ = 0;
	DeviceType dst_device_type_ = CPU;
	int dst_device_id_ = 0;

private:
	template <typename W>
	void CopyDevice(const SArray<W> &o)
	{
		src_device_type_ = o.src_device_type_;
		src_device_id_ = o.src_device_id_;
		dst_device_type_ = o.dst_device_type_;
		dst_device_id_ = o.dst_device_id_;
	}

	size_t size_ = 0;
	size_t capacity_ = 0;
	std::shared_ptr<V> ptr_;
};

/* The positions of arr (sorted) whose values lie in [lower, upper). */
template <typename V>
Range FindRange(const SArray<V> &arr, V lower, V upper)
{
	if (upper <= lower)
		return Range(0, 0);
	auto lb = std::lower_bound(arr.begin(), arr.end(), lower);
	auto ub = std::lower_bound(arr.begin(), arr.end(), upper);
	return Range(lb - arr.begin(), ub - arr.begin());
}

/* "[n]: a b c ... x y z": the first and last m of n values */
template <typename V>
inline std::string DebugStr(const V *data, int n, int m = 5)
{
	std::stringstream ss;
	ss << "[" << n << "]: ";
	for (int i = 0; i < n; ++i) {
		if (n >= 2 * m && i == m) {
			ss << "... ";
			i = n - m;
		}
		ss << data[i] << " ";
	}
	return ss.str();
}

template <typename V>
std::ostream &operator<<(std::ostream &os, const SArray<V> &obj)
{
	os << DebugStr(obj.data(), static_cast<int>(obj.size()));
	return os;
}

} // namespace ps

#endif /* PS_SARRAY_H_ */
