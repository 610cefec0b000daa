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

/* An output file of command `cmd`, checked before any work: named, not a
 * folder, writable if it exists, and a new file can be made beside it (one
 * is opened and discarded: pfx_output_open). False after "prefixcl CMD:
 * OPTION PATH: why" on stderr. */
bool cli_check_output(const char *cmd, const char *option, const char *path);

/* An output folder: made when absent (its parent must exist), refused when
 * something else has its name, and each of names[0 .. n) inside it checked
 * as by cli_check_output (a name ending in '/' is a folder inside: made,
 * then checked as one). False after saying why. */
bool cli_check_output_dir(const char *cmd, const char *option, const char *dir, const char *const *names,
                          size_t n);

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

/* Flushes and closes stdout; a failed write or close (a full disk, a closed
 * pipe, /dev/full) is reported on stderr and turns a 0 exit status into 1.
 * Returns the exit status to use. */
int cli_finish_stdout(int status);

#endif
