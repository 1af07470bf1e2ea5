/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU interface of gpu.h in a build without CUDA: no device is there,
 * every pointer is host memory, and whatever needs CUDA fails with
 * FC_ERR_UNSUPPORTED saying so. It lets every caller link without
 * HAVE_CUDA; it must stay free of any behaviour of its own.
 */
#include "gpu.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

int gpu_available(const char **why)
{
    if (why)
        *why = "this fabcoll was built without CUDA (configure --with-cuda)";
    return 0;
}

int gpu_device_count(void)
{
    return 0;
}

fc_result_t gpu_ptr_info(const void *p, struct gpu_ptr *out)
{
    (void)p;
    memset(out, 0, sizeof(*out));
    return FC_SUCCESS;
}

static fc_result_t nocuda(void)
{
    return FC_ERR(FC_ERR_UNSUPPORTED, "this fabcoll was built without CUDA");
}

fc_result_t gpu_stream_create(int d, gpu_stream_t **o) { (void)d; (void)o; return nocuda(); }
void gpu_stream_destroy(gpu_stream_t *s) { (void)s; }
fc_result_t gpu_set_device(int d) { (void)d; return nocuda(); }
fc_result_t gpu_memcpy_async(void *d, const void *s, size_t l, gpu_stream_t *st)
{ (void)d; (void)s; (void)l; (void)st; return nocuda(); }
fc_result_t gpu_reduce_async(void *d, const void *a, const void *b, size_t n, fc_datatype_t dt,
                             fc_op_t op, gpu_stream_t *s)
{ (void)d; (void)a; (void)b; (void)n; (void)dt; (void)op; (void)s; return nocuda(); }
fc_result_t gpu_scale_async(void *d, const void *s, size_t n, fc_datatype_t dt, uint32_t v,
                            gpu_stream_t *st)
{ (void)d; (void)s; (void)n; (void)dt; (void)v; (void)st; return nocuda(); }
fc_result_t gpu_premul_async(void *d, const void *s, size_t n, fc_datatype_t dt, const void *m,
                             gpu_stream_t *st)
{ (void)d; (void)s; (void)n; (void)dt; (void)m; (void)st; return nocuda(); }
fc_result_t gpu_fused_launch(gpu_stream_t *st, gpu_event_t *e, void *const *cs, const void *s,
                             void *r, uint64_t *o, const uint64_t *i, volatile uint32_t *f,
                             uint32_t q, int n, int k, size_t c, fc_datatype_t dt, fc_op_t op,
                             int *w)
{ (void)st; (void)e; (void)cs; (void)s; (void)r; (void)o; (void)i; (void)f; (void)q; (void)n;
  (void)k; (void)c; (void)dt; (void)op; (void)w; return nocuda(); }
int gpu_device_mps(int d) { (void)d; return 0; }
fc_result_t gpu_event_get(int d, gpu_event_t **o) { (void)d; (void)o; return nocuda(); }
void gpu_event_put(gpu_event_t *e) { (void)e; }
fc_result_t gpu_event_record(gpu_event_t *e, gpu_stream_t *s)
{ (void)e; (void)s; return nocuda(); }
fc_result_t gpu_event_record_raw(gpu_event_t *e, void *s) { (void)e; (void)s; return nocuda(); }
int gpu_event_done(gpu_event_t *e) { (void)e; return -1; }
fc_result_t gpu_stream_wait_event_raw(void *s, gpu_event_t *e)
{ (void)s; (void)e; return nocuda(); }
fc_result_t gpu_stream_wait_event(gpu_stream_t *s, gpu_event_t *e)
{ (void)s; (void)e; return nocuda(); }
fc_result_t gpu_exec_create(int d, gpu_stream_t **o) { (void)d; (void)o; return nocuda(); }
fc_result_t gpu_exec_launch(gpu_stream_t *s, void *c, uint32_t *l)
{ (void)s; (void)c; (void)l; return nocuda(); }
int gpu_exec_started(gpu_stream_t *s, uint32_t l) { (void)s; (void)l; return 0; }
int gpu_exec_idle(gpu_stream_t *s) { (void)s; return 1; }
void gpu_exec_open(gpu_stream_t *s) { (void)s; }
fc_result_t gpu_exec_close(gpu_stream_t *s) { (void)s; return nocuda(); }
void gpu_legacy_sync(void) {}
fc_result_t gpu_stream_sync(gpu_stream_t *s) { (void)s; return nocuda(); }
void *gpu_stream_raw(gpu_stream_t *s) { (void)s; return NULL; }
void *gpu_host_alloc(int d, size_t l) { (void)d; (void)l; return NULL; }
void gpu_host_free(void *p) { (void)p; }
void *gpu_dev_alloc(int d, size_t l) { (void)d; (void)l; return NULL; }
void gpu_dev_free(int d, void *p) { (void)d; (void)p; }
fc_result_t gpu_memset(void *d, int b, size_t l) { (void)d; (void)b; (void)l; return nocuda(); }
fc_result_t gpu_copy_sync(void *d, const void *s, size_t l)
{ (void)d; (void)s; (void)l; return nocuda(); }
void gpu_copy_ways(int w) { (void)w; }
fc_result_t gpu_stage_copy(int d, void *s, void *t, const void *f, void *p, size_t l, int i)
{ (void)d; (void)s; (void)t; (void)f; (void)p; (void)l; (void)i; return nocuda(); }
void gpu_pci_id(int d, char *b, size_t l) { (void)d; snprintf(b, l, "-"); }
void gpu_current_pci_id(char *b, size_t l) { if (l) b[0] = '\0'; }
int gpu_on_device(const void *p) { (void)p; return 0; }
