/*
 * The one C interface every embedded peer of `tembo bench` implements, so
 * that the Rust side has a single foreign binding (targets/ffi.rs) however
 * many C libraries are measured. Each peer file defines the functions below
 * with its own prefix (lmdb_peer_, rocksdb_peer_, bdb_peer_, pmemobj_peer_),
 * through the PEER_DECLARE macro.
 *
 * Conventions, identical for all peers:
 * - open: `dir` is an existing directory the peer owns: empty, or holding
 *   what an earlier handle of the same peer left there (a reopen continues
 *   with that data). `durable` != 0 asks for the peer's durable mode (every
 *   put/delete is its own committed, synced transaction, or the documented
 *   equivalent), 0 for its volatile mode. `size_hint` is the expected data
 *   size in bytes (for peers that must size a map or pool up front).
 *   Returns NULL on failure with a message in `err` (NUL-terminated, at
 *   most `errlen` bytes).
 * - put: insert or overwrite. 0 = ok, -1 = error (message via peer_error).
 * - get: copies the value into `buf` (capacity `cap`) and stores its length
 *   in `*len` (if the value is longer than `cap`, only `cap` bytes are
 *   copied but `*len` is the full length). 1 = found, 0 = absent, -1 = error.
 * - del: 1 = deleted, 0 = absent, -1 = error.
 * - scan: visits up to `n` entries in key order starting at the first key
 *   >= `k`, reading each value (every peer copies it once into a scratch
 *   buffer); stores the count visited in `*visited` and the sum of their
 *   value lengths in `*bytes`. 0 = ok, -1 = error.
 * - error: the last error message of this handle ("" when none).
 * - close: flushes what the mode requires and frees everything.
 */
#ifndef TEMBO_PEER_H
#define TEMBO_PEER_H

#include <stddef.h>
#include <stdint.h>

#define PEER_DECLARE(p)                                                              \
    typedef struct p##handle p##handle;                                              \
    p##handle *p##open(const char *dir, int durable, uint64_t size_hint, char *err, \
                       size_t errlen);                                               \
    int p##put(p##handle *h, const uint8_t *k, size_t kl, const uint8_t *v,          \
               size_t vl);                                                           \
    int p##get(p##handle *h, const uint8_t *k, size_t kl, uint8_t *buf, size_t cap,  \
               size_t *len);                                                         \
    int p##del(p##handle *h, const uint8_t *k, size_t kl);                           \
    int p##scan(p##handle *h, const uint8_t *k, size_t kl, size_t n,                 \
                size_t *visited, uint64_t *bytes);                                   \
    const char *p##error(p##handle *h);                                              \
    void p##close(p##handle *h);

PEER_DECLARE(lmdb_peer_)
PEER_DECLARE(rocksdb_peer_)
PEER_DECLARE(bdb_peer_)
PEER_DECLARE(pmemobj_peer_)

/* Grows the scratch buffer `*buf` (capacity `*cap`) to at least `need`
 * bytes, doubling from 4 KiB; 0 on success, -1 when out of memory. Shared
 * by the peers whose scans copy values through a scratch buffer. */
int peer_grow(uint8_t **buf, size_t *cap, size_t need);

/* pmemobj only: where its pool is mapped (for the write heat map). */
int pmemobj_peer_range(pmemobj_peer_handle *h, void **base, size_t *len);

#endif
