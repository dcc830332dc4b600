/*
 * LMDB peer of `tembo bench` (lmdb.h, -llmdb). See peer.h for the contract.
 *
 * Configuration, and why:
 * - Durable mode: LMDB's defaults. Every put/del is its own write
 *   transaction and mdb_txn_commit() syncs it (fdatasync of the data file
 *   and the meta page) before returning. This is LMDB's fully durable mode.
 * - Volatile mode: MDB_NOSYNC | MDB_NOMETASYNC, still one write transaction
 *   per put/del. lmdb.h documents this as keeping ACI (atomicity,
 *   consistency, isolation) and losing only D, provided MDB_WRITEMAP is not
 *   used.
 * - No MDB_WRITEMAP. lmdb.h says it "may be slightly faster for DBs that
 *   fit entirely in RAM, but is slower for DBs larger than RAM", that it
 *   "loses protection from application bugs like wild pointer writes", and
 *   that (MDB_NOSYNC | MDB_WRITEMAP) no longer keeps the ACI guarantee
 *   above. So it is not the documented fast choice in general. We keep
 *   LMDB's default read-only map and write pages with pwrite().
 * - The map size is max(4 * size_hint, 1 GiB). It only reserves address
 *   space (without MDB_WRITEMAP the file grows only as pages are written).
 *   If a put still returns MDB_MAP_FULL, we double the map and retry. This
 *   is LMDB's documented way to grow (mdb_env_set_mapsize with no
 *   transaction active).
 * - MDB_NOTLS: the handle keeps one read-only transaction and calls
 *   mdb_txn_reset() / mdb_txn_renew() on it for every get and scan. LMDB
 *   documents this as the cheap way to run many short reads. With
 *   MDB_NOTLS the reader slot belongs to the txn object, not the thread, so
 *   the caller may use the handle from any one thread at a time.
 * - Empty keys: LMDB rejects zero-length keys (MDB_BAD_VALSIZE), and put
 *   reports that error. A scan from the empty key starts at MDB_FIRST.
 *
 * A handle is not thread-safe: use one thread at a time.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lmdb.h>

#include "peer.h"

#define GIB (1024ull * 1024 * 1024)

struct lmdb_peer_handle {
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *rtxn; /* reusable read-only txn, kept reset between reads */
    int durable;
    uint8_t *scratch; /* scan copies each value here ("reads" it) */
    size_t scratch_cap;
    char err[256];
};

static void set_err(lmdb_peer_handle *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_err(lmdb_peer_handle *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof h->err, fmt, ap);
    va_end(ap);
}

static void open_err(char *err, size_t errlen, const char *what, int rc) {
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "lmdb: %s: %s", what, mdb_strerror(rc));
}

lmdb_peer_handle *lmdb_peer_open(const char *dir, int durable, uint64_t size_hint,
                                 char *err, size_t errlen) {
    lmdb_peer_handle *h = calloc(1, sizeof *h);
    if (h == NULL) {
        open_err(err, errlen, "calloc", ENOMEM);
        return NULL;
    }
    h->durable = durable != 0;

    int rc = mdb_env_create(&h->env);
    if (rc != 0) {
        open_err(err, errlen, "mdb_env_create", rc);
        free(h);
        return NULL;
    }
    uint64_t mapsize = size_hint > GIB / 4 ? 4 * size_hint : GIB;
    if ((rc = mdb_env_set_mapsize(h->env, (size_t)mapsize)) != 0) {
        open_err(err, errlen, "mdb_env_set_mapsize", rc);
        goto fail;
    }
    unsigned flags = MDB_NOTLS;
    if (!h->durable)
        flags |= MDB_NOSYNC | MDB_NOMETASYNC;
    if ((rc = mdb_env_open(h->env, dir, flags, 0644)) != 0) {
        open_err(err, errlen, "mdb_env_open", rc);
        goto fail;
    }

    /* Open the main (unnamed) database once; the dbi stays valid. */
    MDB_txn *txn;
    if ((rc = mdb_txn_begin(h->env, NULL, 0, &txn)) != 0) {
        open_err(err, errlen, "mdb_txn_begin", rc);
        goto fail;
    }
    if ((rc = mdb_dbi_open(txn, NULL, 0, &h->dbi)) != 0) {
        mdb_txn_abort(txn);
        open_err(err, errlen, "mdb_dbi_open", rc);
        goto fail;
    }
    if ((rc = mdb_txn_commit(txn)) != 0) {
        open_err(err, errlen, "mdb_txn_commit", rc);
        goto fail;
    }

    if ((rc = mdb_txn_begin(h->env, NULL, MDB_RDONLY, &h->rtxn)) != 0) {
        open_err(err, errlen, "mdb_txn_begin(read)", rc);
        goto fail;
    }
    mdb_txn_reset(h->rtxn);
    return h;

fail:
    mdb_env_close(h->env);
    free(h);
    return NULL;
}

/*
 * Run one write transaction that does a put or delete. Return the mdb
 * status. MDB_MAP_FULL can come from the operation or from the commit
 * (which allocates pages for the free list). Either way the transaction
 * is gone, so we double the map size and run it again.
 */
static int write_txn(lmdb_peer_handle *h, MDB_val *key, MDB_val *val, int is_del) {
    for (int attempt = 0;; attempt++) {
        MDB_txn *txn;
        const char *what = "mdb_txn_begin";
        int rc = mdb_txn_begin(h->env, NULL, 0, &txn);
        if (rc == 0) {
            what = is_del ? "mdb_del" : "mdb_put";
            rc = is_del ? mdb_del(txn, h->dbi, key, NULL) : mdb_put(txn, h->dbi, key, val, 0);
            if (rc == 0) {
                what = "mdb_txn_commit";
                rc = mdb_txn_commit(txn); /* frees txn whatever it returns */
            } else {
                mdb_txn_abort(txn);
            }
        }
        if (rc == MDB_MAP_FULL && attempt < 16) {
            MDB_envinfo info;
            mdb_env_info(h->env, &info);
            int grc = mdb_env_set_mapsize(h->env, info.me_mapsize * 2);
            if (grc == 0)
                continue;
            set_err(h, "lmdb: map full and mdb_env_set_mapsize failed: %s",
                    mdb_strerror(grc));
            return rc;
        }
        if (rc != 0 && rc != MDB_NOTFOUND)
            set_err(h, "lmdb: %s: %s", what, mdb_strerror(rc));
        return rc;
    }
}

int lmdb_peer_put(lmdb_peer_handle *h, const uint8_t *k, size_t kl, const uint8_t *v,
                  size_t vl) {
    MDB_val key = {kl, (void *)k}, val = {vl, (void *)v};
    return write_txn(h, &key, &val, 0) == 0 ? 0 : -1;
}

int lmdb_peer_get(lmdb_peer_handle *h, const uint8_t *k, size_t kl, uint8_t *buf,
                  size_t cap, size_t *len) {
    int rc = mdb_txn_renew(h->rtxn);
    if (rc != 0) {
        set_err(h, "lmdb: mdb_txn_renew: %s", mdb_strerror(rc));
        return -1;
    }
    MDB_val key = {kl, (void *)k}, val;
    rc = mdb_get(h->rtxn, h->dbi, &key, &val);
    int ret;
    if (rc == 0) {
        /* Copy out before the reset: the pointer is only valid inside the txn. */
        *len = val.mv_size;
        size_t ncopy = val.mv_size < cap ? val.mv_size : cap;
        if (ncopy > 0) /* buf may be NULL when cap is 0 */
            memcpy(buf, val.mv_data, ncopy);
        ret = 1;
    } else if (rc == MDB_NOTFOUND) {
        ret = 0;
    } else {
        set_err(h, "lmdb: mdb_get: %s", mdb_strerror(rc));
        ret = -1;
    }
    mdb_txn_reset(h->rtxn);
    return ret;
}

int lmdb_peer_del(lmdb_peer_handle *h, const uint8_t *k, size_t kl) {
    MDB_val key = {kl, (void *)k};
    int rc = write_txn(h, &key, NULL, 1);
    if (rc == 0)
        return 1;
    return rc == MDB_NOTFOUND ? 0 : -1;
}

int lmdb_peer_scan(lmdb_peer_handle *h, const uint8_t *k, size_t kl, size_t n,
                   size_t *visited, uint64_t *bytes) {
    *visited = 0;
    *bytes = 0;
    if (n == 0)
        return 0;
    int rc = mdb_txn_renew(h->rtxn);
    if (rc != 0) {
        set_err(h, "lmdb: mdb_txn_renew: %s", mdb_strerror(rc));
        return -1;
    }
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(h->rtxn, h->dbi, &cur)) != 0) {
        set_err(h, "lmdb: mdb_cursor_open: %s", mdb_strerror(rc));
        mdb_txn_reset(h->rtxn);
        return -1;
    }
    MDB_val key = {kl, (void *)k}, val;
    /* LMDB has no empty keys, so the first key >= "" is the first key. */
    rc = mdb_cursor_get(cur, &key, &val, kl == 0 ? MDB_FIRST : MDB_SET_RANGE);
    int ret = 0;
    size_t cnt = 0;
    uint64_t sum = 0;
    while (rc == 0 && cnt < n) {
        if (peer_grow(&h->scratch, &h->scratch_cap, val.mv_size) != 0) {
            set_err(h, "lmdb: out of memory for a %zu-byte value", val.mv_size);
            ret = -1;
            break;
        }
        memcpy(h->scratch, val.mv_data, val.mv_size);
        cnt++;
        sum += val.mv_size;
        if (cnt < n)
            rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
    }
    if (ret == 0 && rc != 0 && rc != MDB_NOTFOUND) {
        set_err(h, "lmdb: mdb_cursor_get: %s", mdb_strerror(rc));
        ret = -1;
    }
    mdb_cursor_close(cur);
    mdb_txn_reset(h->rtxn);
    *visited = cnt;
    *bytes = sum;
    return ret;
}

const char *lmdb_peer_error(lmdb_peer_handle *h) { return h->err; }

void lmdb_peer_close(lmdb_peer_handle *h) {
    if (h == NULL)
        return;
    mdb_txn_abort(h->rtxn);
    /* Durable commits are already synced; volatile mode needs no flush. */
    mdb_dbi_close(h->env, h->dbi);
    mdb_env_close(h->env);
    free(h->scratch);
    free(h);
}
