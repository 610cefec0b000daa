/* prefixcl generate: text (or ids) from a model folder with prefix adapters,
 * every prompt with every adapter in one batch, prefill and decode tokens/s. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "commands.h"
#include "gen_output.h"
#include "serve_cli.h"
#include "common/stop_text.h"
#include "common/tool_util.h"

#define MAX_PROMPTS 64 /* of each prompt option; a --prompts file may hold any number of lines */
#define MAX_STOPS   16

static const cli_doc doc = {
    "prefixcl generate --model DIR [--adapter PATH]... (--prompt TEXT | --prompts FILE |\n"
    "                  --prompt-ids IDS)... [options]",
    NULL, NULL
};

typedef struct prompt {
    int32_t *ids;
    size_t len;
    const char *text; /* NULL: given as ids */
    const char *from; /* the option, or the file it is a line of */
    size_t line;      /* 1-based; 0: not from a file */
} prompt;

typedef struct stream {
    const serve_ctx *ctx;
    pfx_request *req;         /* the batch's requests */
    size_t printed;           /* bytes of request 0's decoded output already written */
    bool live;                /* a single request: print as the tokens come */
    double last[8];           /* tool_now_s() of each request's latest token */
    const char *const *stops; /* --stop strings */
    size_t stop_count, hold;
    bool stopped[8]; /* a request ended at a stop string */
} stream;

/* The decoded text of a request's output so far (or its ids). */
static char *render(const serve_ctx *ctx, const pfx_request *q)
{
    char *text = NULL;
    size_t len = 0;
    if (ctx->tok && pfx_tokenizer_decode(ctx->tok, q->out, q->out_len, PFX_DECODE_SKIP_SPECIAL,
                                         &text, &len) == PFX_SUCCESS)
        return text;
    size_t cap = q->out_len * 12 + 1, n = 0;
    text = malloc(cap);
    if (!text)
        return NULL;
    text[0] = '\0';
    for (size_t i = 0; i < q->out_len; i++)
        n += (size_t)snprintf(text + n, cap - n, i ? " %d" : "%d", (int)q->out[i]);
    return text;
}

/* The decoded text of a request, cut before its first stop string. */
static char *render_cut(const stream *s, const pfx_request *q, bool *stopped)
{
    char *text = render(s->ctx, q);
    size_t len = text ? strlen(text) : 0;
    *stopped = text && s->ctx->tok && stop_text_cut(text, &len, s->stops, s->stop_count);
    if (text)
        text[len] = '\0';
    return text;
}

static void on_token(void *user, size_t r, int32_t token)
{
    (void)token;
    stream *s = user;
    if (r < sizeof(s->last) / sizeof(s->last[0]))
        s->last[r] = tool_now_s();
    if (!s->stop_count && (!s->live || r != 0))
        return;
    bool stopped = false;
    char *text = render_cut(s, &s->req[r], &stopped);
    if (!text)
        return;
    if (stopped) {
        s->req[r].end = true;
        s->stopped[r] = true;
    }
    const size_t n = stopped ? strlen(text) : stop_text_sendable(text, strlen(text), s->hold);
    if (s->live && r == 0 && n > s->printed) {
        fwrite(text + s->printed, 1, n - s->printed, stdout);
        fflush(stdout);
        s->printed = n;
    }
    free(text);
}

typedef struct text_line {
    char *text;
    const char *file;
    size_t line; /* 1-based */
} text_line;

/* The non-empty lines of `path` appended to *lines (*n of *cap), each a
 * prompt, of any length; a line holding a NUL byte is refused. */
static bool read_prompt_lines(const char *path, text_line **lines, size_t *n, size_t *cap)
{
    FILE *in;
    if (pfx_input_open(path, &in) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl generate: --prompts: %s\n", pfx_last_error(NULL));
        return false;
    }
    char *buf = NULL;
    size_t bufcap = 0, lineno = 0;
    ssize_t got;
    bool ok = true;
    while (ok && (got = getline(&buf, &bufcap, in)) >= 0) {
        size_t len = (size_t)got;
        lineno++;
        if (len && buf[len - 1] == '\n')
            len--;
        if (len && buf[len - 1] == '\r')
            len--;
        buf[len] = '\0';
        if (strlen(buf) != len) {
            fprintf(stderr, "prefixcl generate: %s:%zu: the line holds a NUL byte\n", path, lineno);
            ok = false;
            break;
        }
        if (!len)
            continue;
        if (*n == *cap) {
            size_t c = *cap ? 2 * *cap : 64;
            text_line *l = realloc(*lines, c * sizeof(*l));
            ok = l != NULL;
            if (ok)
                *lines = l, *cap = c;
        }
        char *copy = ok ? strdup(buf) : NULL;
        if (!copy) {
            fprintf(stderr, "prefixcl generate: %s: out of host memory\n", path);
            ok = false;
            break;
        }
        (*lines)[(*n)++] = (text_line){ copy, path, lineno };
    }
    if (ok && ferror(in)) {
        fprintf(stderr, "prefixcl generate: reading %s: %s\n", path, strerror(errno));
        ok = false;
    }
    free(buf);
    fclose(in);
    return ok;
}

static bool add_text_prompt(serve_ctx *ctx, const char *text, prompt *p)
{
    if (!ctx->tok) {
        fprintf(stderr, "prefixcl generate: the model folder has no tokenizer: use --prompt-ids\n");
        return false;
    }
    if (pfx_tokenizer_encode(ctx->tok, text, strlen(text), PFX_ENCODE_ADD_SPECIAL, &p->ids,
                             &p->len) != PFX_SUCCESS ||
        p->len == 0) {
        fprintf(stderr, "prefixcl generate: prompt \"%s\": %s\n", text,
                p->len ? pfx_last_error(NULL) : "no tokens");
        return false;
    }
    p->text = text;
    return true;
}

/* Whether the request ended at one of the stop tokens or strings. */
static bool ended_at_stop(const stream *s, size_t i, const int32_t *stops, size_t nstop)
{
    const pfx_request *q = &s->req[i];
    for (size_t k = 0; q->out_len && k < nstop; k++)
        if (q->out[q->out_len - 1] == stops[k])
            return true;
    return s->stopped[i];
}

int cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *device = NULL, *texts[MAX_PROMPTS], *files[MAX_PROMPTS],
               *idtexts[MAX_PROMPTS], *stop_id_texts[MAX_STOPS];
    const char *stop_strings[MAX_STOPS];
    uint64_t max_new = 32, top_k = 0, seed = 0, stop_ids[MAX_STOPS];
    float temperature = 0.0f, top_p = 0.0f;
    bool json = false;
    int storage = PFX_DTYPE_F32, kv_dtype = PFX_DTYPE_F32;
    serve_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    static const char more[] = "more prompts: one a line of a --prompts file";
    cli_list adapter_list = { ctx.adapter, NULL, SERVE_MAX_ADAPTERS, 0, NULL },
             text_list = { texts, NULL, MAX_PROMPTS, 0, more },
             file_list = { files, NULL, MAX_PROMPTS, 0, more },
             id_list = { idtexts, NULL, MAX_PROMPTS, 0, more },
             stop_list = { stop_strings, NULL, MAX_STOPS, 0, NULL },
             stop_id_list = { stop_id_texts, stop_ids, MAX_STOPS, 0, NULL };
    const cli_option opts[] = {
        { "--model", CLI_TEXT, &model, 0, 0, NULL, NULL, "DIR",
          "a Hugging Face folder (config.json, safetensors, tokenizer)", NULL },
        { "--adapter", CLI_TEXTS, &adapter_list, 0, 0, NULL, NULL, "PATH",
          "a PEFT prefix-tuning folder, a prefixcl prefixes file, or the gains of `prefixcl "
          "pretrain` (OUT/gains.safetensors or OUT) (repeatable; gains and prefixes not together); "
          "every prompt runs with every adapter, in batches of up to 8",
          NULL },
        { "--prompt", CLI_TEXTS, &text_list, 0, 0, NULL, NULL, "TEXT",
          "a prompt (needs the folder's tokenizer)", NULL },
        { "--prompts", CLI_TEXTS, &file_list, 0, 0, NULL, NULL, "FILE",
          "one prompt a line (a regular file; empty lines skipped), any number of lines: the file "
          "is read whole, then its prompts (each with every adapter) run in order, up to 8 "
          "requests at a time",
          NULL },
        { "--prompt-ids", CLI_TEXTS, &id_list, 0, 0, NULL, NULL, "IDS",
          "a prompt as token ids (\"5 17 3\"), for folders without tokenizer", NULL },
        { "--max-new-tokens", CLI_U64, &max_new, 1, 1 << 20, NULL, NULL, "N",
          "new tokens a request", "32" },
        { "--temperature", CLI_FLOAT, &temperature, 0, HUGE_VAL, NULL, NULL, "T",
          "sampling temperature", "0: greedy" },
        { "--top-k", CLI_U64, &top_k, 0, 1 << 30, NULL, NULL, "K",
          "sample among the K likeliest tokens", "0: all" },
        { "--top-p", CLI_FLOAT, &top_p, 0, 1, NULL, NULL, "P",
          "sample among the likeliest tokens of mass P", "0: all" },
        { "--seed", CLI_U64, &seed, 0, 1.9e19, NULL, NULL, "S", "request i samples with seed S + i",
          "0" },
        { "--stop", CLI_TEXTS, &stop_list, 0, 0, NULL, NULL, "TEXT",
          "a string that ends the text, cut before it, as the server's \"stop\" and llama.cpp's "
          "(transformers' stop_strings keeps it) (repeatable; needs the folder's tokenizer)",
          NULL },
        { "--stop-id", CLI_U64S, &stop_id_list, 0, INT32_MAX, NULL, NULL, "ID",
          "a stop token id, kept in the output (repeatable)",
          "config.json's eos_token_id and the tokenizer's EOS" },
        { "--storage", CLI_CHOICE, &storage, 0, 0, tool_storages, NULL, "T",
          "the weights on the device", "f32" },
        { "--kv-dtype", CLI_CHOICE, &kv_dtype, 0, 0, tool_kv_dtypes, NULL, "T",
          "the KV cache's storage: f16 and bf16 hold half the bytes (llama.cpp's cache is f16), "
          "rounded to nearest even",
          "f32" },
        { "--device", CLI_TEXT, &device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
        { "--json", CLI_FLAG, &json, 0, 0, NULL, NULL, NULL,
          "one JSON object a line per request (prompt, prompt_ids, adapter, ids, text, "
          "stop_reason, tokens_per_s)",
          "the text of a single request as it comes, or a block per request" },
    };
    const int parsed =
        cli_parse("generate", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    ctx.adapters = adapter_list.count;
    ctx.storage = (pfx_dtype)storage; /* tool_storages is in pfx_dtype order */
    const size_t ntexts = text_list.count, nfiles = file_list.count, nids = id_list.count;
    size_t nstop = stop_id_list.count;
    int32_t stops[MAX_STOPS];
    for (size_t i = 0; i < nstop; i++)
        stops[i] = (int32_t)stop_ids[i];
    if (!model || ntexts + nfiles + nids == 0) {
        fprintf(stderr, "prefixcl generate: --model and a prompt are required\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }

    /* SIGINT or SIGTERM: stop after the round of requests under way */
    cli_stop_catch();

    /* prompts: read the files first (their lines are prompts, any number, any length) */
    text_line *lines = NULL;
    size_t nlines = 0, lines_cap = 0;
    bool read_ok = true;
    for (size_t f = 0; f < nfiles && read_ok; f++)
        read_ok = read_prompt_lines(files[f], &lines, &nlines, &lines_cap);
    size_t nprompts = ntexts + nlines + nids, adapters = ctx.adapters ? ctx.adapters : 1;
    size_t total = nprompts * adapters, batch = total < 8 ? total : 8;
    prompt *ps = read_ok ? calloc(nprompts ? nprompts : 1, sizeof(*ps)) : NULL;
    if (read_ok && !ps)
        fprintf(stderr, "prefixcl generate: out of host memory for %zu prompts\n", nprompts);
    int status = 1;
    if (!ps)
        goto out;
    if (nprompts == 0) {
        fprintf(stderr,
                "prefixcl generate: no prompt (the --prompts files hold only empty lines)\n");
        goto out;
    }
    if (!serve_open(&ctx, "generate", device, model, 256) ||
        !serve_context(&ctx, "generate", batch))
        goto out;
    size_t k = 0, longest = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < ntexts; i++, k++) {
        ps[k].from = "--prompt";
        ok = add_text_prompt(&ctx, texts[i], &ps[k]);
    }
    for (size_t i = 0; ok && i < nlines; i++, k++) {
        ps[k].from = lines[i].file;
        ps[k].line = lines[i].line;
        ok = add_text_prompt(&ctx, lines[i].text, &ps[k]);
    }
    for (size_t i = 0; ok && i < nids; i++, k++) {
        ps[k].from = "--prompt-ids";
        if (!(ok = cli_ids(idtexts[i], ctx.shape.vocab, &ps[k].ids, &ps[k].len)))
            fprintf(
                stderr,
                "prefixcl generate: --prompt-ids \"%s\": ids in [0, %zu) expected, separated by "
                "spaces or single commas\n",
                idtexts[i], ctx.shape.vocab);
    }
    for (size_t i = 0; ok && i < nprompts; i++) {
        longest = ps[i].len > longest ? ps[i].len : longest;
        if (ps[i].len > ctx.tokens) {
            if (ps[i].line)
                fprintf(stderr, "prefixcl generate: %s:%zu: ", ps[i].from, ps[i].line);
            else
                fprintf(stderr, "prefixcl generate: %s: ", ps[i].from);
            fprintf(
                stderr,
                "a prompt of %zu tokens: at most %zu fit (the model's positions less the adapter's "
                "prefix): shorten it\n",
                ps[i].len, ctx.tokens);
            ok = false;
        }
    }
    if (!ok)
        goto out;
    if (stop_list.count && !ctx.tok) {
        fprintf(stderr, "prefixcl generate: --stop needs the folder's tokenizer to read the text; "
                        "--stop-id takes token ids\n");
        goto out;
    }
    if (!nstop)
        nstop = serve_default_stops(&ctx, stops, MAX_STOPS);
    size_t P = pfx_adapter_bank_prefix_len(ctx.bank), max_len = longest + max_new;
    if (max_len + P > ctx.shape.max_positions) {
        const size_t room = ctx.shape.max_positions - P - longest;
        fprintf(stderr,
                "prefixcl generate: %zu prompt + %zu new tokens (+ prefix %zu) exceed the model's "
                "%zu positions: ",
                longest, (size_t)max_new, P, ctx.shape.max_positions);
        if (room)
            fprintf(stderr, "lower --max-new-tokens to %zu or shorten the prompt\n", room);
        else
            fprintf(stderr, "shorten the prompt\n");
        goto out;
    }
    pfx_kv_cache *cache = NULL;
    if (pfx_kv_cache_create_dtype(ctx.model, batch, max_len, (pfx_dtype)kv_dtype, &cache) !=
        PFX_SUCCESS) { /* tool_kv_dtypes is in pfx_dtype order */
        fprintf(stderr, "prefixcl generate: %s\n", pfx_last_error(ctx.rt));
        goto out;
    }
    pfx_sampling s = { .temperature = temperature,
                       .top_k = top_k,
                       .top_p = top_p,
                       .max_new_tokens = max_new,
                       .stop = stops,
                       .stop_count = nstop };
    pfx_generate_stats all = { 0 };
    status = 0;
    size_t r0 = 0;
    for (; r0 < total && !status && !cli_stop; r0 += batch) {
        size_t n = total - r0 < batch ? total - r0 : batch;
        pfx_request req[8];
        int32_t *outs = calloc(n * max_new, sizeof(int32_t));
        if (!outs) {
            status = 1;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            size_t r = r0 + i, p = r / adapters, a = r % adapters;
            req[i] = (pfx_request){ ps[p].ids, ps[p].len,          ctx.adapters ? (int32_t)a : -1,
                                    seed + r,  outs + i * max_new, 0,
                                    false };
        }
        stream st = { .ctx = &ctx,
                      .req = req,
                      .live = total == 1 && !json,
                      .stops = stop_strings,
                      .stop_count = stop_list.count,
                      .hold = stop_text_hold(stop_strings, stop_list.count) };
        const double t0 = tool_now_s();
        pfx_generate_stats gs;
        if (pfx_generate(ctx.work, cache, ctx.bank, req, n, &s, on_token, &st, &gs) !=
            PFX_SUCCESS) {
            fprintf(stderr, "prefixcl generate: %s\n", pfx_last_error(ctx.rt));
            status = 1;
        }
        for (size_t i = 0; i < n && !status; i++) {
            size_t r = r0 + i;
            bool cut = false;
            char *text = render_cut(&st, &req[i], &cut);
            if (total == 1 && !json) {
                printf("%s\n", text && strlen(text) > st.printed ? text + st.printed : "");
                free(text);
                continue;
            }
            const prompt *p = &ps[r / adapters];
            const double t = i < 8 && st.last[i] > t0 ? st.last[i] - t0 : 0.0;
            const gen_output g = { r / adapters,
                                   p->text,
                                   p->ids,
                                   p->len,
                                   ctx.adapters ? ctx.adapter[r % adapters] : NULL,
                                   req[i].out,
                                   req[i].out_len,
                                   ctx.tok ? text : NULL,
                                   ended_at_stop(&st, i, stops, nstop),
                                   t > 0 ? (double)req[i].out_len / t : 0.0 };
            if (json && !gen_print_json(stdout, &g)) {
                fprintf(stderr, "prefixcl generate: out of host memory\n");
                status = 1;
            } else if (!json) {
                gen_print_block(stdout, &g, r == 0);
            }
            free(text);
        }
        all.prefill_tokens += gs.prefill_tokens;
        all.prefill_seconds += gs.prefill_seconds;
        all.decode_tokens += gs.decode_tokens;
        all.decode_seconds += gs.decode_seconds;
        all.build_seconds += gs.build_seconds;
        free(outs);
    }
    if (!status && r0 < total) {
        fprintf(stderr, "prefixcl generate: stopped by signal %d after %zu of %zu requests\n",
                (int)cli_stop, r0, total);
        status = cli_stop_status();
    }
    if (!status && all.build_seconds >= 0.05) /* a phase of its own, not in the rates */
        fprintf(stderr, "kernels: %.1f s building them on first use (cached for the next runs)\n",
                all.build_seconds);
    if (!status)
        fprintf(stderr,
                "prefill: %zu tokens, %.1f tokens/s; decode: %zu tokens, %.1f tokens/s (%s)\n",
                all.prefill_tokens,
                all.prefill_seconds > 0 ? all.prefill_tokens / all.prefill_seconds : 0.0,
                all.decode_tokens,
                all.decode_seconds > 0 ? all.decode_tokens / all.decode_seconds : 0.0,
                pfx_runtime_device(ctx.rt)->device_name);
    pfx_kv_cache_destroy(&cache);
out:
    for (size_t i = 0; ps && i < nprompts; i++)
        free(ps[i].ids);
    free(ps);
    for (size_t i = 0; i < nlines; i++)
        free(lines[i].text);
    free(lines);
    serve_close(&ctx);
    cli_stop_release();
    return status;
}
