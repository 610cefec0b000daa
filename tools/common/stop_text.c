/* Stop strings (stop_text.h). */
#include "stop_text.h"

#include <string.h>

bool stop_text_cut(const char *text, size_t *len, const char *const *stops, size_t n)
{
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        const char *at = strstr(text, stops[i]);
        if (at && (size_t)(at - text) < *len) {
            *len = (size_t)(at - text);
            found = true;
        }
    }
    return found;
}

size_t stop_text_hold(const char *const *stops, size_t n)
{
    size_t hold = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t len = strlen(stops[i]);
        hold = len - 1 > hold ? len - 1 : hold;
    }
    return hold;
}

size_t stop_text_sendable(const char *text, size_t len, size_t hold)
{
    size_t n = len > hold ? len - hold : 0;
    while (n == len && n >= 3 && !memcmp(text + n - 3, "\xEF\xBF\xBD", 3))
        n -= 3;
    while (n > 0 && n < len && ((unsigned char)text[n] & 0xC0) == 0x80)
        n--;
    return n;
}
