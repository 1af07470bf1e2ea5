/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The insides of the device transport (gpu_tp.h keeps struct gpu_tp
 * opaque), shared by its files: gpu_tp.c (the transport's ops, creation
 * and destruction), gpu_tp_order.c (GPU-side ordering and deferred
 * copies), gpu_tp_pools.c (bounce buffers, device temporaries, pending
 * records) and gpu_tp_lanes.c (lanes for stream-ordered requests). Calls
 * point one way: gpu_tp.c and gpu_tp_lanes.c -> gpu_tp_order.c ->
 * gpu_tp_pools.c. Nothing outside these files includes this header.
 */
#ifndef FC_GPU_TP_INT_H
#define FC_GPU_TP_INT_H

#include "gpu_tp.h"

enum pkind {
    P_SEND_D2H,
    P_SEND_POSTED,
    P_RECV_POSTED,
    P_RECV_H2D,
    P_LOCAL,
    P_HOST_DONE,
    P_DIRECT_WAIT, /* a fabric post of device memory waiting for queued GPU work */
    P_DEFERRED,    /* a staged receive whose H2D copy is deferred (see above) */
};

/* chunks up to this complete in stream order (see above) */
#define EARLY_MAX ((size_t)256 << 10)
/* staged receives up to this stay in their bounce buffer (see above) */
#define DEFER_MAX ((size_t)64 << 10)
/* scratch allocations tracked for deferred receives (more: copied up) */
#define SCRATCH_MAX 16

struct pend {
    int kind;
    struct gpu_tp *g;
    struct xfer *x;       /* the engine's */
    struct xfer ix;       /* ours, for the inner transport */
    gpu_event_t *ev;
    void *bounce;         /* pinned host */
    struct bpool *bpool;  /* where it goes back */
    void *tmp[3];         /* device temporaries of a mixed local step */
    size_t tmplen;
    void *dst;            /* H2D target */
    void *buf;            /* P_DIRECT_WAIT: the device buffer to post */
    size_t len;
    int peer;
    uint64_t tag;
    fc_result_t status;
    struct pend *next;
};

#define SMALL_BOUNCE ((size_t)64 << 10)
struct bpool {
    void **v;
    int n, cap;
};

/* device temporaries by power-of-two size class; never freed while the
 * transport lives: cuMemFree waits for the whole device, where the
 * executor kernels of stream-ordered requests wait for this very thread */
#define POOL_CLASSES 64

struct gpu_tp {
    struct transport base;
    struct transport *inner;
    int device;
    int hmem;
    size_t direct_min;     /* gdr tier: device chunks from this size go direct */
    struct gpu_tp_path *paths; /* per peer, instead of hmem and direct_min (NULL: none) */
    int npaths;
    size_t bounce_size;
    gpu_stream_t *d2h, *h2d, *comp;
    struct pend *pending;  /* waiting for the GPU or for the inner transport */
    struct pend *early;    /* reported done, still running on comp */
    struct pend *deferred; /* P_DEFERRED, disjoint ranges */
    struct {
        uintptr_t base;
        size_t len;
    } scratch[SCRATCH_MAX]; /* live scratch from mem_alloc */
    int nscratch;
    gpu_event_t *tail;     /* the newest event among them */
    fc_result_t failed;    /* an early step failed on the GPU */
    struct pend *free_pend;
    struct bpool bbig, bsmall;
    struct bpool dev[POOL_CLASSES];
    char errbuf[512];
    /* lanes (gpu_tp_lane): a lane's inner progress is its parent's; its
     * three streams are one executor stream */
    struct gpu_tp *parent, *lanes, *lane_next;
    void *caller;
    uint64_t owner; /* the calling thread's token on CUDA's per-thread stream */
    int nlanes;
    /* a lane's staging block for the host buffer of a mixed call
     * (gpu_tp_lane_stage): pinned and device, stage_len bytes each; blocks
     * outgrown stay allocated (earlier calls may still use them) */
    void *stage_h, *stage_d;
    size_t stage_len;
    struct stage_old {
        void *h, *d;
        struct stage_old *next;
    } *stage_old;
    gpu_event_t *stage_tail; /* after the last copy out of the block */
};

/* ---- gpu_tp_pools.c: buffers and records, reused (family lock held) ---------------- */

int gpu_tp_size_class(size_t len);
void *gpu_tp_dev_get(struct gpu_tp *g, size_t len);
void gpu_tp_dev_put(struct gpu_tp *g, void *p, size_t len);
int gpu_tp_is_small(const struct gpu_tp *g, size_t len);
void *gpu_tp_bounce_get(struct gpu_tp *g, struct pend *p, size_t len);
void gpu_tp_bounce_put(struct bpool *b, void *buf);
struct pend *gpu_tp_pend_get(struct gpu_tp *g);
void gpu_tp_pend_put(struct gpu_tp *g, struct pend *p);

/* ---- gpu_tp_order.c: GPU-side ordering ----------------------------------------------- */

void gpu_tp_pend_push(struct gpu_tp *g, struct pend *p);
void gpu_tp_pend_unlink(struct gpu_tp *g, struct pend *p);
gpu_event_t *gpu_tp_early_tail(struct gpu_tp *g);
void gpu_tp_early_add(struct gpu_tp *g, struct pend *p);
fc_result_t gpu_tp_after_early(struct gpu_tp *g, gpu_stream_t *s);
int gpu_tp_inside(const void *b, size_t len, uintptr_t base, size_t blen);
const void *gpu_tp_alias(struct gpu_tp *g, const void *b, size_t len);
fc_result_t gpu_tp_retire(struct gpu_tp *g, struct pend *d, int copy);
fc_result_t gpu_tp_settle_read(struct gpu_tp *g, const void *b, size_t len);
fc_result_t gpu_tp_settle_write(struct gpu_tp *g, const void *b, size_t len, int after);
fc_result_t gpu_tp_settle_overwrite(struct gpu_tp *g, const void *b, size_t len);
int gpu_tp_direct(const struct gpu_tp *g, int peer, const void *buf, size_t len,
                  const struct xfer *x);
fc_result_t gpu_tp_record(struct gpu_tp *g, struct pend *p, gpu_stream_t *s);

#endif /* FC_GPU_TP_INT_H */
