/* SPDX-License-Identifier: BSD-3-Clause */
/* Result codes, datatypes and the version: the small public calls. */
#include <rdma/fabric.h>
#include <stdio.h>

#include "fabcoll.h"
#include "log.h"

const char *fc_strerror(fc_result_t r)
{
    return err_code_name(r);
}

const char *fc_last_error(void)
{
    return err_get();
}

size_t fc_datatype_size(fc_datatype_t dt)
{
    switch (dt) {
    case FC_INT8:
    case FC_UINT8:
    case FC_FLOAT8_E4M3:
    case FC_FLOAT8_E5M2: return 1;
    case FC_FLOAT16:
    case FC_BFLOAT16: return 2;
    case FC_INT32:
    case FC_UINT32:
    case FC_FLOAT32: return 4;
    case FC_INT64:
    case FC_UINT64:
    case FC_FLOAT64: return 8;
    }
    return 0;
}

const char *fc_version(void)
{
    static char v[64];
    uint32_t fv = fi_version();
    snprintf(v, sizeof(v), "%d.%d.%d (libfabric %u.%u)", FC_VERSION_MAJOR, FC_VERSION_MINOR,
             FC_VERSION_PATCH, FI_MAJOR(fv), FI_MINOR(fv));
    return v;
}
