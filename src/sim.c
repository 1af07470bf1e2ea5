/* SPDX-License-Identifier: BSD-3-Clause */
/* Schedule simulation (see sim.h). */
#include "sim.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sim_step {
    uint64_t len;
    int32_t peer;   /* communicator rank */
    uint32_t chunk; /* which chunk of its schedule step */
    uint16_t tag;
    uint8_t op;
    uint8_t zmsg;
};

/* ---- event heap ----------------------------------------------------------- */
struct ev {
    double t;
    uint32_t step;
    uint8_t kind; /* 0 ready, 1 done */
};
struct heap {
    struct ev *v;
    size_t n, cap;
};
static int ev_less(const struct ev *a, const struct ev *b)
{
    if (a->t != b->t)
        return a->t < b->t;
    if (a->kind != b->kind)
        return a->kind > b->kind; /* completions before new starts at one time */
    return a->step < b->step;
}
static int heap_push(struct heap *h, double t, uint32_t step, uint8_t kind)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 4096;
        struct ev *nv = realloc(h->v, nc * sizeof(*nv));
        if (!nv)
            return -1;
        h->v = nv;
        h->cap = nc;
    }
    size_t i = h->n++;
    h->v[i] = (struct ev){t, step, kind};
    while (i && ev_less(&h->v[i], &h->v[(i - 1) / 2])) {
        struct ev tmp = h->v[i];
        h->v[i] = h->v[(i - 1) / 2];
        h->v[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
    return 0;
}
static struct ev heap_pop(struct heap *h)
{
    struct ev top = h->v[0];
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && ev_less(&h->v[l], &h->v[m]))
            m = l;
        if (r < h->n && ev_less(&h->v[r], &h->v[m]))
            m = r;
        if (m == i)
            break;
        struct ev tmp = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = tmp;
        i = m;
    }
    return top;
}

/* ---- message matching: (src, dst, tag, chunk) -> FIFO of sends or receives - */
struct mnode {
    uint64_t key;
    uint32_t chunk;
    double arrival;     /* a send's arrival */
    uint64_t len;
    uint32_t recv;      /* a waiting receive's step */
    uint32_t next;      /* chain; 0 = end (node 0 unused) */
    uint8_t is_send;
};
struct mtab {
    uint32_t *bucket;
    size_t nbuckets;
    struct mnode *node;
    uint32_t nnodes, cap, freelist;
    uint64_t live;
};
static uint64_t mkey(uint32_t src, uint32_t dst, uint32_t tag)
{
    return ((uint64_t)src << 40) | ((uint64_t)dst << 16) | tag;
}
static size_t mhash(uint64_t k, uint32_t chunk, size_t nb)
{
    k ^= (uint64_t)chunk * 0x9e3779b97f4a7c15ull;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)(k & (nb - 1));
}
/* Removes and returns the oldest node of the other kind for this key, or 0. */
static uint32_t mtab_take(struct mtab *m, uint64_t key, uint32_t chunk, int want_send)
{
    size_t b = mhash(key, chunk, m->nbuckets);
    uint32_t prev = 0;
    for (uint32_t i = m->bucket[b]; i; prev = i, i = m->node[i].next) {
        if (m->node[i].key == key && m->node[i].chunk == chunk &&
            m->node[i].is_send == want_send) {
            if (prev)
                m->node[prev].next = m->node[i].next;
            else
                m->bucket[b] = m->node[i].next;
            m->live--;
            return i;
        }
    }
    return 0;
}
static void mtab_free(struct mtab *m, uint32_t i)
{
    m->node[i].next = m->freelist;
    m->freelist = i;
}
/* Doubles the buckets when chains grow long (receives are often all
 * posted at once), keeping each key's nodes in order. */
static int mtab_rehash(struct mtab *m)
{
    size_t nb = m->nbuckets * 2;
    uint32_t *nbk = calloc(nb, sizeof(uint32_t)), *tail = calloc(nb, sizeof(uint32_t));
    if (!nbk || !tail) {
        free(nbk);
        free(tail);
        return -1;
    }
    for (size_t b = 0; b < m->nbuckets; b++) {
        uint32_t i = m->bucket[b];
        while (i) {
            uint32_t next = m->node[i].next;
            size_t h = mhash(m->node[i].key, m->node[i].chunk, nb);
            m->node[i].next = 0;
            if (tail[h])
                m->node[tail[h]].next = i;
            else
                nbk[h] = i;
            tail[h] = i;
            i = next;
        }
    }
    free(tail);
    free(m->bucket);
    m->bucket = nbk;
    m->nbuckets = nb;
    return 0;
}

/* Appends at the chain's end (FIFO per key). */
static struct mnode *mtab_add(struct mtab *m, uint64_t key, uint32_t chunk)
{
    if (m->live >= 2 * m->nbuckets && mtab_rehash(m))
        return NULL;
    uint32_t i = m->freelist;
    if (i) {
        m->freelist = m->node[i].next;
    } else {
        if (m->nnodes == m->cap) {
            uint32_t nc = m->cap ? m->cap * 2 : 4096;
            struct mnode *nn = realloc(m->node, nc * sizeof(*nn));
            if (!nn)
                return NULL;
            m->node = nn;
            m->cap = nc;
        }
        i = m->nnodes++;
        if (i == 0)
            i = m->nnodes++; /* node 0 means "none" */
    }
    struct mnode *x = &m->node[i];
    memset(x, 0, sizeof(*x));
    x->key = key;
    x->chunk = chunk;
    size_t b = mhash(key, chunk, m->nbuckets);
    if (!m->bucket[b]) {
        m->bucket[b] = i;
    } else {
        uint32_t j = m->bucket[b];
        while (m->node[j].next)
            j = m->node[j].next;
        m->node[j].next = i;
    }
    m->live++;
    return x;
}


void sim_init(struct sim *s, int nranks, size_t chunk, int window)
{
    memset(s, 0, sizeof(*s));
    s->n = nranks;
    s->chunk = chunk;
    s->window = window > 0 ? window : 1;
}

void sim_free(struct sim *s)
{
    free(s->st);
    free(s->rank_of);
    free(s->esrc);
    free(s->edst);
    int n = s->n, w = s->window;
    size_t c = s->chunk;
    memset(s, 0, sizeof(*s));
    s->n = n;
    s->chunk = c;
    s->window = w;
}

static int grow(void **p, uint64_t *cap, uint64_t want, size_t esize)
{
    if (want <= *cap)
        return 0;
    uint64_t nc = *cap ? *cap : 1024;
    while (nc < want)
        nc *= 2;
    void *np = realloc(*p, nc * esize);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static int add_edge(struct sim *s, uint64_t from, uint64_t to)
{
    if (s->nedges >= UINT32_MAX - 1)
        return -1;
    uint64_t c1 = s->ecap, c2 = s->ecap;
    if (grow((void **)&s->esrc, &c1, s->nedges + 1, sizeof(uint32_t)) ||
        grow((void **)&s->edst, &c2, s->nedges + 1, sizeof(uint32_t)))
        return -1;
    s->ecap = c1 < c2 ? c1 : c2;
    s->esrc[s->nedges] = (uint32_t)from;
    s->edst[s->nedges] = (uint32_t)to;
    s->nedges++;
    return 0;
}

/* Chunks of a schedule step, as the engine cuts it. */
static uint32_t nchunks_of(const struct sim *s, const struct sched_step *p)
{
    if (p->op == SOP_NOP || p->len == 0 || s->chunk == 0)
        return 1;
    return (uint32_t)((p->len + s->chunk - 1) / s->chunk);
}

int sim_add(struct sim *s, const struct sched *sc)
{
    int r = s->next_rank;
    uint32_t *first = NULL;
    if (s->ran) {
        snprintf(s->err, sizeof(s->err), "sim_add: the simulation has run");
        return -1;
    }
    if (r >= s->n) {
        snprintf(s->err, sizeof(s->err), "sim_add: more schedules than the %d ranks", s->n);
        return -1;
    }
    /* each step becomes its chunks, plus a join that completes with the
     * last of them when there are several */
    first = malloc((sc->nsteps + 1) * sizeof(uint32_t));
    if (!first)
        goto oom;
    uint64_t base = s->nsteps, k = base;
    for (uint32_t i = 0; i < sc->nsteps; i++) {
        first[i] = (uint32_t)k;
        uint32_t nc = nchunks_of(s, &sc->steps[i]);
        k += nc + (nc > 1);
        if (k >= UINT32_MAX) {
            snprintf(s->err, sizeof(s->err), "more than 2^32 steps: too large to simulate");
            free(first);
            return -1;
        }
    }
    first[sc->nsteps] = (uint32_t)k;
    /* arrays in pairs share a capacity: grow both, record the smaller */
    uint64_t c1 = s->cap, c2 = s->cap;
    if (grow((void **)&s->st, &c1, k, sizeof(*s->st)) ||
        grow((void **)&s->rank_of, &c2, k, sizeof(*s->rank_of)))
        goto oom;
    s->cap = c1 < c2 ? c1 : c2;
    for (uint32_t i = 0; i < sc->nsteps; i++) {
        const struct sched_step *p = &sc->steps[i];
        uint32_t nc = first[i + 1] - first[i] - (first[i + 1] - first[i] > 1);
        for (uint32_t j = 0; j < nc; j++) {
            uint64_t len = p->len;
            if (nc > 1)
                len = j + 1 < nc ? s->chunk : p->len - (uint64_t)j * s->chunk;
            s->st[first[i] + j] = (struct sim_step){.len = len, .peer = p->peer, .chunk = j,
                                                    .tag = (uint16_t)p->tag, .op = p->op,
                                                    .zmsg = p->zmsg};
            s->rank_of[first[i] + j] = (uint32_t)r;
            /* the window: chunk j is issued once chunk j - window is done */
            if (j >= (uint32_t)s->window && add_edge(s, first[i] + j - s->window, first[i] + j))
                goto oom;
            if (nc > 1 && add_edge(s, first[i] + j, first[i] + nc))
                goto oom;
        }
        if (nc > 1) {
            s->st[first[i] + nc] = (struct sim_step){.op = SOP_NOP};
            s->rank_of[first[i] + nc] = (uint32_t)r;
        }
    }
    for (uint32_t e = 0; e < sc->nedges; e++) {
        const struct sched_rawedge *ed = &sc->edges[e];
        const struct sched_step *st = &sc->steps[ed->step], *pr = &sc->steps[ed->pred];
        uint32_t ns = first[ed->step + 1] - first[ed->step];
        uint32_t np = first[ed->pred + 1] - first[ed->pred];
        uint32_t nc = ns > 1 ? ns - 1 : 1, npc = np > 1 ? np - 1 : 1;
        uint64_t pdone = first[ed->pred + 1] - 1; /* the join, or the only chunk */
        int chunked = ed->chunked && st->len && pr->len && !st->zmsg && !pr->zmsg;
        for (uint32_t j = 0; j < nc; j++) {
            /* full: the first `window` chunks wait (the rest wait for them) */
            if (!chunked && j >= (uint32_t)s->window)
                break;
            uint64_t from = chunked && j < npc ? first[ed->pred] + j : pdone;
            if (add_edge(s, from, first[ed->step] + j))
                goto oom;
        }
    }
    s->nsteps = k;
    s->next_rank++;
    free(first);
    return 0;
oom:
    snprintf(s->err, sizeof(s->err), "out of memory adding rank %d (%" PRIu64 " steps so far)",
             r, s->nsteps);
    free(first);
    return -1;
}

static int is_msg(const struct sim_step *p)
{
    return (p->op == SOP_SEND || p->op == SOP_RECV) && (p->len || p->zmsg);
}
int sim_run(struct sim *s, double alpha, double beta, double gamma)
{
    struct heap h = {0};
    struct mtab m = {0};
    int rc = -1, n = s->n;
    uint64_t N = s->nsteps;
    uint32_t *now = NULL; /* receives ready to start */
    size_t nnow = 0;
    s->end = 0;
    s->done = s->max_msgs = s->max_sent = 0;
    s->err[0] = 0;
    if (s->next_rank != n) {
        snprintf(s->err, sizeof(s->err), "sim_run: %d of %d schedules added", s->next_rank, n);
        return -1;
    }
    if (s->ran) {
        snprintf(s->err, sizeof(s->err), "sim_run: runs once per sim_init");
        return -1;
    }
    s->ran = 1;
    uint32_t *succ_off = calloc(N + 1, sizeof(uint32_t));
    uint32_t *succ = malloc((s->nedges ? s->nedges : 1) * sizeof(uint32_t));
    uint32_t *unmet = calloc(N ? N : 1, sizeof(uint32_t));
    uint32_t *fill = calloc(N ? N : 1, sizeof(uint32_t));
    double *ready = calloc(N ? N : 1, sizeof(double));
    double *out_free = calloc((size_t)n, sizeof(double));
    double *cpu_free = calloc((size_t)n, sizeof(double));
    uint64_t *msgs = calloc((size_t)n, sizeof(uint64_t));
    uint64_t *sent = calloc((size_t)n, sizeof(uint64_t));
    if (!succ_off || !succ || !unmet || !fill || !ready || !out_free || !cpu_free || !msgs ||
        !sent)
        goto oom;
    /* successor lists (CSR) and predecessor counts */
    for (uint64_t e = 0; e < s->nedges; e++) {
        succ_off[s->esrc[e] + 1]++;
        unmet[s->edst[e]]++;
    }
    for (uint64_t i = 0; i < N; i++)
        succ_off[i + 1] += succ_off[i];
    for (uint64_t e = 0; e < s->nedges; e++)
        succ[succ_off[s->esrc[e]] + fill[s->esrc[e]]++] = s->edst[e];
    /* the edge lists are not needed again: give their memory back */
    free(fill);
    fill = NULL;
    free(s->esrc);
    free(s->edst);
    s->esrc = s->edst = NULL;
    s->nedges = s->ecap = 0;
    for (uint64_t i = 0; i < N; i++) {
        const struct sim_step *p = &s->st[i];
        if (p->op == SOP_SEND && is_msg(p)) {
            msgs[s->rank_of[i]]++;
            sent[s->rank_of[i]] += p->len;
        }
    }
    for (int r = 0; r < n; r++) {
        if (msgs[r] > s->max_msgs)
            s->max_msgs = msgs[r];
        if (sent[r] > s->max_sent)
            s->max_sent = sent[r];
    }
    m.nbuckets = 1;
    while (m.nbuckets < 2 * (size_t)s->n + 1024)
        m.nbuckets *= 2;
    m.bucket = calloc(m.nbuckets, sizeof(uint32_t));
    if (!m.bucket)
        goto oom;
    /* Receives start out of time order, from a stack: registering one
     * takes no resource, and its completion is the later of its start and
     * its message's arrival whichever comes first. Only sends and local
     * passes, which occupy a rank's link or memory, go through the heap. */
    now = malloc((N ? N : 1) * sizeof(uint32_t));
    if (!now)
        goto oom;
    for (uint64_t i = 0; i < N; i++) {
        if (unmet[i])
            continue;
        if (s->st[i].op == SOP_RECV)
            now[nnow++] = (uint32_t)i;
        else if (heap_push(&h, 0.0, (uint32_t)i, 0))
            goto oom;
    }
    while (h.n || nnow) {
        struct ev e;
        if (nnow) {
            uint32_t q = now[--nnow];
            e = (struct ev){ready[q], q, 0};
        } else {
            e = heap_pop(&h);
        }
        struct sim_step *p = &s->st[e.step];
        uint32_t r = s->rank_of[e.step];
        if (e.kind == 1) { /* done: release successors */
            s->done++;
            if (e.t > s->end)
                s->end = e.t;
            for (uint32_t k = succ_off[e.step]; k < succ_off[e.step + 1]; k++) {
                uint32_t q = succ[k];
                if (e.t > ready[q])
                    ready[q] = e.t;
                if (--unmet[q])
                    continue;
                if (s->st[q].op == SOP_RECV)
                    now[nnow++] = q;
                else if (heap_push(&h, ready[q], q, 0))
                    goto oom;
            }
            continue;
        }
        double t = e.t, fin = t;
        if (!is_msg(p)) {
            if (p->op == SOP_REDUCE || p->op == SOP_COPY || p->op == SOP_SCALE ||
                p->op == SOP_REDUCE_ALL || p->op == SOP_PREMUL) {
                double st = t > cpu_free[r] ? t : cpu_free[r];
                double passes = p->op == SOP_REDUCE_ALL && s->n > 1 ? s->n - 1 : 1;
                fin = st + gamma * passes * (double)p->len;
                cpu_free[r] = fin;
            }
        } else if (p->peer < 0 || p->peer >= s->n) {
            snprintf(s->err, sizeof(s->err), "rank %u step %u: peer %d out of range", r,
                     e.step, p->peer);
            goto out;
        } else if (p->op == SOP_SEND) {
            double al = alpha, be = beta;
            if (s->node && s->node[r] == s->node[p->peer]) {
                al = s->alpha_node;
                be = s->beta_node;
            }
            double st = t > out_free[r] ? t : out_free[r];
            out_free[r] = st + be * (double)p->len;
            fin = out_free[r];
            double arrival = st + al + be * (double)p->len;
            uint64_t key = mkey(r, (uint32_t)p->peer, p->tag);
            uint32_t w = mtab_take(&m, key, p->chunk, 0);
            if (w) {
                uint32_t rs = m.node[w].recv;
                mtab_free(&m, w);
                if (s->st[rs].len != p->len) {
                    snprintf(s->err, sizeof(s->err),
                             "rank %u sends %" PRIu64 " bytes (tag %u) to rank %d, which "
                             "expects %" PRIu64, r, (uint64_t)p->len, p->tag, p->peer,
                             (uint64_t)s->st[rs].len);
                    goto out;
                }
                double rf = arrival > ready[rs] ? arrival : ready[rs];
                if (heap_push(&h, rf, rs, 1))
                    goto oom;
            } else {
                struct mnode *x = mtab_add(&m, key, p->chunk);
                if (!x)
                    goto oom;
                x->is_send = 1;
                x->arrival = arrival;
                x->len = p->len;
            }
        } else { /* RECV */
            ready[e.step] = t;
            uint64_t key = mkey((uint32_t)p->peer, r, p->tag);
            uint32_t w = mtab_take(&m, key, p->chunk, 1);
            if (!w) {
                struct mnode *x = mtab_add(&m, key, p->chunk);
                if (!x)
                    goto oom;
                x->recv = e.step;
                continue; /* completes when its message is sent */
            }
            double arrival = m.node[w].arrival;
            uint64_t len = m.node[w].len;
            mtab_free(&m, w);
            if (len != p->len) {
                snprintf(s->err, sizeof(s->err),
                         "rank %d sends %" PRIu64 " bytes (tag %u) to rank %u, which expects "
                         "%" PRIu64, p->peer, len, p->tag, r, (uint64_t)p->len);
                goto out;
            }
            fin = arrival > t ? arrival : t;
        }
        if (heap_push(&h, fin, e.step, 1))
            goto oom;
    }
    if (s->done != s->nsteps) {
        /* name one receive still waiting for its message */
        for (size_t b = 0; b < m.nbuckets; b++)
            for (uint32_t j = m.bucket[b]; j; j = m.node[j].next) {
                if (m.node[j].is_send)
                    continue;
                uint32_t i = m.node[j].recv;
                snprintf(s->err, sizeof(s->err),
                         "deadlock: %" PRIu64 " of %" PRIu64 " steps never ran; rank %u waits "
                         "for %" PRIu64 " bytes (tag %u) from rank %d, which never sends them",
                         s->nsteps - s->done, s->nsteps, s->rank_of[i], (uint64_t)s->st[i].len,
                         s->st[i].tag, s->st[i].peer);
                goto out;
            }
        snprintf(s->err, sizeof(s->err), "deadlock: %" PRIu64 " of %" PRIu64 " steps never ran",
                 s->nsteps - s->done, s->nsteps);
        goto out;
    }
    if (m.live) {
        for (size_t b = 0; b < m.nbuckets; b++)
            for (uint32_t j = m.bucket[b]; j; j = m.node[j].next)
                if (m.node[j].is_send) {
                    uint64_t k = m.node[j].key;
                    snprintf(s->err, sizeof(s->err),
                             "rank %u sends %" PRIu64 " bytes (tag %u) to rank %u that never "
                             "receives them", (uint32_t)(k >> 40), m.node[j].len,
                             (uint32_t)(k & 0xffff), (uint32_t)((k >> 16) & 0xffffff));
                    goto out;
                }
    }
    rc = 0;
    goto out;
oom:
    snprintf(s->err, sizeof(s->err), "out of memory simulating %" PRIu64 " steps", s->nsteps);
out:
    free(now);
    free(succ_off);
    free(succ);
    free(unmet);
    free(fill);
    free(ready);
    free(out_free);
    free(cpu_free);
    free(msgs);
    free(sent);
    free(h.v);
    free(m.bucket);
    free(m.node);
    return rc;
}

