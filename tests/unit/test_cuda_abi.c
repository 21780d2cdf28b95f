/*
 * core/cuda_abi.h (the CUDA runtime's numbers and the start of
 * cudaPointerAttributes, as pslite declares them to load the runtime with
 * dlopen) against CUDA's own cuda_runtime_api.h. Built only where configure
 * found the header (--with-cuda=DIR, /usr/local/cuda by default).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "cuda_abi.h"
#include "pslite.h"

static void test_numbers(void **state)
{
	(void)state;
	assert_int_equal(CU_OK, cudaSuccess);
	assert_int_equal(CU_ERR_MEMORY, cudaErrorMemoryAllocation);
	assert_int_equal(CU_ERR_NO_DRIVER, cudaErrorInsufficientDriver);
	assert_int_equal(CU_ERR_NO_DEVICE, cudaErrorNoDevice);
	assert_int_equal(CU_H2H, cudaMemcpyHostToHost);
	assert_int_equal(CU_H2D, cudaMemcpyHostToDevice);
	assert_int_equal(CU_D2H, cudaMemcpyDeviceToHost);
	assert_int_equal(CU_D2D, cudaMemcpyDeviceToDevice);
	assert_int_equal(CU_STREAM_NON_BLOCKING, cudaStreamNonBlocking);
	assert_int_equal(CU_MEMTYPE_DEVICE, cudaMemoryTypeDevice);
	assert_int_equal(CU_ERR_NOT_READY, cudaErrorNotReady);
	assert_int_equal(CU_EVENT_DISABLE_TIMING, cudaEventDisableTiming);
	assert_int_equal(CU_HOST_ALLOC_PORTABLE, cudaHostAllocPortable);
	assert_ptr_equal(PSL_CUDA_STREAM_PER_THREAD, (void *)cudaStreamPerThread);
	assert_int_equal(CU_MEMTYPE_MANAGED, cudaMemoryTypeManaged);
}

static void test_pointer_attributes(void **state)
{
	(void)state;
	/* the runtime writes the whole struct: pslite's must be at least as big */
	assert_true(sizeof(struct cu_ptr_attr) >= sizeof(struct cudaPointerAttributes));
	assert_int_equal(offsetof(struct cu_ptr_attr, type),
			 offsetof(struct cudaPointerAttributes, type));
	assert_int_equal(offsetof(struct cu_ptr_attr, device),
			 offsetof(struct cudaPointerAttributes, device));
	assert_int_equal(offsetof(struct cu_ptr_attr, dev_ptr),
			 offsetof(struct cudaPointerAttributes, devicePointer));
	assert_int_equal(offsetof(struct cu_ptr_attr, host_ptr),
			 offsetof(struct cudaPointerAttributes, hostPointer));
	/* cudaDeviceProp starts with the name, and psl_cuda_describe's buffer
	 * (16 KiB) holds the whole struct */
	assert_int_equal(offsetof(struct cudaDeviceProp, name), 0);
	assert_true(sizeof(struct cudaDeviceProp) <= 16384);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_pointer_attributes),
	};
	return cmocka_run_group_tests_name("cuda_abi", tests, NULL, NULL);
}
