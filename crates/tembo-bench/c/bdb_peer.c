/*
 * Berkeley DB 5.3 peer of `tembo bench` (db.h, -ldb), DB_BTREE. See peer.h for the contract.
 *
 * Configuration, and why:
 * - Both modes use the same transactional environment: DB_CREATE |
 *   DB_INIT_TXN | DB_INIT_LOG | DB_INIT_MPOOL | DB_INIT_LOCK | DB_RECOVER.
 *   DB_RECOVER runs normal recovery on every open, as BDB documents for a
 *   transactional application that may have crashed. After a clean close
 *   it is cheap.
 * - Every put/del runs in its own explicit transaction (txn_begin, op,
 *   commit). The database is opened with DB_AUTO_COMMIT, so it is
 *   transactional.
 * - Durable mode: BDB's default commit. Before commit returns, the log
 *   record is written and the log is flushed synchronously. This is full
 *   ACID.
 * - Volatile mode: DB_ENV->set_flags(DB_TXN_NOSYNC). BDB documents it as
 *   "will not write or synchronously flush the log on transaction commit",
 *   so transactions keep ACI but not D. That is the same contract as
 *   LMDB's MDB_NOSYNC and RocksDB without a WAL sync. We chose it over
 *   DB_TXN_WRITE_NOSYNC (which still does a write() of the log per commit)
 *   and over dropping transactions (which would lose atomicity and change
 *   the code path). The log buffer is written when it fills.
 * - Cache: size_hint * 3/2 (B-tree pages are not full), clamped to
 *   [256 MiB, 2 GiB], in one region.
 * - The log would otherwise grow without bound. We set DB_LOG_AUTO_REMOVE
 *   and, every CKPT_EVERY writes, call txn_checkpoint(CKPT_KBYTES), which
 *   only checkpoints once that much log has been written since the last
 *   one. A long-running BDB application does the same. Checkpoint cost is
 *   therefore part of this peer's write cost, as it would be in practice.
 *   Close also checkpoints, so a reopen's recovery is short.
 * - get reads into the caller's buffer (DB_DBT_USERMEM). If the value is
 *   longer than `cap`, BDB answers DB_BUFFER_SMALL with the full size, and
 *   we re-read only the first `cap` bytes (DB_DBT_PARTIAL).
 * - scan: a cursor, DB_SET_RANGE then DB_NEXT. Each value is copied into a
 *   scratch buffer that BDB reallocs (DB_DBT_REALLOC), so each value is
 *   read exactly once. Reads run outside transactions, as usual for
 *   single-threaded BDB reads.
 * - BDB's own error text (its errcall) is appended to our messages.
 *
 * A handle is not thread-safe: use one thread at a time.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <db.h>

#include "peer.h"

#define MIB (1024ull * 1024)
#define GIB (1024ull * MIB)
#define CKPT_EVERY 1024      /* writes between checkpoint checks */
#define CKPT_KBYTES (32 * 1024) /* checkpoint after 32 MiB of log */

struct bdb_peer_handle {
    DB_ENV *env;
    DB *db;
    uint64_t writes; /* since the last checkpoint check */
    void *scratch;   /* scan's realloc'd value buffer (DB_DBT_REALLOC) */
    char libmsg[256]; /* BDB's last errcall message */
    char err[512];
};

static void errcall(const DB_ENV *env, const char *pfx, const char *msg) {
    (void)pfx;
    bdb_peer_handle *h = env->app_private;
    if (h != NULL)
        snprintf(h->libmsg, sizeof h->libmsg, "%s", msg);
}

/* Record "bdb: what: strerror(rc)" plus BDB's own message, if any. */
static void set_err(bdb_peer_handle *h, const char *what, int rc) {
    if (h->libmsg[0] != '\0')
        snprintf(h->err, sizeof h->err, "bdb: %s: %s (%s)", what, db_strerror(rc), h->libmsg);
    else
        snprintf(h->err, sizeof h->err, "bdb: %s: %s", what, db_strerror(rc));
    h->libmsg[0] = '\0';
}

static void fail_open(bdb_peer_handle *h, char *err, size_t errlen, const char *what,
                      int rc) {
    set_err(h, what, rc);
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", h->err);
    if (h->db != NULL)
        h->db->close(h->db, 0);
    if (h->env != NULL)
        h->env->close(h->env, 0);
    free(h);
}

bdb_peer_handle *bdb_peer_open(const char *dir, int durable, uint64_t size_hint, char *err,
                               size_t errlen) {
    bdb_peer_handle *h = calloc(1, sizeof *h);
    if (h == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "bdb: out of memory");
        return NULL;
    }
    int rc = db_env_create(&h->env, 0);
    if (rc != 0) {
        h->env = NULL;
        fail_open(h, err, errlen, "db_env_create", rc);
        return NULL;
    }
    h->env->app_private = h;
    h->env->set_errcall(h->env, errcall);

    uint64_t cache = size_hint / 2 * 3;
    if (cache < 256 * MIB)
        cache = 256 * MIB;
    if (cache > 2 * GIB)
        cache = 2 * GIB;
    if ((rc = h->env->set_cachesize(h->env, (u_int32_t)(cache / GIB),
                                    (u_int32_t)(cache % GIB), 1)) != 0) {
        fail_open(h, err, errlen, "set_cachesize", rc);
        return NULL;
    }
    if ((rc = h->env->log_set_config(h->env, DB_LOG_AUTO_REMOVE, 1)) != 0) {
        fail_open(h, err, errlen, "log_set_config(DB_LOG_AUTO_REMOVE)", rc);
        return NULL;
    }
    if (!durable && (rc = h->env->set_flags(h->env, DB_TXN_NOSYNC, 1)) != 0) {
        fail_open(h, err, errlen, "set_flags(DB_TXN_NOSYNC)", rc);
        return NULL;
    }
    u_int32_t envflags = DB_CREATE | DB_INIT_TXN | DB_INIT_LOG | DB_INIT_MPOOL |
                         DB_INIT_LOCK | DB_RECOVER;
    if ((rc = h->env->open(h->env, dir, envflags, 0644)) != 0) {
        fail_open(h, err, errlen, "DB_ENV->open", rc);
        return NULL;
    }
    if ((rc = db_create(&h->db, h->env, 0)) != 0) {
        h->db = NULL;
        fail_open(h, err, errlen, "db_create", rc);
        return NULL;
    }
    if ((rc = h->db->open(h->db, NULL, "data.db", NULL, DB_BTREE,
                          DB_CREATE | DB_AUTO_COMMIT, 0644)) != 0) {
        fail_open(h, err, errlen, "DB->open", rc);
        return NULL;
    }
    return h;
}

/* Every CKPT_EVERY writes, let BDB checkpoint if enough log has piled up. */
static int maybe_checkpoint(bdb_peer_handle *h) {
    if (++h->writes < CKPT_EVERY)
        return 0;
    h->writes = 0;
    int rc = h->env->txn_checkpoint(h->env, CKPT_KBYTES, 0, 0);
    if (rc != 0) {
        set_err(h, "txn_checkpoint", rc);
        return -1;
    }
    return 0;
}

static void dbt_in(DBT *d, const void *p, size_t n) {
    memset(d, 0, sizeof *d);
    d->data = (void *)p;
    d->size = (u_int32_t)n;
}

int bdb_peer_put(bdb_peer_handle *h, const uint8_t *k, size_t kl, const uint8_t *v,
                 size_t vl) {
    if (kl > UINT32_MAX || vl > UINT32_MAX) {
        snprintf(h->err, sizeof h->err, "bdb: key or value longer than 4 GiB");
        return -1;
    }
    DBT key, val;
    dbt_in(&key, k, kl);
    dbt_in(&val, v, vl);
    DB_TXN *txn;
    int rc = h->env->txn_begin(h->env, NULL, &txn, 0);
    if (rc != 0) {
        set_err(h, "txn_begin", rc);
        return -1;
    }
    if ((rc = h->db->put(h->db, txn, &key, &val, 0)) != 0) {
        set_err(h, "DB->put", rc);
        txn->abort(txn);
        return -1;
    }
    if ((rc = txn->commit(txn, 0)) != 0) {
        set_err(h, "DB_TXN->commit", rc);
        return -1;
    }
    return maybe_checkpoint(h);
}

int bdb_peer_get(bdb_peer_handle *h, const uint8_t *k, size_t kl, uint8_t *buf, size_t cap,
                 size_t *len) {
    DBT key, val;
    dbt_in(&key, k, kl);
    u_int32_t ucap = cap > UINT32_MAX ? UINT32_MAX : (u_int32_t)cap;
    memset(&val, 0, sizeof val);
    val.data = buf;
    val.ulen = ucap;
    val.flags = DB_DBT_USERMEM;
    int rc = h->db->get(h->db, NULL, &key, &val, 0);
    if (rc == 0) {
        *len = val.size;
        return 1;
    }
    if (rc == DB_NOTFOUND)
        return 0;
    if (rc != DB_BUFFER_SMALL) {
        set_err(h, "DB->get", rc);
        return -1;
    }
    /* Longer than cap: BDB set val.size to the full length; fetch a prefix. */
    size_t full = val.size;
    if (ucap > 0) {
        memset(&val, 0, sizeof val);
        val.data = buf;
        val.ulen = ucap;
        val.dlen = ucap;
        val.doff = 0;
        val.flags = DB_DBT_USERMEM | DB_DBT_PARTIAL;
        rc = h->db->get(h->db, NULL, &key, &val, 0);
        if (rc == DB_NOTFOUND)
            return 0;
        if (rc != 0) {
            set_err(h, "DB->get (partial)", rc);
            return -1;
        }
    }
    *len = full;
    return 1;
}

int bdb_peer_del(bdb_peer_handle *h, const uint8_t *k, size_t kl) {
    DBT key;
    dbt_in(&key, k, kl);
    DB_TXN *txn;
    int rc = h->env->txn_begin(h->env, NULL, &txn, 0);
    if (rc != 0) {
        set_err(h, "txn_begin", rc);
        return -1;
    }
    rc = h->db->del(h->db, txn, &key, 0);
    if (rc == DB_NOTFOUND) {
        txn->abort(txn); /* nothing was written */
        return 0;
    }
    if (rc != 0) {
        set_err(h, "DB->del", rc);
        txn->abort(txn);
        return -1;
    }
    if ((rc = txn->commit(txn, 0)) != 0) {
        set_err(h, "DB_TXN->commit", rc);
        return -1;
    }
    return maybe_checkpoint(h) == 0 ? 1 : -1;
}

int bdb_peer_scan(bdb_peer_handle *h, const uint8_t *k, size_t kl, size_t n,
                  size_t *visited, uint64_t *bytes) {
    *visited = 0;
    *bytes = 0;
    if (n == 0)
        return 0;
    DBC *cur;
    int rc = h->db->cursor(h->db, NULL, &cur, 0);
    if (rc != 0) {
        set_err(h, "DB->cursor", rc);
        return -1;
    }
    /* DB_SET_RANGE replaces key.data with BDB-owned memory; `k` is not written. */
    DBT key, val;
    dbt_in(&key, k, kl);
    memset(&val, 0, sizeof val);
    val.data = h->scratch;
    val.flags = DB_DBT_REALLOC;
    size_t cnt = 0;
    uint64_t sum = 0;
    rc = cur->get(cur, &key, &val, DB_SET_RANGE);
    while (rc == 0) {
        h->scratch = val.data; /* BDB may have realloc'd it */
        cnt++;
        sum += val.size;
        if (cnt >= n)
            break;
        rc = cur->get(cur, &key, &val, DB_NEXT);
    }
    h->scratch = val.data;
    int ret = 0;
    if (rc != 0 && rc != DB_NOTFOUND) {
        set_err(h, "DBC->get", rc);
        ret = -1;
    }
    if ((rc = cur->close(cur)) != 0 && ret == 0) {
        set_err(h, "DBC->close", rc);
        ret = -1;
    }
    *visited = cnt;
    *bytes = sum;
    return ret;
}

const char *bdb_peer_error(bdb_peer_handle *h) { return h->err; }

void bdb_peer_close(bdb_peer_handle *h) {
    if (h == NULL)
        return;
    /* DB->close writes the database's dirty cache pages to its file. */
    h->db->close(h->db, 0);
    /* A checkpoint makes the next open's recovery short and lets BDB drop
     * old log files; the committed data itself does not need it. */
    h->env->txn_checkpoint(h->env, 0, 0, 0);
    h->env->close(h->env, 0);
    free(h->scratch);
    free(h);
}
