/*
 * error.c — filling the caller's error record. The record belongs to the call: there is no
 * global or thread-local "last error".
 */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

void xconv__begin(xconv_error *err, const char *fmt, ...)
{
    if (!err) return;
    memset(err, 0, sizeof *err);
    err->status = XCONV_STATUS_OK;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->operation, sizeof err->operation, fmt, ap);
    va_end(ap);
}

xconv_status xconv__fail(xconv_error *err, xconv_status status, const char *parameter,
                         const char *fmt, ...)
{
    if (!err) return status;
    err->status = status;
    snprintf(err->parameter, sizeof err->parameter, "%s", parameter ? parameter : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->description, sizeof err->description, fmt, ap);
    va_end(ap);
    return status;
}

const char *xconv_status_name(xconv_status status)
{
    switch (status) {
    case XCONV_STATUS_OK: return "OK";
    case XCONV_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case XCONV_STATUS_UNSUPPORTED: return "UNSUPPORTED";
    case XCONV_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case XCONV_STATUS_WORKSPACE_TOO_SMALL: return "WORKSPACE_TOO_SMALL";
    case XCONV_STATUS_DEVICE_ERROR: return "DEVICE_ERROR";
    case XCONV_STATUS_INTERNAL: return "INTERNAL";
    }
    return "UNKNOWN";
}

const char *xconv_version(void)
{
#define XCONV_STR2(x) #x
#define XCONV_STR(x) XCONV_STR2(x)
    return XCONV_STR(XCONV_VERSION_MAJOR) "." XCONV_STR(XCONV_VERSION_MINOR) "." XCONV_STR(
        XCONV_VERSION_PATCH);
}
