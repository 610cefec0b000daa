/* The demonstration model's folder (tune_job.h): what `prefixcl tune` with no
 * --model trains against, written so that generate, eval and attn-map open
 * it afterwards. */
#include <stdio.h>
#include <stdlib.h>

#include "tune_job.h"

/* dir/name, malloc'ed. */
static char *path_in(const char *dir, const char *name)
{
    size_t n = snprintf(NULL, 0, "%s/%s", dir, name) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* src's bytes to dst, atomically. */
static int copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    pfx_output_file *out = NULL;
    pfx_status st = in ? pfx_output_open(dst, &out) : PFX_ERROR_IO;
    if (!in) {
        fprintf(stderr, "prefixcl tune: cannot read %s\n", src);
        return 1;
    }
    char buf[1 << 16];
    size_t got;
    while (st == PFX_SUCCESS && (got = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, got, pfx_output_stream(out)) != got)
            st = PFX_ERROR_IO;
    if (st == PFX_SUCCESS && ferror(in)) {
        fprintf(stderr, "prefixcl tune: reading %s failed\n", src);
        pfx_output_discard(&out);
        fclose(in);
        return 1;
    }
    fclose(in);
    if (st == PFX_SUCCESS)
        st = pfx_output_commit(&out);
    else
        pfx_output_discard(&out);
    if (st != PFX_SUCCESS)
        fprintf(stderr, "prefixcl tune: writing %s: %s\n", dst, pfx_last_error(NULL));
    return st != PFX_SUCCESS;
}

int tune_demo_write_model(const tune_job *j, const char *dir)
{
    char *tok_dst = path_in(dir, "tokenizer.json"), *tok_src = path_in(j->cfg->demo_dir, "tokenizer.json");
    int rc = 1;
    if (!tok_dst || !tok_src) {
        fprintf(stderr, "prefixcl tune: out of host memory\n");
    } else if (pfx_model_save(j->model, dir, NULL) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tune: writing the model to %s: %s\n", dir, pfx_last_error(j->rt));
    } else {
        rc = copy_file(tok_src, tok_dst);
    }
    free(tok_dst);
    free(tok_src);
    return rc;
}
