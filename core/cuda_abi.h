/* What core/cuda.c needs of the CUDA runtime's C ABI, in its own words:
 * the numbers of cuda_runtime_api.h and driver_types.h, and the start of
 * cudaPointerAttributes. tests/unit/test_cuda_abi checks them against the
 * real headers where configure finds them (--with-cuda). */
#ifndef PSL_CORE_CUDA_ABI_H
#define PSL_CORE_CUDA_ABI_H

/* cudaSuccess, cudaError_t values, cudaMemcpyKind, cudaStreamNonBlocking,
 * cudaMemoryType, cudaErrorNotReady, cudaEventDisableTiming,
 * cudaHostAllocPortable */
enum {
	CU_OK = 0,
	CU_ERR_MEMORY = 2,
	CU_ERR_NO_DRIVER = 35,
	CU_ERR_NO_DEVICE = 100,
	CU_H2H = 0,
	CU_H2D = 1,
	CU_D2H = 2,
	CU_D2D = 3,
	CU_STREAM_NON_BLOCKING = 1,
	CU_MEMTYPE_DEVICE = 2,
	CU_MEMTYPE_MANAGED = 3,
	CU_ERR_NOT_READY = 600,
	CU_EVENT_DISABLE_TIMING = 2,
	CU_HOST_ALLOC_PORTABLE = 1,
};

struct cu_ptr_attr { /* cudaPointerAttributes, CUDA 11 and later */
	int type;
	int device;
	void *dev_ptr;
	void *host_ptr;
	char more[232]; /* later fields (CUDA 12 and 13: 88 bytes in all) */
};

#endif
