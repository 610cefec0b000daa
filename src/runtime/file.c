/* Reading files that must be regular: opening a FIFO for reading blocks until
 * a writer comes, so the file is opened non-blocking and checked first. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

FILE *pfx_fopen_regular(const char *path, bool *not_regular)
{
    *not_regular = false;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *not_regular = true;
        close(fd);
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *fp = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!fp)
        close(fd);
    return fp;
}
