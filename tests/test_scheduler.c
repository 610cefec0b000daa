/* Continuous batching (scheduler.h) on the tiny GPT-2 of
 * tests/fixtures/generate and its four prefix adapters: greedy requests
 * submitted from several threads, with different adapters (and none) and
 * arriving while others run, give pfx_generate's tokens for each alone;
 * adapters of different gains (two gains files) share the scheduler through
 * one step per adapter; a cancelled or stopped request frees its slot for
 * the next; a full queue is PFX_ERROR_BUSY; an adapter added by
 * pfx_scheduler_call serves at once; every argument is checked.
 * argv[1]: the fixture folder. */
#include <pthread.h>
#include <unistd.h>

#include "pfx_test.h"
#include "prefixcl/io.h"
#include "prefixcl/scheduler.h"

static const char *g_fixtures;

#define NEW     7
#define SLOTS   3
#define MAX_LEN 20

static const int32_t prompts[4][6] = {
    { 5, 17, 3 }, { 40, 2, 9, 11, 30, 7 }, { 1 }, { 22, 23, 24, 25 }
};
static const size_t prompt_lens[4] = { 3, 6, 1, 4 };

/* What a request saw, filled by its callbacks (on the worker thread). */
typedef struct seen {
    pthread_mutex_t mu;
    pthread_cond_t done_cv;
    int32_t tokens[128];
    size_t count;
    size_t stop_after; /* on_token answers false at this count (0: never) */
    bool done;
    int done_calls;
    pfx_finish finish;
    /* a gate that holds the worker inside on_token until opened */
    bool gated, gate_open, at_gate;
    void *user; /* the test's own */
} seen;

static void seen_init(seen *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->done_cv, NULL);
}

static void seen_free(seen *s)
{
    pthread_cond_destroy(&s->done_cv);
    pthread_mutex_destroy(&s->mu);
}

static bool on_token(void *user, int32_t token)
{
    seen *s = user;
    pthread_mutex_lock(&s->mu);
    /* no cmocka assert here: this is the worker's thread */
    if (s->count < sizeof(s->tokens) / sizeof(s->tokens[0]))
        s->tokens[s->count] = token;
    s->count++;
    const bool more = !s->stop_after || s->count < s->stop_after;
    s->at_gate = true;
    pthread_cond_broadcast(&s->done_cv);
    while (s->gated && !s->gate_open)
        pthread_cond_wait(&s->done_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return more;
}

static void on_done(void *user, pfx_finish finish, const char *error)
{
    seen *s = user;
    if (error)
        fprintf(stderr, "request failed: %s\n", error);
    pthread_mutex_lock(&s->mu);
    s->done = true;
    s->done_calls++;
    s->finish = finish;
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
}

static void wait_until(seen *s, bool *flag)
{
    pthread_mutex_lock(&s->mu);
    while (!*flag)
        pthread_cond_wait(&s->done_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static pfx_sched_request request(int p, int32_t adapter, size_t max_new, seen *s)
{
    pfx_sched_request r = { .prompt = prompts[p],
                            .prompt_len = prompt_lens[p],
                            .adapter = adapter,
                            .sampling = { .max_new_tokens = max_new },
                            .seed = 7,
                            .on_token = on_token,
                            .on_done = on_done,
                            .user = s };
    return r;
}

typedef struct world {
    pfx_runtime *rt;
    pfx_model *model;
    pfx_context *ctx; /* generate_alone's */
    pfx_adapter_bank *bank;
    int32_t alone[5][4][NEW]; /* [adapter + 1][prompt]: pfx_generate of each request alone */
    size_t alone_len[5][4];
} world;

/* pfx_generate's greedy tokens of every prompt with every adapter, alone. */
static void generate_alone(world *w, size_t adapters, const int32_t *stop, size_t stop_count)
{
    pfx_kv_cache *cache = NULL;
    assert_int_equal(pfx_kv_cache_create(w->model, 1, MAX_LEN, &cache), PFX_SUCCESS);
    const pfx_sampling greedy = { .max_new_tokens = NEW, .stop = stop, .stop_count = stop_count };
    for (int a = -1; a < (int)adapters; a++)
        for (int p = 0; p < 4; p++) {
            pfx_request q = { prompts[p], prompt_lens[p], a, 7, w->alone[a + 1][p], 0, false };
            assert_int_equal(pfx_generate(w->ctx, cache, w->bank, &q, 1, &greedy, NULL, NULL, NULL),
                             PFX_SUCCESS);
            w->alone_len[a + 1][p] = q.out_len;
        }
    pfx_kv_cache_destroy(&cache);
}

static void open_world(world *w, pfx_runtime *rt)
{
    memset(w, 0, sizeof(*w));
    w->rt = rt;
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s/gpt2", g_fixtures);
    pfx_context_params cp = { .max_batch = SLOTS, .max_tokens = MAX_LEN, .max_prefix_len = 8 };
    assert_int_equal(pfx_model_load(rt, dir, NULL, &w->model), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(w->model, &cp, &w->ctx), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_create(w->model, 4, &w->bank), PFX_SUCCESS);
    for (int a = 0; a < 4; a++) {
        char path[1300];
        int32_t entry;
        snprintf(path, sizeof(path), "%s/adapter%d", dir, a);
        assert_int_equal(pfx_adapter_bank_add(w->bank, path, &entry), PFX_SUCCESS);
    }
    generate_alone(w, 4, NULL, 0);
}

static void close_world(world *w)
{
    pfx_adapter_bank_destroy(&w->bank);
    pfx_context_destroy(&w->ctx);
    pfx_model_destroy(&w->model);
}

static void expect_alone(const world *w, const seen *s, int32_t adapter, int p)
{
    const size_t n = w->alone_len[adapter + 1][p];
    if (s->count != n)
        fail_msg("adapter %d, prompt %d: %zu tokens, alone %zu", (int)adapter, p, s->count, n);
    for (size_t i = 0; i < n; i++)
        if (s->tokens[i] != w->alone[adapter + 1][p][i])
            fail_msg("adapter %d, prompt %d, token %zu: %d, alone %d", (int)adapter, p, i,
                     (int)s->tokens[i], (int)w->alone[adapter + 1][p][i]);
}

typedef struct submitter {
    pfx_scheduler *s;
    seen *seen;
    int first, count; /* requests first .. first + count - 1 of the 20 */
} submitter;

/* Request k: prompt k % 4, adapter k % 5 - 1. */
static void *submit_some(void *arg)
{
    submitter *t = arg;
    for (int k = t->first; k < t->first + t->count; k++) {
        pfx_sched_request r = request(k % 4, k % 5 - 1, NEW, &t->seen[k]);
        if (pfx_scheduler_submit(t->s, &r, NULL) != PFX_SUCCESS)
            fail_msg("submit %d: %s", k, pfx_last_error(NULL));
        usleep(1000 * (k % 3)); /* some arrive while others run */
    }
    return NULL;
}

/* 20 requests from 4 threads into 3 slots: each one's tokens are its own
 * alone, whatever shared its steps. */
static void test_concurrent_equals_alone(void **state)
{
    world w;
    open_world(&w, *state);
    pfx_scheduler *s = NULL;
    const pfx_scheduler_params p = { SLOTS, MAX_LEN, 32, 0, PFX_DTYPE_F32 };
    assert_int_equal(pfx_scheduler_create(w.model, w.bank, &p, &s), PFX_SUCCESS);
    seen sn[20];
    for (int k = 0; k < 20; k++)
        seen_init(&sn[k]);
    pthread_t th[4];
    submitter sub[4];
    for (int t = 0; t < 4; t++) {
        sub[t] = (submitter){ s, sn, 5 * t, 5 };
        assert_int_equal(pthread_create(&th[t], NULL, submit_some, &sub[t]), 0);
    }
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    for (int k = 0; k < 20; k++) {
        wait_until(&sn[k], &sn[k].done);
        assert_int_equal(sn[k].finish, PFX_FINISH_LENGTH);
        expect_alone(&w, &sn[k], k % 5 - 1, k % 4);
    }
    pfx_scheduler_stats st;
    assert_int_equal(pfx_scheduler_get_stats(s, &st), PFX_SUCCESS);
    assert_int_equal(st.generated_tokens, 20 * NEW);
    assert_int_equal(st.failed_steps, 0);
    assert_int_equal(st.queued + st.running, 0);
    /* continuous batching: fewer decode steps than requests one after the other */
    if (st.decode_steps >= 20 * (NEW - 1) || st.occupied_slot_steps <= st.decode_steps)
        fail_msg("%llu decode steps, %llu occupied slot-steps: the requests never shared a step",
                 (unsigned long long)st.decode_steps, (unsigned long long)st.occupied_slot_steps);
    pfx_scheduler_destroy(&s);
    assert_null(s);
    for (int k = 0; k < 20; k++) {
        assert_int_equal(sn[k].done_calls, 1);
        seen_free(&sn[k]);
    }
    close_world(&w);
}

/* A request held in its first token by a gate: the one slot is busy, the
 * queue of one fills, the next is PFX_ERROR_BUSY; cancelling the running
 * one frees the slot for the queued one, whose tokens are its own alone;
 * a callback that answers false stops its request (PFX_FINISH_STOP). */
static void test_busy_cancel_stop(void **state)
{
    world w;
    open_world(&w, *state);
    pfx_scheduler *s = NULL;
    const pfx_scheduler_params p = { 1, MAX_LEN, 1, 0, PFX_DTYPE_F32 };
    assert_int_equal(pfx_scheduler_create(w.model, w.bank, &p, &s), PFX_SUCCESS);
    seen a, b, c, d;
    seen_init(&a);
    seen_init(&b);
    seen_init(&c);
    seen_init(&d);
    a.gated = true;
    uint64_t id_a = 0, id_b = 0;
    pfx_sched_request ra = request(1, 2, NEW, &a), rb = request(0, 0, NEW, &b),
                      rc = request(2, -1, NEW, &c);
    assert_int_equal(pfx_scheduler_submit(s, &ra, &id_a), PFX_SUCCESS);
    wait_until(&a, &a.at_gate); /* the worker is inside a's callback: a holds the slot */
    assert_int_equal(pfx_scheduler_submit(s, &rb, &id_b), PFX_SUCCESS);
    assert_true(id_b > id_a);
    assert_status_names(NULL, pfx_scheduler_submit(s, &rc, NULL), PFX_ERROR_BUSY, "queue");
    assert_int_equal(c.done_calls, 0);
    assert_int_equal(pfx_scheduler_cancel(s, id_a), PFX_SUCCESS);
    pthread_mutex_lock(&a.mu);
    a.gate_open = true;
    pthread_cond_broadcast(&a.done_cv);
    pthread_mutex_unlock(&a.mu);
    wait_until(&a, &a.done);
    assert_int_equal(a.finish, PFX_FINISH_CANCELLED);
    assert_true(a.count < NEW);
    wait_until(&b, &b.done);
    assert_int_equal(b.finish, PFX_FINISH_LENGTH);
    expect_alone(&w, &b, 0, 0);
    /* cancelling what has ended does nothing */
    assert_int_equal(pfx_scheduler_cancel(s, id_a), PFX_SUCCESS);
    assert_int_equal(a.done_calls, 1);
    d.stop_after = 3;
    pfx_sched_request rd = request(3, 3, NEW, &d);
    assert_int_equal(pfx_scheduler_submit(s, &rd, NULL), PFX_SUCCESS);
    wait_until(&d, &d.done);
    assert_int_equal(d.finish, PFX_FINISH_STOP);
    assert_int_equal(d.count, 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(d.tokens[i], w.alone[4][3][i]);
    /* a queued request ends at shutdown, cancelled; later ones are refused */
    seen e, f;
    seen_init(&e);
    seen_init(&f);
    e.gated = true;
    pfx_sched_request re = request(0, -1, NEW, &e), rf = request(1, -1, NEW, &f);
    assert_int_equal(pfx_scheduler_submit(s, &re, NULL), PFX_SUCCESS);
    wait_until(&e, &e.at_gate);
    assert_int_equal(pfx_scheduler_submit(s, &rf, NULL), PFX_SUCCESS);
    pthread_mutex_lock(&e.mu);
    e.gate_open = true;
    pthread_cond_broadcast(&e.done_cv);
    pthread_mutex_unlock(&e.mu);
    assert_int_equal(pfx_scheduler_shutdown(s), PFX_SUCCESS);
    assert_true(e.done && f.done);
    assert_int_equal(e.done_calls + f.done_calls, 2);
    assert_status_names(NULL, pfx_scheduler_submit(s, &rc, NULL), PFX_ERROR_UNSUPPORTED,
                        "shut down");
    pfx_scheduler_destroy(&s);
    seen *all[] = { &a, &b, &c, &d, &e, &f };
    for (size_t i = 0; i < 6; i++)
        seen_free(all[i]);
    close_world(&w);
}

/* Two gains files of different gains cannot share a step in the library:
 * the scheduler runs one per adapter, and each request's tokens are its
 * own alone. */
static void test_different_gains(void **state)
{
    pfx_runtime *rt = *state;
    world w;
    memset(&w, 0, sizeof(w));
    w.rt = rt;
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s/gpt2", g_fixtures);
    pfx_context_params cp = { .max_batch = SLOTS, .max_tokens = MAX_LEN };
    assert_int_equal(pfx_model_load(rt, dir, NULL, &w.model), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(w.model, &cp, &w.ctx), PFX_SUCCESS);
    pfx_model_shape sh;
    assert_int_equal(pfx_model_get_shape(w.model, &sh), PFX_SUCCESS);
    const size_t LH = sh.layers * sh.heads;
    char tmpl[] = "/tmp/pfx-sched-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    assert_int_equal(pfx_adapter_bank_create(w.model, 2, &w.bank), PFX_SUCCESS);
    char path[2][1200];
    for (int k = 0; k < 2; k++) {
        float g[64];
        for (size_t i = 0; i < LH; i++)
            g[i] = k ? 1.5f - 0.2f * (float)i : 0.4f + 0.3f * (float)i;
        pfx_named_tensor t = { .name = "gains",
                               .host = g,
                               .ndim = 2,
                               .shape = { sh.layers, sh.heads },
                               .dtype = PFX_DTYPE_F32 };
        pfx_st_metadata meta[3] = { { "format", "prefixcl-gains-1" },
                                    { "gain_mode", "linear" },
                                    { "structured", "false" } };
        snprintf(path[k], sizeof(path[k]), "%s/gains%d.safetensors", tmpl, k);
        assert_int_equal(pfx_safetensors_save(NULL, path[k], &t, 1, meta, 3), PFX_SUCCESS);
        int32_t entry;
        assert_int_equal(pfx_adapter_bank_add(w.bank, path[k], &entry), PFX_SUCCESS);
    }
    generate_alone(&w, 2, NULL, 0);
    pfx_scheduler *s = NULL;
    const pfx_scheduler_params p = { SLOTS, MAX_LEN, 16, 0, PFX_DTYPE_F32 };
    assert_int_equal(pfx_scheduler_create(w.model, w.bank, &p, &s), PFX_SUCCESS);
    seen sn[9];
    for (int k = 0; k < 9; k++) {
        seen_init(&sn[k]);
        pfx_sched_request r = request(k % 4, k % 3 - 1, NEW, &sn[k]);
        assert_int_equal(pfx_scheduler_submit(s, &r, NULL), PFX_SUCCESS);
    }
    for (int k = 0; k < 9; k++) {
        wait_until(&sn[k], &sn[k].done);
        assert_int_equal(sn[k].finish, PFX_FINISH_LENGTH);
        expect_alone(&w, &sn[k], k % 3 - 1, k % 4);
        seen_free(&sn[k]);
    }
    /* the gains change the tokens: the test can tell the adapters apart */
    assert_memory_not_equal(w.alone[1][1], w.alone[2][1], sizeof(w.alone[1][1]));
    pfx_scheduler_destroy(&s);
    close_world(&w);
    for (int k = 0; k < 2; k++)
        unlink(path[k]);
    rmdir(tmpl);
}

typedef struct adding {
    pfx_adapter_bank *bank;
    char path[1300];
    int32_t entry;
} adding;

static pfx_status add_adapter(void *user)
{
    adding *a = user;
    return pfx_adapter_bank_add(a->bank, a->path, &a->entry);
}

/* pfx_scheduler_call adds an adapter between two steps of a running
 * scheduler; requests may name it from then on, with its tokens alone. */
static void test_call_adds_adapter(void **state)
{
    world w;
    open_world(&w, *state);
    adding a = { NULL, "", -1 };
    assert_int_equal(pfx_adapter_bank_create(w.model, 2, &a.bank), PFX_SUCCESS);
    snprintf(a.path, sizeof(a.path), "%s/gpt2/adapter0", g_fixtures);
    assert_int_equal(pfx_adapter_bank_add(a.bank, a.path, &a.entry), PFX_SUCCESS);
    pfx_scheduler *s = NULL;
    const pfx_scheduler_params p = { SLOTS, MAX_LEN, 8, 0, PFX_DTYPE_F32 };
    assert_int_equal(pfx_scheduler_create(w.model, a.bank, &p, &s), PFX_SUCCESS);
    seen busy, later;
    seen_init(&busy);
    seen_init(&later);
    pfx_sched_request r = request(1, 1, NEW, &later);
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE, "adapter");
    pfx_sched_request rb = request(0, 0, NEW, &busy); /* running while the adapter comes */
    assert_int_equal(pfx_scheduler_submit(s, &rb, NULL), PFX_SUCCESS);
    snprintf(a.path, sizeof(a.path), "%s/gpt2/adapter1", g_fixtures);
    assert_int_equal(pfx_scheduler_call(s, add_adapter, &a), PFX_SUCCESS);
    assert_int_equal(a.entry, 1);
    assert_int_equal(pfx_scheduler_submit(s, &r, NULL), PFX_SUCCESS);
    wait_until(&later, &later.done);
    wait_until(&busy, &busy.done);
    expect_alone(&w, &later, 1, 1);
    expect_alone(&w, &busy, 0, 0);
    /* fn's status comes back: the bank is full */
    assert_int_equal(pfx_scheduler_call(s, add_adapter, &a), PFX_ERROR_OUT_OF_RANGE);
    assert_status_names(NULL, pfx_scheduler_call(s, NULL, NULL), PFX_ERROR_NULL_ARGUMENT, "fn");
    assert_int_equal(pfx_scheduler_shutdown(s), PFX_SUCCESS);
    assert_status_names(NULL, pfx_scheduler_call(s, add_adapter, &a), PFX_ERROR_UNSUPPORTED,
                        "shut down");
    pfx_scheduler_destroy(&s);
    seen_free(&busy);
    seen_free(&later);
    pfx_adapter_bank_destroy(&a.bank);
    close_world(&w);
}

/* A request whose prefix, prompt and new tokens pass the model's positions
 * is refused at submission, naming them, not failed halfway. */
static void test_positions(void **state)
{
    pfx_runtime *rt = *state;
    char dir[1200], path[1300];
    snprintf(dir, sizeof(dir), "%s/gpt2", g_fixtures);
    snprintf(path, sizeof(path), "%s/adapter0", dir);
    pfx_model_shape sh;
    assert_int_equal(pfx_model_read_config(dir, &sh), PFX_SUCCESS);
    size_t P = 0;
    assert_int_equal(pfx_adapter_prefix_len(path, &P), PFX_SUCCESS);
    assert_true(P > 0);
    pfx_model *m = NULL;
    assert_int_equal(pfx_model_load(rt, dir, NULL, &m), PFX_SUCCESS);
    pfx_adapter_bank *bank = NULL;
    int32_t entry;
    assert_int_equal(pfx_adapter_bank_create(m, 1, &bank), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_add(bank, path, &entry), PFX_SUCCESS);
    pfx_scheduler *s = NULL;
    const pfx_scheduler_params p = { 1, sh.max_positions, 2, 0, PFX_DTYPE_F32 };
    assert_int_equal(pfx_scheduler_create(m, bank, &p, &s), PFX_SUCCESS);
    seen x, y;
    seen_init(&x);
    seen_init(&y);
    /* prompt 3 + new: every position; with the prefix, P too many */
    pfx_sched_request r = request(0, 0, sh.max_positions - 3, &x);
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE,
                        "positions");
    r.sampling.max_new_tokens -= P;
    assert_int_equal(pfx_scheduler_submit(s, &r, NULL), PFX_SUCCESS);
    pfx_sched_request plain = request(0, -1, sh.max_positions - 3, &y);
    assert_int_equal(pfx_scheduler_submit(s, &plain, NULL), PFX_SUCCESS);
    wait_until(&x, &x.done);
    wait_until(&y, &y.done);
    assert_int_equal(x.finish == PFX_FINISH_ERROR || y.finish == PFX_FINISH_ERROR, 0);
    pfx_scheduler_destroy(&s);
    seen_free(&x);
    seen_free(&y);
    pfx_adapter_bank_destroy(&bank);
    pfx_model_destroy(&m);
}

/* Every argument is checked, the message naming it; nothing is queued. */
static void test_arguments(void **state)
{
    world w;
    open_world(&w, *state);
    pfx_scheduler *s = (pfx_scheduler *)&w; /* set to NULL by a refused create */
    pfx_scheduler_params p = { SLOTS, MAX_LEN, 4, 0, PFX_DTYPE_F32 };
    assert_status_names(NULL, pfx_scheduler_create(NULL, w.bank, &p, &s), PFX_ERROR_NULL_ARGUMENT,
                        "model");
    assert_null(s);
    assert_status_names(w.rt, pfx_scheduler_create(w.model, w.bank, NULL, &s),
                        PFX_ERROR_NULL_ARGUMENT, "params");
    assert_status_names(w.rt, pfx_scheduler_create(w.model, w.bank, &p, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "out");
    p.slots = 0;
    assert_status_names(w.rt, pfx_scheduler_create(w.model, w.bank, &p, &s), PFX_ERROR_OUT_OF_RANGE,
                        "slots");
    pfx_model_shape shape;
    assert_int_equal(pfx_model_get_shape(w.model, &shape), PFX_SUCCESS);
    p = (pfx_scheduler_params){ SLOTS, shape.max_positions + 1, 4, 0, PFX_DTYPE_F32 };
    assert_status_names(w.rt, pfx_scheduler_create(w.model, w.bank, &p, &s), PFX_ERROR_OUT_OF_RANGE,
                        "max_len");
    p = (pfx_scheduler_params){ SLOTS, MAX_LEN, 0, 0, PFX_DTYPE_F32 };
    assert_status_names(w.rt, pfx_scheduler_create(w.model, w.bank, &p, &s), PFX_ERROR_OUT_OF_RANGE,
                        "queue");
    assert_null(s);
    p.queue = 4;
    p.kv_dtype = PFX_DTYPE_Q8_0;
    assert_status_names(w.rt, pfx_scheduler_create(w.model, w.bank, &p, &s),
                        PFX_ERROR_INVALID_ARGUMENT, "params.kv_dtype");
    assert_null(s);
    p.kv_dtype = PFX_DTYPE_F32;
    assert_int_equal(pfx_scheduler_create(w.model, w.bank, &p, &s), PFX_SUCCESS);
    seen x;
    seen_init(&x);
    const int32_t bad_ids[2] = { 3, 1 << 30 }, stops[PFX_SCHEDULER_MAX_STOPS + 1] = { 0 };
    pfx_sched_request r = request(0, 0, NEW, &x);
    assert_status_names(NULL, pfx_scheduler_submit(NULL, &r, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "scheduler");
    assert_status_names(NULL, pfx_scheduler_submit(s, NULL, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "request");
    r.prompt = NULL;
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_NULL_ARGUMENT, "prompt");
    r = request(0, 0, NEW, &x);
    r.on_done = NULL;
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "on_done");
    r = request(0, 4, NEW, &x);
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE, "adapter");
    r = request(0, -2, NEW, &x);
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE, "adapter");
    r = request(1, 0, MAX_LEN - 5, &x); /* 6 + 15 > 20 */
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE,
                        "20 tokens");
    r = request(0, 0, 0, &x);
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE,
                        "max_new_tokens");
    r = request(0, 0, NEW, &x);
    r.prompt_len = 0;
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE,
                        "prompt_len");
    r = request(0, 0, NEW, &x);
    r.prompt = bad_ids;
    r.prompt_len = 2;
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE,
                        "prompt[1]");
    r = request(0, 0, NEW, &x);
    r.sampling.temperature = NAN;
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_INVALID_ARGUMENT,
                        "temperature");
    r = request(0, 0, NEW, &x);
    r.sampling.top_p = 1.5f;
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_INVALID_ARGUMENT,
                        "top_p");
    r = request(0, 0, NEW, &x);
    r.sampling.stop = stops;
    r.sampling.stop_count = PFX_SCHEDULER_MAX_STOPS + 1;
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_OUT_OF_RANGE,
                        "stop_count");
    r.sampling.stop = NULL;
    r.sampling.stop_count = 1;
    assert_status_names(NULL, pfx_scheduler_submit(s, &r, NULL), PFX_ERROR_NULL_ARGUMENT, "stop");
    pfx_scheduler_stats st;
    assert_status_names(NULL, pfx_scheduler_get_stats(s, NULL), PFX_ERROR_NULL_ARGUMENT, "out");
    assert_int_equal(pfx_scheduler_get_stats(s, &st), PFX_SUCCESS);
    assert_int_equal(st.queued + st.running + st.prefill_steps, 0);
    assert_int_equal(x.done_calls, 0);
    assert_status_names(NULL, pfx_scheduler_cancel(NULL, 1), PFX_ERROR_NULL_ARGUMENT, "scheduler");
    assert_status_names(NULL, pfx_scheduler_shutdown(NULL), PFX_ERROR_NULL_ARGUMENT, "scheduler");
    pfx_scheduler_destroy(&s);
    pfx_scheduler_destroy(&s);
    pfx_scheduler_destroy(NULL);
    seen_free(&x);
    close_world(&w);
}

/* The logprobs of each token a request saw (on the worker thread). */
typedef struct logprobs_seen {
    size_t calls, top_counts, top_first;
    int32_t first_top[128];
} logprobs_seen;

static void on_logprobs(void *user, const pfx_token_logprobs *lp)
{
    seen *s = user;
    logprobs_seen *l = (logprobs_seen *)s->user;
    if (l->calls < 128)
        l->first_top[l->calls] = lp->top_count ? lp->top_ids[0] : -1;
    l->calls++;
    l->top_counts += lp->top_count;
    l->top_first += lp->top_count && lp->logprob == lp->top_logprobs[0];
}

/* Logit bias and the three penalties through the scheduler give
 * pfx_generate's tokens for each request alone (the penalties see each
 * request's own prompt and tokens, whatever shares its steps), differ from
 * plain greedy, and each token's logprobs come before it, the greedy token
 * the most likely. */
static void test_processed_sampling(void **state)
{
    world w;
    open_world(&w, *state);
    const pfx_logit_bias bias[2] = { { 17, 3.0f }, { 40, -2.0f } };
    const pfx_sampling processed = { .max_new_tokens = NEW,
                                     .repetition_penalty = 1.4f,
                                     .presence_penalty = 0.7f,
                                     .frequency_penalty = 0.5f,
                                     .logit_bias = bias,
                                     .logit_bias_count = 2 };
    int32_t alone[4][NEW];
    size_t alone_len[4];
    pfx_kv_cache *cache = NULL;
    assert_int_equal(pfx_kv_cache_create(w.model, 1, MAX_LEN, &cache), PFX_SUCCESS);
    bool differs = false;
    for (int p = 0; p < 4; p++) {
        pfx_request q = { prompts[p], prompt_lens[p], 1, 7, alone[p], 0, false };
        assert_int_equal(pfx_generate(w.ctx, cache, w.bank, &q, 1, &processed, NULL, NULL, NULL),
                         PFX_SUCCESS);
        alone_len[p] = q.out_len;
        differs |= q.out_len != w.alone_len[2][p] ||
                   memcmp(alone[p], w.alone[2][p], q.out_len * sizeof(int32_t));
    }
    pfx_kv_cache_destroy(&cache);
    assert_true(differs);
    pfx_scheduler *s = NULL;
    const pfx_scheduler_params sp = { SLOTS, MAX_LEN, 32, 0, PFX_DTYPE_F32 };
    assert_int_equal(pfx_scheduler_create(w.model, w.bank, &sp, &s), PFX_SUCCESS);
    seen sn[8];
    logprobs_seen ls[8];
    for (int k = 0; k < 8; k++) {
        seen_init(&sn[k]);
        ls[k] = (logprobs_seen){ 0 };
        pfx_sched_request r = request(k % 4, 1, NEW, &sn[k]);
        r.sampling = processed;
        r.on_logprobs = on_logprobs;
        r.top_logprobs = 3;
        sn[k].user = &ls[k];
        assert_int_equal(pfx_scheduler_submit(s, &r, NULL), PFX_SUCCESS);
    }
    for (int k = 0; k < 8; k++) {
        wait_until(&sn[k], &sn[k].done);
        const size_t n = alone_len[k % 4];
        assert_int_equal(sn[k].count, n);
        assert_memory_equal(sn[k].tokens, alone[k % 4], n * sizeof(int32_t));
        assert_int_equal(ls[k].calls, n);
        assert_int_equal(ls[k].top_counts, 3 * n);
        assert_int_equal(ls[k].top_first, n);
        assert_memory_equal(ls[k].first_top, alone[k % 4], n * sizeof(int32_t));
    }
    /* checked at submit, by name */
    pfx_sched_request bad = request(0, 1, NEW, &sn[0]);
    bad.sampling.presence_penalty = 3.0f;
    assert_status_names(NULL, pfx_scheduler_submit(s, &bad, NULL), PFX_ERROR_INVALID_ARGUMENT,
                        "presence_penalty");
    bad = request(0, 1, NEW, &sn[0]);
    const pfx_logit_bias far = { 100000, 1.0f };
    bad.sampling.logit_bias = &far;
    bad.sampling.logit_bias_count = 1;
    assert_status_names(NULL, pfx_scheduler_submit(s, &bad, NULL), PFX_ERROR_OUT_OF_RANGE,
                        "logit_bias[0].token");
    bad = request(0, 1, NEW, &sn[0]);
    bad.on_logprobs = on_logprobs;
    bad.top_logprobs = PFX_TOP_LOGPROBS_MAX + 1;
    assert_status_names(NULL, pfx_scheduler_submit(s, &bad, NULL), PFX_ERROR_OUT_OF_RANGE,
                        "top_logprobs");
    pfx_scheduler_destroy(&s);
    for (int k = 0; k < 8; k++)
        seen_free(&sn[k]);
    close_world(&w);
}

static pfx_status nothing(void *user)
{
    (void)user;
    return PFX_SUCCESS;
}

/* The prompt cache: a prompt that starts with a kept one (same adapter)
 * reuses its rows and still gives pfx_generate's tokens alone (the same
 * KV cache dtype); another adapter, or a bank call between, reuses
 * nothing. */
static void prompt_cache_with(void **state, pfx_dtype kv)
{
    world w;
    open_world(&w, *state);
    static const int32_t longer[8] = { 40, 2, 9, 11, 5, 17, 3, 1 }; /* prompts[1]'s first 4 */
    const pfx_sampling greedy = { .max_new_tokens = NEW };
    int32_t alone[3][NEW]; /* longer with no adapter, with adapter 0; prompts[1] with 0 */
    size_t alone_len[3];
    pfx_kv_cache *cache = NULL;
    assert_int_equal(pfx_kv_cache_create_dtype(w.model, 1, MAX_LEN, kv, &cache), PFX_SUCCESS);
    for (int a = 0; a < 3; a++) {
        pfx_request q = { longer, 8, a - 1, 7, alone[a], 0, false };
        if (a == 2)
            q = (pfx_request){ prompts[1], prompt_lens[1], 0, 7, alone[a], 0, false };
        assert_int_equal(pfx_generate(w.ctx, cache, w.bank, &q, 1, &greedy, NULL, NULL, NULL),
                         PFX_SUCCESS);
        alone_len[a] = q.out_len;
    }
    pfx_kv_cache_destroy(&cache);
    pfx_scheduler *s = NULL;
    const pfx_scheduler_params sp = { SLOTS, MAX_LEN, 8, 1 << 20, kv };
    assert_int_equal(pfx_scheduler_create(w.model, w.bank, &sp, &s), PFX_SUCCESS);
    /* adapter, prompt (0: prompts[1], 1: longer), rows reused in all after it (the
     * fourth: all but the last of the second's 8) */
    static const int plan[5][3] = {
        { 0, 0, 0 }, { 0, 1, 4 }, { -1, 1, 4 }, { 0, 1, 11 }, { 0, 1, 11 }
    };
    pfx_scheduler_stats st;
    for (int k = 0; k < 5; k++) {
        if (k == 4) /* a bank call empties the cache */
            assert_int_equal(pfx_scheduler_call(s, nothing, NULL), PFX_SUCCESS);
        seen sn;
        seen_init(&sn);
        pfx_sched_request r = request(1, plan[k][0], NEW, &sn);
        if (plan[k][1]) {
            r.prompt = longer;
            r.prompt_len = 8;
        }
        assert_int_equal(pfx_scheduler_submit(s, &r, NULL), PFX_SUCCESS);
        wait_until(&sn, &sn.done);
        const int a = plan[k][1] ? plan[k][0] + 1 : 2;
        assert_int_equal(sn.count, alone_len[a]);
        assert_memory_equal(sn.tokens, alone[a], alone_len[a] * sizeof(int32_t));
        seen_free(&sn);
        assert_int_equal(pfx_scheduler_get_stats(s, &st), PFX_SUCCESS);
        if (st.prompt_cache_tokens != (uint64_t)plan[k][2])
            fail_msg("request %d: %llu rows reused, expected %d", k,
                     (unsigned long long)st.prompt_cache_tokens, plan[k][2]);
    }
    assert_int_equal(st.prompt_cache_hits, 2);
    pfx_scheduler_destroy(&s);
    close_world(&w);
}

static void test_prompt_cache(void **state)
{
    prompt_cache_with(state, PFX_DTYPE_F32);
}

/* The same with the KV cache and the prompt cache's rows in half and
 * bfloat16. */
static void test_prompt_cache_half_kv(void **state)
{
    prompt_cache_with(state, PFX_DTYPE_F16);
    prompt_cache_with(state, PFX_DTYPE_BF16);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_scheduler FIXTURE_DIR\n");
        return 2;
    }
    g_fixtures = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_concurrent_equals_alone),
        cmocka_unit_test(test_busy_cancel_stop),
        cmocka_unit_test(test_different_gains),
        cmocka_unit_test(test_call_adds_adapter),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_processed_sampling),
        cmocka_unit_test(test_prompt_cache),
        cmocka_unit_test(test_prompt_cache_half_kv),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
