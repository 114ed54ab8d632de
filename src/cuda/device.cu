/*
 * device.cu — the CUDA backend's host side shared by every engine: device validation for
 * plan creation, stream-ordered workspace, the device scope of a run and launch errors.
 */
#include "cuda/common.cuh"

#include <stdio.h>

extern "C" xconv_status xconv__cuda_check_device(int device_index, xconv_error *err)
{
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce == cudaErrorNoDevice) {
        (void)cudaGetLastError(); /* not sticky, but leave no error behind for the caller */
        count = 0;
    } else if (ce != cudaSuccess) {
        (void)cudaGetLastError();
        return xconv__fail(err, XCONV_STATUS_DEVICE_ERROR, "x.device_index",
                           "cannot count cuda devices: %s", cudaGetErrorString(ce));
    }
    XCONV_CHECK(err, device_index >= 0 && device_index < count, INVALID_ARGUMENT,
                "x.device_index", "x.device_index %d is not a cuda device (%d found)",
                device_index, count);
    return XCONV_STATUS_OK;
}

extern "C" void *xconv__cuda_workspace_alloc(xconv_context *ctx, size_t bytes)
{
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess) return NULL;
    if (cudaSetDevice(xconv__context_cuda_device(ctx)) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    void *p = NULL;
    cudaError_t ce = cudaMallocAsync(&p, bytes, (cudaStream_t)xconv__context_cuda_stream(ctx));
    if (ce != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is reported as OUT_OF_MEMORY */
        p = NULL;
    }
    cudaSetDevice(prev);
    return p;
}

extern "C" void xconv__cuda_workspace_free(xconv_context *ctx, void *ptr)
{
    if (!ptr) return;
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess) return;
    cudaSetDevice(xconv__context_cuda_device(ctx));
    cudaFreeAsync(ptr, (cudaStream_t)xconv__context_cuda_stream(ctx));
    cudaSetDevice(prev);
}

xconv_status xconv__cuda_enter(const xconv_exec *e, xconv_cuda_scope *s, xconv_error *err)
{
    const int want = e->p->device_index;
    const int ctx_dev = xconv__context_cuda_device(e->ctx);
    /* The stream belongs to the context's device; running another device's tensors on it
     * would be an invalid launch, so say which setting to change. */
    XCONV_CHECK(err, ctx_dev == want, INVALID_ARGUMENT, "x.device_index",
                "x.device_index %d differs from the context's cuda_device %d", want, ctx_dev);
    s->stream = (cudaStream_t)xconv__context_cuda_stream(e->ctx);
    cudaError_t ce = cudaGetDevice(&s->prev);
    if (ce == cudaSuccess && s->prev != want) ce = cudaSetDevice(want);
    if (ce != cudaSuccess) {
        (void)cudaGetLastError();
        return xconv__fail(err, XCONV_STATUS_DEVICE_ERROR, NULL, "cannot select cuda device %d: %s",
                           want, cudaGetErrorString(ce));
    }
    return XCONV_STATUS_OK;
}

void xconv__cuda_leave(const xconv_cuda_scope *s)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != s->prev) cudaSetDevice(s->prev);
}

xconv_status xconv__cuda_launch_status(const char *engine, xconv_error *err)
{
    cudaError_t ce = cudaGetLastError();
    if (ce == cudaSuccess) return XCONV_STATUS_OK;
    return xconv__fail(err, XCONV_STATUS_DEVICE_ERROR, NULL, "%s launch failed: %s", engine,
                       cudaGetErrorString(ce));
}

int xconv__cuda_device_cc(int device)
{
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major * 10 + minor;
}

int xconv__cuda_device_sms(int device)
{
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return sms > 0 ? sms : 1;
}
