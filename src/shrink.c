/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_comm_shrink: after a rank died (FC_ERR_PEER_FAILED, FC_ERR_TIMEOUT),
 * the ranks still alive agree on who they are and get a communicator of
 * them, in their old order, over the same endpoint.
 *
 * The agreement runs in rounds over the failed communicator's endpoint, on
 * control tags of their own (kind TAG_KIND_CTRL, a sequence number per
 * shrink and round), never on the collective tags the failed call used. In
 * each round every rank sends the set it believes alive (a bitmap, with the
 * next communicator id it could use) to every rank it started with, and
 * waits for the set of each rank of its own set:
 *   - a rank that does not answer within the round's window, whose
 *     exchange fails (a connection refused), or that is seen to be gone
 *     (a process of this host that no longer exists) leaves the set;
 *   - the set becomes the intersection of the sets that arrived;
 *   - when every rank of the set answered with exactly this set in two
 *     rounds in a row, it is agreed: each of them saw the same messages, so
 *     each ends in the same round. (One round is not enough: a rank that
 *     arrives late finds the others' first messages waiting, all alike,
 *     though they gave it up when that round ended; their second messages
 *     tell it so.)
 * A rank that receives a set without itself was given up by the others and
 * fails with FC_ERR_PEER_FAILED. Every round waits up to twice FC_TIMEOUT
 * (a survivor may still be waiting out the failed call). A message counts
 * when it arrived, whether or not this rank's own got through.
 *
 * This is not a consensus protocol: a rank that dies during the agreement,
 * or a message that reaches one member within its window and another not,
 * can leave survivors with different communicators, whose calls then fail
 * or time out; abort them and create a new one.
 */
#define _GNU_SOURCE
#include "comm.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport.h"

/* control sequence numbers 0 and 1 are creation's and destruction's
 * connectivity checks; shrinks use SHRINK_SEQ + epoch * SHRINK_ROUNDS + round */
#define SHRINK_SEQ 0x20000u
#define SHRINK_ROUNDS 64u
#define SHRINK_EPOCHS ((TAG_SEQ_MASK + 1 - SHRINK_SEQ) / SHRINK_ROUNDS)
#define SHRINK_MAGIC 0x666353484b000000ull /* "fcSHK" and the round */
#define SHRINK_LIVENESS_S 0.05             /* how often a local peer's process is looked for */
#define SHRINK_WINDOW_NO_TIMEOUT 120.0     /* a round's window under FC_TIMEOUT=0 */
#define SHRINK_HEAD 2                      /* words before the bitmap: magic|round, next id */

static int has(const uint64_t *set, int q)
{
    return (int)((set[q >> 6] >> (q & 63)) & 1u);
}

static void drop(uint64_t *set, int q)
{
    set[q >> 6] &= ~(1ull << (q & 63));
}

/* q's process is known to be gone: it ran on this host, in this process
 * id namespace (a container of the same host name may have its own), and
 * exists no more (fc_run, srun and mpirun reap their ranks). Elsewhere
 * nothing is known. */
static int process_gone(const struct fc_comm *c, int q)
{
    if (q == c->rank || c->host_pid[q] <= 0 || strcmp(c->hosts[q], c->hosts[c->rank]) != 0 ||
        !c->pidns || c->pidns[q] == 0 || c->pidns[q] != c->pidns[c->rank])
        return 0;
    return kill((pid_t)c->host_pid[q], 0) != 0 && errno == ESRCH;
}

struct shrink {
    struct fc_comm *c;
    int n, words;
    size_t len;             /* bytes of a message */
    uint64_t *start;        /* whom messages go to: the ranks believed alive at first */
    uint64_t *set;          /* the set this round proposes */
    uint64_t *next;         /* the next round's */
    uint64_t *views;        /* n messages that arrived this round */
    uint8_t *heard;         /* per rank: its message arrived */
    struct fc_request **reqs;
};

/* q's message of this round is in (the exchange's receive step). */
static int arrived(const struct fc_request *r)
{
    return r->s.nsteps > 1 && r->s.steps[1].complete;
}

/* One exchange with q: this rank's message out (always), q's in (where q
 * is in the set). */
static fc_result_t exchange(struct shrink *k, int q, const uint64_t *msg, uint64_t tb,
                            int receive)
{
    struct fc_comm *c = k->c;
    struct fc_request *r = comm_request_new(c, FC_UINT8, FC_SUM);
    if (!r)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    r->owned = malloc(2 * k->len);
    if (!r->owned) {
        comm_request_free(r);
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(r->owned, msg, k->len);
    /* eager, never the RMA rendezvous: a rank that comes back late must
     * find the message though its sender no longer drives progress */
    r->delivery = 1;
    r->s.coll_name = "shrink";
    r->s.algo_name = "agreement";
    sched_send(&r->s, q, 0, sbuf(R_SEND, 0), k->len);
    if (receive)
        sched_recv(&r->s, q, 0, sbuf(R_RECV, 0), k->len);
    if (r->s.build_err != FC_SUCCESS) {
        fc_result_t rc = r->s.build_err;
        comm_request_free(r);
        return rc;
    }
    pthread_mutex_lock(&c->sh->lock);
    fc_result_t rc = comm_start_locked(r, r->owned, (char *)r->owned + k->len, tb,
                                       "shrink's agreement", 0);
    pthread_mutex_unlock(&c->sh->lock);
    if (rc != FC_SUCCESS) {
        comm_request_free(r);
        return rc;
    }
    k->reqs[q] = r;
    return FC_SUCCESS;
}

/* A round: sends the set, collects the sets of its members for at most
 * window seconds (0: no limit). */
static fc_result_t round_run(struct shrink *k, unsigned round, uint64_t tb, double window)
{
    struct fc_comm *c = k->c;
    struct comm_shared *sh = c->sh;
    uint64_t *msg = calloc(1, k->len);
    if (!msg)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    msg[0] = SHRINK_MAGIC | round;
    pthread_mutex_lock(&sh->lock);
    msg[1] = sh->next_comm_id;
    pthread_mutex_unlock(&sh->lock);
    memcpy(msg + SHRINK_HEAD, k->set, (size_t)k->words * 8);
    memset(k->heard, 0, (size_t)k->n);
    fc_result_t rc = FC_SUCCESS;
    for (int q = 0; q < k->n && rc == FC_SUCCESS; q++)
        if (q != c->rank && has(k->start, q))
            rc = exchange(k, q, msg, tb, has(k->set, q));
    free(msg);
    double t0 = comm_now(), looked = t0;
    pthread_mutex_lock(&sh->lock);
    while (rc == FC_SUCCESS && sh->failed == FC_SUCCESS) {
        comm_progress_locked(sh);
        double now = comm_now();
        int look = now - looked >= SHRINK_LIVENESS_S, pending = 0;
        if (look)
            looked = now;
        for (int q = 0; q < k->n; q++) {
            struct fc_request *r = k->reqs[q];
            if (!r || r->done || !has(k->set, q) || arrived(r))
                continue;
            if (look && process_gone(c, q)) {
                FC_INFO(LOG_INIT, "shrink: rank %d's process (pid %d) is gone", q,
                        c->host_pid[q]);
                comm_request_drop_locked(r, FC_ERR_PEER_FAILED, "its process is gone");
                k->reqs[q] = NULL;
                continue;
            }
            pending++;
        }
        if (!pending || (window > 0 && now - t0 >= window))
            break;
        transport_block(sh->ptp, 1000, &sh->lock);
    }
    if (rc == FC_SUCCESS && sh->failed != FC_SUCCESS)
        rc = FC_ERR(sh->failed, "the fabric failed during the agreement: %s", sh->failmsg);
    for (int q = 0; q < k->n; q++) {
        struct fc_request *r = k->reqs[q];
        if (!r)
            continue;
        if (has(k->set, q) && arrived(r)) { /* whether or not our send to it got through */
            const uint64_t *v = (const uint64_t *)((char *)r->owned + k->len);
            if (v[0] == (SHRINK_MAGIC | round)) {
                memcpy(k->views + (size_t)q * (k->len / 8), v, k->len);
                k->heard[q] = 1;
            }
        }
        if (has(k->set, q) && !k->heard[q])
            FC_WARN(LOG_INIT, "shrink: no answer from rank %d (%s, pid %d) in round %u: %s", q,
                    c->hosts[q], c->host_pid[q], round,
                    r->done ? r->s.errmsg : "nothing arrived within the window");
        comm_request_drop_locked(r, FC_ERR_TIMEOUT, "the shrink round ended");
        k->reqs[q] = NULL;
    }
    pthread_mutex_unlock(&sh->lock);
    return rc;
}

static void shrink_free(struct shrink *k)
{
    free(k->start);
    free(k->set);
    free(k->next);
    free(k->views);
    free(k->heard);
    free(k->reqs);
}

fc_result_t comm_shrink(struct fc_comm *c, struct fc_comm **out)
{
    *out = NULL;
    pthread_mutex_lock(&c->sh->lock);
    fc_result_t failed = c->sh->failed;
    char why[512];
    snprintf(why, sizeof(why), "%s", c->sh->failmsg);
    pthread_mutex_unlock(&c->sh->lock);
    if (failed != FC_SUCCESS)
        return FC_ERR(failed,
                      "the fabric endpoint itself failed (%s): there is nothing left to agree "
                      "over; abort the communicator and create a new one",
                      why);
    if (c->shrinks >= SHRINK_EPOCHS)
        return FC_ERR(FC_ERR_UNSUPPORTED, "a communicator is shrunk at most %u times",
                      (unsigned)SHRINK_EPOCHS);
    const unsigned epoch = c->shrinks++;
    struct shrink k = {.c = c, .n = c->size, .words = (c->size + 63) / 64};
    k.len = (size_t)(SHRINK_HEAD + k.words) * 8;
    k.start = calloc((size_t)k.words, 8);
    k.set = calloc((size_t)k.words, 8);
    k.next = calloc((size_t)k.words, 8);
    k.views = calloc((size_t)k.n, k.len);
    k.heard = calloc((size_t)k.n, 1);
    k.reqs = calloc((size_t)k.n, sizeof(*k.reqs));
    fc_result_t rc = FC_SUCCESS;
    if (!k.start || !k.set || !k.next || !k.views || !k.heard || !k.reqs) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    for (int q = 0; q < k.n; q++)
        if (!process_gone(c, q))
            k.start[q >> 6] |= 1ull << (q & 63);
    memcpy(k.set, k.start, (size_t)k.words * 8);
    const size_t vw = k.len / 8;
    int settled = 0; /* the round before agreed on this set */
    for (unsigned round = 0; round < SHRINK_ROUNDS; round++) {
        uint64_t tb = tag_base(c->id, TAG_KIND_CTRL, SHRINK_SEQ + epoch * SHRINK_ROUNDS + round);
        /* twice FC_TIMEOUT in every round: survivors enter up to about
         * FC_TIMEOUT apart, and a round that ends on its window carries
         * that lag into the next */
        double window = c->cfg.timeout > 0 ? 2 * c->cfg.timeout : SHRINK_WINDOW_NO_TIMEOUT;
        rc = round_run(&k, round, tb, window);
        if (rc != FC_SUCCESS)
            goto out;
        int agreed = 1;
        uint32_t id = 0;
        pthread_mutex_lock(&c->sh->lock);
        id = c->sh->next_comm_id;
        pthread_mutex_unlock(&c->sh->lock);
        uint64_t *next = k.next;
        memcpy(next, k.set, (size_t)k.words * 8);
        for (int q = 0; q < k.n; q++) {
            if (q == c->rank || !has(k.set, q))
                continue;
            if (!k.heard[q]) {
                drop(next, q);
                agreed = 0;
                continue;
            }
            const uint64_t *v = k.views + (size_t)q * vw;
            if (!has(v + SHRINK_HEAD, c->rank)) {
                rc = FC_ERR(FC_ERR_PEER_FAILED,
                            "rank %d (%s) and the ranks with it have given this rank up as "
                            "failed (it answered too late): it is not in their new "
                            "communicator; abort this one",
                            q, c->hosts[q]);
                goto out;
            }
            for (int w = 0; w < k.words; w++) {
                agreed &= v[SHRINK_HEAD + w] == k.set[w];
                next[w] &= v[SHRINK_HEAD + w];
            }
            if (v[1] > id)
                id = (uint32_t)v[1];
        }
        if (agreed && !settled) {
            settled = 1; /* once more, to be sure no member gave up on another */
            continue;
        }
        settled = 0;
        if (agreed) {
            int nm = 0;
            int *m = malloc((size_t)k.n * sizeof(int));
            if (!m) {
                rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
                goto out;
            }
            for (int q = 0; q < k.n; q++)
                if (has(k.set, q))
                    m[nm++] = q;
            rc = comm_child(c, m, nm, id, out);
            free(m);
            if (rc == FC_SUCCESS)
                FC_INFO(LOG_INIT,
                        "shrink: %d of %d ranks agreed in %u round%s -> rank %d of %d "
                        "(communicator id %u)",
                        nm, k.n, round + 1, round ? "s" : "", (*out)->rank, nm, (unsigned)id);
            goto out;
        }
        memcpy(k.set, next, (size_t)k.words * 8);
    }
    rc = FC_ERR(FC_ERR_TIMEOUT, "the survivors did not agree on who is alive in %u rounds",
                SHRINK_ROUNDS);
out:
    shrink_free(&k);
    return rc;
}
