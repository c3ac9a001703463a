/* cuda_probe.cu: whether a CUDA device answers (the backend core's one CUDA call). */
#include <cuda_runtime.h>

#include "backend_internal.h"

extern "C" int sc_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}
