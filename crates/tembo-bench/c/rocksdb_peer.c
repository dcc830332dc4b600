/*
 * RocksDB peer of `tembo bench` (rocksdb/c.h, -lrocksdb). See peer.h for the contract.
 *
 * Configuration, and why:
 * - RocksDB's default Options, plus create_if_missing. We tune nothing
 *   else (compression, block cache, background jobs), so this peer is
 *   RocksDB as shipped.
 * - Durable mode: WriteOptions.sync = 1. Each put/delete is one write
 *   whose WAL record is fsynced before it returns. RocksDB documents this
 *   as the setting that survives a machine crash.
 * - Volatile mode: WriteOptions.disableWAL = 1. Writes go only to the
 *   memtable. Data that is not yet flushed is lost in a crash, but never
 *   half-applied. On close RocksDB flushes the memtables anyway
 *   (avoid_flush_during_shutdown defaults to false), so a clean close
 *   keeps everything.
 * - get uses rocksdb_get(), which returns a malloc'd copy. We copy it into
 *   the caller's buffer and free it with rocksdb_free().
 * - del must report whether the key existed, and a RocksDB delete does not
 *   say. So del first does a point lookup (rocksdb_get_pinned, no copy).
 *   If the key is absent it returns 0 without writing anything. If present
 *   it issues the delete with the mode's WriteOptions. The lookup is part
 *   of this peer's delete cost.
 * - scan: a fresh iterator per call, Seek(k) then Next(). Each value is
 *   copied into a scratch buffer so the value is really read.
 *
 * A handle is not thread-safe: use one thread at a time.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

#include "peer.h"

struct rocksdb_peer_handle {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_writeoptions_t *wopts;
    rocksdb_readoptions_t *ropts;
    uint8_t *scratch;
    size_t scratch_cap;
    char err[512];
};

static void set_err(rocksdb_peer_handle *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_err(rocksdb_peer_handle *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof h->err, fmt, ap);
    va_end(ap);
}

/* If RocksDB reported an error in `e`, record it, free it, and return 1. */
static int take_err(rocksdb_peer_handle *h, const char *what, char *e) {
    if (e == NULL)
        return 0;
    set_err(h, "rocksdb: %s: %s", what, e);
    rocksdb_free(e);
    return 1;
}

static void free_handle(rocksdb_peer_handle *h) {
    if (h->db != NULL)
        rocksdb_close(h->db);
    if (h->wopts != NULL)
        rocksdb_writeoptions_destroy(h->wopts);
    if (h->ropts != NULL)
        rocksdb_readoptions_destroy(h->ropts);
    if (h->opts != NULL)
        rocksdb_options_destroy(h->opts);
    free(h->scratch);
    free(h);
}

rocksdb_peer_handle *rocksdb_peer_open(const char *dir, int durable, uint64_t size_hint,
                                       char *err, size_t errlen) {
    (void)size_hint; /* RocksDB needs no size up front */
    rocksdb_peer_handle *h = calloc(1, sizeof *h);
    if (h == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "rocksdb: out of memory");
        return NULL;
    }
    h->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(h->opts, 1);
    h->wopts = rocksdb_writeoptions_create();
    if (durable)
        rocksdb_writeoptions_set_sync(h->wopts, 1);
    else
        rocksdb_writeoptions_disable_WAL(h->wopts, 1);
    h->ropts = rocksdb_readoptions_create();

    char *e = NULL;
    h->db = rocksdb_open(h->opts, dir, &e);
    if (e != NULL || h->db == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "rocksdb: open %s: %s", dir, e ? e : "failed");
        rocksdb_free(e);
        h->db = NULL;
        free_handle(h);
        return NULL;
    }
    return h;
}

int rocksdb_peer_put(rocksdb_peer_handle *h, const uint8_t *k, size_t kl,
                     const uint8_t *v, size_t vl) {
    char *e = NULL;
    rocksdb_put(h->db, h->wopts, (const char *)k, kl, (const char *)v, vl, &e);
    return take_err(h, "put", e) ? -1 : 0;
}

int rocksdb_peer_get(rocksdb_peer_handle *h, const uint8_t *k, size_t kl, uint8_t *buf,
                     size_t cap, size_t *len) {
    char *e = NULL;
    size_t vl = 0;
    char *v = rocksdb_get(h->db, h->ropts, (const char *)k, kl, &vl, &e);
    if (take_err(h, "get", e)) {
        rocksdb_free(v);
        return -1;
    }
    if (v == NULL)
        return 0;
    *len = vl;
    size_t ncopy = vl < cap ? vl : cap;
    if (ncopy > 0) /* buf may be NULL when cap is 0 */
        memcpy(buf, v, ncopy);
    rocksdb_free(v);
    return 1;
}

int rocksdb_peer_del(rocksdb_peer_handle *h, const uint8_t *k, size_t kl) {
    char *e = NULL;
    rocksdb_pinnableslice_t *ps = rocksdb_get_pinned(h->db, h->ropts, (const char *)k, kl, &e);
    if (take_err(h, "get (before delete)", e)) {
        if (ps != NULL)
            rocksdb_pinnableslice_destroy(ps);
        return -1;
    }
    if (ps == NULL)
        return 0;
    rocksdb_pinnableslice_destroy(ps);
    rocksdb_delete(h->db, h->wopts, (const char *)k, kl, &e);
    return take_err(h, "delete", e) ? -1 : 1;
}

int rocksdb_peer_scan(rocksdb_peer_handle *h, const uint8_t *k, size_t kl, size_t n,
                      size_t *visited, uint64_t *bytes) {
    *visited = 0;
    *bytes = 0;
    if (n == 0)
        return 0;
    rocksdb_iterator_t *it = rocksdb_create_iterator(h->db, h->ropts);
    size_t cnt = 0;
    uint64_t sum = 0;
    int ret = 0;
    rocksdb_iter_seek(it, (const char *)k, kl);
    while (cnt < n && rocksdb_iter_valid(it)) {
        size_t vl = 0;
        const char *v = rocksdb_iter_value(it, &vl);
        if (peer_grow(&h->scratch, &h->scratch_cap, vl) != 0) {
            set_err(h, "rocksdb: out of memory for a %zu-byte value", vl);
            ret = -1;
            break;
        }
        memcpy(h->scratch, v, vl);
        cnt++;
        sum += vl;
        if (cnt < n) /* no needless step past the last entry visited */
            rocksdb_iter_next(it);
    }
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    if (take_err(h, "iterator", e))
        ret = -1;
    rocksdb_iter_destroy(it);
    *visited = cnt;
    *bytes = sum;
    return ret;
}

const char *rocksdb_peer_error(rocksdb_peer_handle *h) { return h->err; }

void rocksdb_peer_close(rocksdb_peer_handle *h) {
    if (h != NULL)
        free_handle(h);
}
