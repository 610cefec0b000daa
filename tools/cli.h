/* What every prefixcl command shares: one strict integer parser for options
 * and the final check of standard output. */
#ifndef PFX_TOOLS_CLI_H
#define PFX_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>

/* An option value in [lo, hi]: decimal digits only (pfx_parse_uint), so
 * " 5", "+5", "-5" and "5x" are refused. */
bool cli_uint(const char *text, uint64_t lo, uint64_t hi, uint64_t *out);

/* Flushes and closes stdout; a failed write or close (a full disk, a closed
 * pipe, /dev/full) is reported on stderr and turns a 0 exit status into 1.
 * Returns the exit status to use. */
int cli_finish_stdout(int status);

#endif
