/* The in-memory form of a parsed safetensors file, shared by the reader
 * (safetensors_read.c) and the device upload (safetensors_upload.c). Not
 * installed. */
#ifndef PFX_SAFETENSORS_INTERNAL_H
#define PFX_SAFETENSORS_INTERNAL_H

#include "io_internal.h"

typedef struct st_entry {
    char *name;
    pfx_st_dtype dtype;
    unsigned ndim;
    size_t shape[PFX_ST_MAX_DIMS];
    size_t numel;
    size_t begin, end; /* relative to the data section */
} st_entry;

struct pfx_safetensors {
    unsigned char *buf; /* the whole file */
    size_t size;
    const unsigned char *data; /* the data section */
    size_t data_size;
    st_entry *entries;
    size_t count;
    char **meta_keys;
    char **meta_values;
    size_t meta_count;
};

/* Names in messages: at most 200 bytes. */
#define NAME_FMT "'%.200s'"

static inline bool pfx_st_is_float(pfx_st_dtype d)
{
    return d == PFX_ST_F32 || d == PFX_ST_F16 || d == PFX_ST_BF16 || d == PFX_ST_F64;
}

#endif
