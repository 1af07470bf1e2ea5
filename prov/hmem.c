/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device memory and the provider (FI_HMEM): whether this endpoint can send
 * and receive device buffers directly (the gdr tier), and registering them.
 */
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "log.h"
#include "prov_int.h"

int prov_hmem(const struct prov_ep *p)
{
    return p && p->hmem;
}
