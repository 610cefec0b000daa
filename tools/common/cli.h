/* What every prefixcl command shares: one strict parser for each kind of
 * option value (integers, numbers, id lists), the check of its outputs before
 * any work, the stop on SIGINT or SIGTERM, and the final check of standard
 * output. */
#ifndef PFX_TOOLS_CLI_H
#define PFX_TOOLS_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "prefixcl/pretrain.h"

/* An option value in [lo, hi]: decimal digits only (pfx_parse_uint), so
 * " 5", "+5", "-5" and "5x" are refused. */
bool cli_uint(const char *text, uint64_t lo, uint64_t hi, uint64_t *out);

/* A finite number in [lo, hi], the whole text (strtod's syntax), so "",
 * " 5", "5x", "nan" and "inf" are refused. */
bool cli_float(const char *text, double lo, double hi, float *out);

/* Token ids in [0, vocab): each by cli_uint, separated by one comma (spaces
 * around it allowed) or by spaces; "1,,2", ",1", "1," and "" are refused.
 * A malloc'ed array in *ids. */
bool cli_ids(const char *text, size_t vocab, int32_t **ids, size_t *count);

/* The gains' start (pfx_pretrain_config.gain_init): "zero" (0) or
 * "uniform:A" with A a number in (0, 10] (uniform in [-A, A]). False with
 * why (cap bytes). */
bool cli_gain_init(const char *text, float *range, char *why, size_t cap);

/* Attention heads "L.H" (layer, head; each by cli_uint, from 0) separated by
 * one comma (spaces around it allowed), in the order given: a malloc'ed list
 * of *count. The model, which knows its layers and heads, checks them (the
 * jobs: pfx_pretrain_config.gain_heads). False with why (cap bytes) naming
 * the first bad item. */
bool cli_heads(const char *text, pfx_layer_head **list, size_t *count, char *why, size_t cap);

/* One option of a command's table (cli_parse). */
typedef enum cli_kind {
    CLI_FLAG = 0, /* no value: *(bool *)target = true */
    CLI_SIZE,     /* size_t in [lo, hi] (cli_uint) */
    CLI_U64,      /* uint64_t in [lo, hi] */
    CLI_FLOAT,    /* float in [lo, hi] (cli_float) */
    CLI_TEXT,     /* const char *, not empty */
    CLI_CHOICE,   /* int: the index of the value in choices (NULL-terminated) */
    CLI_TEXTS,    /* repeatable: each value (not empty) appended to the cli_list target */
    CLI_U64S,     /* repeatable: each integer in [lo, hi] appended to the cli_list target */
} cli_kind;

/* The values of a repeatable option in the order given, in the caller's
 * arrays of max entries; one more is refused with "at most MAX NAME options"
 * and, when full is set, "(full)". */
typedef struct cli_list {
    const char **text; /* each value as given */
    uint64_t *number;  /* CLI_U64S: each value's integer (NULL for CLI_TEXTS) */
    size_t max, count;
    const char *full; /* how to give more, e.g. "more prompts: one a line of a --prompts file" */
} cli_list;

typedef struct cli_option {
    const char *name; /* "--steps" */
    cli_kind kind;
    void *target;
    double lo, hi;              /* CLI_SIZE, CLI_U64, CLI_FLOAT, CLI_U64S */
    const char *const *choices; /* CLI_CHOICE */
    const char *value;          /* what the value is, for "NAME needs ..." (NULL: "a value") */
    /* The option's line of the help (cli_help): the value's placeholder
     * ("DIR", "N"; NULL for a CLI_FLAG), what the option does in one
     * sentence (wrapped to the terminal's 80 columns), and the default
     * (NULL: none), shown after it as "(default 8)", or "(default: the
     * model's)" when it is words that do not start with a digit. cli_parse
     * refuses a table with an entry that lacks its help or a value's
     * placeholder, or a flag with one. */
    const char *meta, *help, *def;
} cli_option;

/* The hand-written parts of a command's help around its option lines:
 * usage, the synopsis after "usage: " (lines separated by '\n', each further
 * one indented by the width of "usage: "); intro and outro (NULL: none), free text
 * printed as it is before and after the option lines. */
typedef struct cli_doc {
    const char *usage, *intro, *outro;
} cli_doc;

/* Prints the help: "usage: " and the synopsis, the intro, one line per
 * option of the table (its name and placeholder, then its help aligned in
 * one column, wrapped under itself), the outro. Returns the exit status of
 * a help asked for (0 on stdout) or shown after a refusal (2 on stderr). */
int cli_help(FILE *out, const cli_doc *doc, const cli_option *opts, size_t n);

/* pfx_gain_mode's values by name, in its order (a CLI_CHOICE's index is the
 * mode): "off", "linear", "tanh". */
extern const char *const cli_gain_modes[];

/* The most options one table may hold. */
#define CLI_MAX_OPTIONS 64

/* Parses argv[1 .. argc) against the table: every argument an option of it
 * (with its value where it takes one), each value checked by its kind's
 * strict parser, each option once unless repeatable. Returns 0 (parsed), 1
 * (-h or --help: cli_help printed the help on stdout; exit 0) or 2 (after
 * "prefixcl CMD: why" and the help on stderr; exit 2). given (may be NULL)
 * gets, per option, whether it appeared. */
int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts, size_t n, bool *given,
              const cli_doc *doc);

/* A table entry's literal default from a macro: CLI_STR(DEF_STEPS) is "400". */
#define CLI_STR_(x) #x
#define CLI_STR(x)  CLI_STR_(x)

/* A command with two ways chosen by one option (attn-map --model): whether
 * argv[1 .. argc) holds it, before the way's own table parses them. */
bool cli_has(int argc, char **argv, const char *name);

/* A progress bar of `width` characters (at most CLI_BAR_MAX): '#' for the
 * done fraction (clamped to [0, 1]), '-' for the rest; returns buf. */
#define CLI_BAR_MAX 64
const char *cli_bar(char buf[CLI_BAR_MAX + 1], double fraction, int width);

/* An output file of command `cmd`, checked before any work: named, not a
 * folder, writable if it exists, and a new file can be made beside it (one
 * is opened and discarded: pfx_output_open). False after "prefixcl CMD:
 * OPTION PATH: why" on stderr. */
bool cli_check_output(const char *cmd, const char *option, const char *path);

/* An output folder: made when absent (its parent must exist), refused when
 * something else has its name, and each of names[0 .. n) inside it checked
 * as by cli_check_output (a name ending in '/' is a folder inside: made,
 * then checked as one). False after saying why. */
bool cli_check_output_dir(const char *cmd, const char *option, const char *dir,
                          const char *const *names, size_t n);

/* A stop asked by SIGINT (Ctrl-C) or SIGTERM (what kill, systemd and Slurm
 * send): between cli_stop_catch and cli_stop_release both only set cli_stop
 * to the signal's number, which a long command polls at its step
 * boundaries to stop cleanly there (tune saves its checkpoint; train,
 * generate and bench keep what is done; eval prints no partial loss). */
extern volatile sig_atomic_t cli_stop;
void cli_stop_catch(void);
void cli_stop_release(void);
/* The exit status of a run stopped so: 128 + the signal (130 for SIGINT, 143
 * for SIGTERM; 130 when the stop came from elsewhere, e.g. another rank). */
int cli_stop_status(void);

/* A job's error message (pfx_last_error) in the command's words: each
 * "config.FIELD" that an option sets, map[i][0] = "FIELD" and map[i][1] its
 * option ("--max-length"), replaced by the option, so that the message
 * names what the user typed. Prints "prefixcl CMD: STATUS (MESSAGE)". */
typedef struct cli_field_option {
    const char *field, *option;
} cli_field_option;
void cli_job_error(const char *cmd, pfx_status st, const char *msg, const cli_field_option *map,
                   size_t n);

/* Flushes and closes stdout; a failed write or close (a full disk, a closed
 * pipe, /dev/full) is reported on stderr and turns a 0 exit status into 1.
 * Returns the exit status to use. */
int cli_finish_stdout(int status);

#endif
