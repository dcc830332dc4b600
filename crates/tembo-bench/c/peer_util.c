/* Helpers the C peers share (see peer.h). */
#include <stdlib.h>

#include "peer.h"

int peer_grow(uint8_t **buf, size_t *cap, size_t need) {
    if (*buf != NULL && need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need)
        ncap *= 2;
    uint8_t *nb = realloc(*buf, ncap);
    if (nb == NULL)
        return -1;
    *buf = nb;
    *cap = ncap;
    return 0;
}
