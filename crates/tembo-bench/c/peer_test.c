/*
 * peer_test: checks every embedded peer of `tembo bench` (peer.h) against
 * a simple in-memory model, and optionally times them.
 *
 *   peer_test [--ops N] [--seed S] [--peer NAME]   model test (default)
 *   peer_test --bench [N] [--peer NAME]            N puts + N gets each
 *
 * Model test, for each peer in durable and volatile mode, in a fresh
 * directory under /dev/shm:
 * - N random operations (default 20,000): put new keys, overwrite existing
 *   keys, get (with a random buffer capacity, to exercise the "longer than
 *   cap" rule), delete (present and absent keys), and scan (from random or
 *   existing keys, small and large counts). Each result is compared with
 *   a sorted array of (key, value).
 * - Keys are 1..40 bytes over the alphabet {0x00, 0x61, 0x80, 0xff}, so
 *   short keys collide, keys are prefixes of one another, and signed-byte
 *   comparison bugs show. Half of the new keys are 1..4 bytes long.
 *   Values are 0..3000 random bytes.
 * - Then a full check: every key through get, plus scans over the whole
 *   range and from every 7th key.
 * - Durable mode also closes, reopens, checks everything again, runs more
 *   operations on the reopened handle, and checks once more.
 * One line per peer and mode. Exit status 1 on any mismatch or error.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "peer.h"

/* ---- a uniform table over the four prefixed interfaces ------------------- */

typedef struct {
    const char *name;
    void *(*open)(const char *dir, int durable, uint64_t size_hint, char *err, size_t errlen);
    int (*put)(void *h, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl);
    int (*get)(void *h, const uint8_t *k, size_t kl, uint8_t *buf, size_t cap, size_t *len);
    int (*del)(void *h, const uint8_t *k, size_t kl);
    int (*scan)(void *h, const uint8_t *k, size_t kl, size_t n, size_t *visited,
                uint64_t *bytes);
    const char *(*error)(void *h);
    void (*close)(void *h);
} peer_ops;

#define WRAP(p)                                                                         \
    static void *p##w_open(const char *d, int du, uint64_t sh, char *e, size_t el) {    \
        return p##open(d, du, sh, e, el);                                               \
    }                                                                                   \
    static int p##w_put(void *h, const uint8_t *k, size_t kl, const uint8_t *v,         \
                        size_t vl) {                                                    \
        return p##put(h, k, kl, v, vl);                                                 \
    }                                                                                   \
    static int p##w_get(void *h, const uint8_t *k, size_t kl, uint8_t *b, size_t c,     \
                        size_t *l) {                                                    \
        return p##get(h, k, kl, b, c, l);                                               \
    }                                                                                   \
    static int p##w_del(void *h, const uint8_t *k, size_t kl) { return p##del(h, k, kl); } \
    static int p##w_scan(void *h, const uint8_t *k, size_t kl, size_t n, size_t *vis,   \
                         uint64_t *by) {                                                \
        return p##scan(h, k, kl, n, vis, by);                                           \
    }                                                                                   \
    static const char *p##w_error(void *h) { return p##error(h); }                      \
    static void p##w_close(void *h) { p##close(h); }

WRAP(lmdb_peer_)
WRAP(rocksdb_peer_)
WRAP(bdb_peer_)
WRAP(pmemobj_peer_)

#define OPS(p, nm)                                                                      \
    {nm, p##w_open, p##w_put, p##w_get, p##w_del, p##w_scan, p##w_error, p##w_close}

static const peer_ops PEERS[] = {
    OPS(lmdb_peer_, "lmdb"),
    OPS(rocksdb_peer_, "rocksdb"),
    OPS(bdb_peer_, "bdb"),
    OPS(pmemobj_peer_, "pmemobj"),
};
#define NPEERS (sizeof PEERS / sizeof PEERS[0])

/* ---- random numbers ------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
static size_t rnd_below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* ---- the model: a sorted array of entries -------------------------------- */

#define KMAX 40
#define VMAX 3000

typedef struct {
    uint8_t k[KMAX];
    size_t kl;
    uint8_t *v;
    size_t vl;
} entry;

typedef struct {
    entry *e;
    size_t n, cap;
} model;

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    return c ? c : (al > bl) - (al < bl);
}

/* First index with key >= k. */
static size_t m_lower(const model *m, const uint8_t *k, size_t kl) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (key_cmp(m->e[mid].k, m->e[mid].kl, k, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static entry *m_find(const model *m, const uint8_t *k, size_t kl) {
    size_t i = m_lower(m, k, kl);
    return i < m->n && key_cmp(m->e[i].k, m->e[i].kl, k, kl) == 0 ? &m->e[i] : NULL;
}

static void m_put(model *m, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl) {
    size_t i = m_lower(m, k, kl);
    uint8_t *copy = malloc(vl ? vl : 1);
    if (copy == NULL) {
        perror("malloc");
        exit(2);
    }
    memcpy(copy, v, vl);
    if (i < m->n && key_cmp(m->e[i].k, m->e[i].kl, k, kl) == 0) {
        free(m->e[i].v);
        m->e[i].v = copy;
        m->e[i].vl = vl;
        return;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 1024;
        m->e = realloc(m->e, m->cap * sizeof *m->e);
        if (m->e == NULL) {
            perror("realloc");
            exit(2);
        }
    }
    memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof *m->e);
    memcpy(m->e[i].k, k, kl);
    m->e[i].kl = kl;
    m->e[i].v = copy;
    m->e[i].vl = vl;
    m->n++;
}

static int m_del(model *m, const uint8_t *k, size_t kl) {
    size_t i = m_lower(m, k, kl);
    if (i >= m->n || key_cmp(m->e[i].k, m->e[i].kl, k, kl) != 0)
        return 0;
    free(m->e[i].v);
    memmove(&m->e[i], &m->e[i + 1], (m->n - i - 1) * sizeof *m->e);
    m->n--;
    return 1;
}

static void m_scan(const model *m, const uint8_t *k, size_t kl, size_t n, size_t *vis,
                   uint64_t *bytes) {
    size_t i = m_lower(m, k, kl), c = 0;
    uint64_t b = 0;
    for (; i < m->n && c < n; i++, c++)
        b += m->e[i].vl;
    *vis = c;
    *bytes = b;
}

static void m_free(model *m) {
    for (size_t i = 0; i < m->n; i++)
        free(m->e[i].v);
    free(m->e);
    memset(m, 0, sizeof *m);
}

/* ---- test driver ---------------------------------------------------------- */

static const uint8_t ALPHABET[4] = {0x00, 0x61, 0x80, 0xff};

static size_t gen_key(uint8_t *k) {
    size_t kl = rnd_below(2) ? 1 + rnd_below(4) : 1 + rnd_below(KMAX);
    for (size_t i = 0; i < kl; i++)
        k[i] = ALPHABET[rnd_below(4)];
    return kl;
}

static size_t gen_val(uint8_t *v) {
    /* Mostly small values, some up to the maximum. */
    size_t vl = rnd_below(4) ? rnd_below(300) : rnd_below(VMAX + 1);
    for (size_t i = 0; i < vl; i++)
        v[i] = (uint8_t)rnd();
    return vl;
}

static void hexkey(char *out, const uint8_t *k, size_t kl) {
    for (size_t i = 0; i < kl; i++)
        sprintf(out + 2 * i, "%02x", k[i]);
    out[2 * kl] = '\0';
}

typedef struct {
    const peer_ops *p;
    void *h;
    const char *tag; /* "lmdb durable" etc. */
    model m;
    uint64_t step; /* op counter, for messages */
    size_t peak;   /* most keys held at once */
    char why[1024];
} ctx;

#define FAIL(c, ...)                                                                    \
    do {                                                                                \
        snprintf((c)->why, sizeof (c)->why, __VA_ARGS__);                               \
        return -1;                                                                      \
    } while (0)

#define BUFSZ 4096
#define SENTINEL 0xA5

static int check_get(ctx *c, const uint8_t *k, size_t kl, size_t cap) {
    static uint8_t buf[BUFSZ];
    char hk[2 * KMAX + 1];
    hexkey(hk, k, kl);
    memset(buf, SENTINEL, sizeof buf);
    size_t len = (size_t)-1;
    /* cap 0 comes with a NULL buffer, which peers must not touch */
    int r = c->p->get(c->h, k, kl, cap ? buf : NULL, cap, &len);
    const entry *e = m_find(&c->m, k, kl);
    if (r < 0)
        FAIL(c, "op %" PRIu64 ": get(%s) error: %s", c->step, hk, c->p->error(c->h));
    if (r != (e != NULL))
        FAIL(c, "op %" PRIu64 ": get(%s) returned %d, model says %s", c->step, hk, r,
             e ? "present" : "absent");
    if (e == NULL)
        return 0;
    if (len != e->vl)
        FAIL(c, "op %" PRIu64 ": get(%s) len %zu, want %zu", c->step, hk, len, e->vl);
    size_t ncopy = e->vl < cap ? e->vl : cap;
    if (ncopy && memcmp(buf, e->v, ncopy) != 0)
        FAIL(c, "op %" PRIu64 ": get(%s) value bytes differ (cap %zu)", c->step, hk, cap);
    for (size_t i = ncopy; i < BUFSZ; i++)
        if (buf[i] != SENTINEL)
            FAIL(c, "op %" PRIu64 ": get(%s) wrote byte %zu past the %zu it may (cap %zu)",
                 c->step, hk, i, ncopy, cap);
    return 0;
}

static int check_scan(ctx *c, const uint8_t *k, size_t kl, size_t n) {
    char hk[2 * KMAX + 1];
    hexkey(hk, k, kl);
    size_t vis = 0, wvis;
    uint64_t bytes = 0, wbytes;
    if (c->p->scan(c->h, k, kl, n, &vis, &bytes) != 0)
        FAIL(c, "op %" PRIu64 ": scan(%s, %zu) error: %s", c->step, hk, n, c->p->error(c->h));
    m_scan(&c->m, k, kl, n, &wvis, &wbytes);
    if (vis != wvis || bytes != wbytes)
        FAIL(c, "op %" PRIu64 ": scan(%s, %zu) visited %zu / %" PRIu64 " bytes, want %zu / %" PRIu64,
             c->step, hk, n, vis, bytes, wvis, wbytes);
    return 0;
}

/* Pick an existing key (if any) into k. */
static size_t pick_existing(const ctx *c, uint8_t *k) {
    const entry *e = &c->m.e[rnd_below(c->m.n)];
    memcpy(k, e->k, e->kl);
    return e->kl;
}

static int random_ops(ctx *c, uint64_t nops) {
    static uint8_t v[VMAX];
    uint8_t k[KMAX];
    for (uint64_t i = 0; i < nops; i++, c->step++) {
        unsigned r = (unsigned)rnd_below(100);
        int existing = c->m.n > 0 && rnd_below(10) < 7;
        size_t kl;
        if (r < 35 || (r < 50 && c->m.n == 0)) { /* put, mostly new keys */
            kl = gen_key(k);
            size_t vl = gen_val(v);
            if (c->p->put(c->h, k, kl, v, vl) != 0)
                FAIL(c, "op %" PRIu64 ": put error: %s", c->step, c->p->error(c->h));
            m_put(&c->m, k, kl, v, vl);
            if (c->m.n > c->peak)
                c->peak = c->m.n;
        } else if (r < 50) { /* overwrite an existing key */
            kl = pick_existing(c, k);
            size_t vl = gen_val(v);
            if (c->p->put(c->h, k, kl, v, vl) != 0)
                FAIL(c, "op %" PRIu64 ": overwrite error: %s", c->step, c->p->error(c->h));
            m_put(&c->m, k, kl, v, vl);
        } else if (r < 70) { /* get; half the time with a random (small) capacity */
            kl = existing ? pick_existing(c, k) : gen_key(k);
            size_t cap = rnd_below(2) ? BUFSZ : rnd_below(8) ? rnd_below(VMAX + 1) : 0;
            if (check_get(c, k, kl, cap) != 0)
                return -1;
        } else if (r < 85) { /* delete */
            kl = existing ? pick_existing(c, k) : gen_key(k);
            int got = c->p->del(c->h, k, kl);
            int want = m_del(&c->m, k, kl);
            if (got != want) {
                char hk[2 * KMAX + 1];
                hexkey(hk, k, kl);
                FAIL(c, "op %" PRIu64 ": del(%s) returned %d, want %d (%s)", c->step, hk, got,
                     want, got < 0 ? c->p->error(c->h) : "");
            }
        } else { /* scan */
            kl = existing ? pick_existing(c, k) : gen_key(k);
            size_t n = rnd_below(10) ? 1 + rnd_below(64) : 1 + rnd_below(2000);
            if (check_scan(c, k, kl, n) != 0)
                return -1;
        }
    }
    return 0;
}

/*
 * Delete every key, in random order, then check the peer is empty and
 * still works. This drives the B-tree peers through merges down to an
 * empty root.
 */
static int drain(ctx *c) {
    while (c->m.n > 0) {
        uint8_t k[KMAX];
        size_t kl = pick_existing(c, k);
        int got = c->p->del(c->h, k, kl);
        m_del(&c->m, k, kl);
        if (got != 1)
            FAIL(c, "drain: del returned %d, want 1 (%s)", got, got < 0 ? c->p->error(c->h) : "");
        if (rnd_below(64) == 0 && check_scan(c, k, kl, 1 + rnd_below(100)) != 0)
            return -1;
        c->step++;
    }
    if (check_scan(c, (const uint8_t *)"", 0, (size_t)-1) != 0)
        return -1;
    return random_ops(c, 500);
}

/* Every key through get, a full scan, and scans from every 7th key. */
static int full_check(ctx *c) {
    for (size_t i = 0; i < c->m.n; i++) {
        entry e = c->m.e[i];
        if (check_get(c, e.k, e.kl, BUFSZ) != 0)
            return -1;
    }
    if (check_scan(c, (const uint8_t *)"", 0, (size_t)-1) != 0)
        return -1;
    for (size_t i = 0; i < c->m.n; i += 7)
        if (check_scan(c, c->m.e[i].k, c->m.e[i].kl, 1 + i % 50) != 0)
            return -1;
    /* A few absent keys must stay absent. */
    uint8_t k[KMAX];
    for (int i = 0; i < 200; i++) {
        size_t kl = gen_key(k);
        if (check_get(c, k, kl, BUFSZ) != 0)
            return -1;
    }
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "warning: remove %s: %s\n", path, strerror(errno));
    return 0;
}
static void rm_rf(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static int make_dir(char *out, size_t outlen, const char *base, const char *name) {
    snprintf(out, outlen, "%s/%s", base, name);
    if (mkdir(out, 0755) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", out, strerror(errno));
        return -1;
    }
    return 0;
}

#define SIZE_HINT (64ull << 20)

static int run_model_test(const peer_ops *p, int durable, const char *base, uint64_t nops,
                          uint64_t seed) {
    char tag[64], dir[4096], err[512] = "";
    snprintf(tag, sizeof tag, "%s %s", p->name, durable ? "durable" : "volatile");
    char sub[64];
    snprintf(sub, sizeof sub, "%s-%s", p->name, durable ? "durable" : "volatile");
    if (make_dir(dir, sizeof dir, base, sub) != 0)
        return -1;

    ctx c = {.p = p, .tag = tag};
    rng_state = seed ? seed : 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    int rc = 0;
    const char *phase = "open";
    c.h = p->open(dir, durable, SIZE_HINT, err, sizeof err);
    if (c.h == NULL) {
        snprintf(c.why, sizeof c.why, "open: %s", err);
        rc = -1;
        goto out;
    }
    phase = "random ops";
    if ((rc = random_ops(&c, nops)) != 0)
        goto out;
    phase = "full check";
    if ((rc = full_check(&c)) != 0)
        goto out;

    if (durable) { /* everything must survive a close */
        p->close(c.h);
        c.h = NULL;
        phase = "reopen";
        c.h = p->open(dir, durable, SIZE_HINT, err, sizeof err);
        if (c.h == NULL) {
            snprintf(c.why, sizeof c.why, "reopen: %s", err);
            rc = -1;
            goto out;
        }
        phase = "check after reopen";
        if ((rc = full_check(&c)) != 0)
            goto out;
        phase = "ops after reopen";
        if ((rc = random_ops(&c, nops / 10)) != 0)
            goto out;
        phase = "check before drain";
        if ((rc = full_check(&c)) != 0)
            goto out;
    }
    phase = "drain";
    if ((rc = drain(&c)) != 0)
        goto out;
    phase = "check after drain";
    if ((rc = full_check(&c)) != 0)
        goto out;
    p->close(c.h);
    c.h = NULL;

out:
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (rc == 0)
        printf("PASS  %-17s %" PRIu64 " ops (%zu keys at most)%s, drained  (%.2fs)\n",
               tag, c.step, c.peak, durable ? ", close+reopen checked" : "", secs);
    else
        printf("FAIL  %-17s [%s] %s\n", tag, phase, c.why);
    fflush(stdout);
    if (c.h != NULL)
        p->close(c.h);
    m_free(&c.m);
    rm_rf(dir);
    return rc;
}

/* ---- timing --------------------------------------------------------------- */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A 25-byte key from i, scattered so inserts are not sequential. */
static void bench_key(uint8_t *k, uint64_t i) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    char tmp[32];
    snprintf(tmp, sizeof tmp, "k%024" PRIu64, (uint64_t)(x % 1000000000000000000ull));
    memcpy(k, tmp, 25);
}

static int run_bench(const peer_ops *p, int durable, const char *base, uint64_t n) {
    char dir[4096], err[512] = "", sub[64];
    snprintf(sub, sizeof sub, "bench-%s-%s", p->name, durable ? "durable" : "volatile");
    if (make_dir(dir, sizeof dir, base, sub) != 0)
        return -1;
    void *h = p->open(dir, durable, n * (25 + 256), err, sizeof err);
    if (h == NULL) {
        printf("bench %-8s %-8s open failed: %s\n", p->name, durable ? "durable" : "volatile",
               err);
        rm_rf(dir);
        return -1;
    }
    uint8_t k[25], v[256], buf[512];
    for (size_t i = 0; i < sizeof v; i++)
        v[i] = (uint8_t)(i * 31 + 7);
    int rc = 0;
    double t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        bench_key(k, i);
        v[0] = (uint8_t)i;
        if (p->put(h, k, sizeof k, v, sizeof v) != 0) {
            printf("put failed: %s\n", p->error(h));
            rc = -1;
            break;
        }
    }
    double t1 = now();
    uint64_t found = 0;
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        bench_key(k, (i * 7919) % n);
        size_t len;
        int r = p->get(h, k, sizeof k, buf, sizeof buf, &len);
        if (r < 0) {
            printf("get failed: %s\n", p->error(h));
            rc = -1;
            break;
        }
        found += (uint64_t)r;
    }
    double t2 = now();
    size_t vis = 0;
    uint64_t bytes = 0;
    if (rc == 0 && p->scan(h, (const uint8_t *)"", 0, (size_t)-1, &vis, &bytes) != 0) {
        printf("scan failed: %s\n", p->error(h));
        rc = -1;
    }
    double t3 = now();
    if (rc == 0)
        printf("bench %-8s %-8s %8" PRIu64 " puts %10.0f/s (%6.2f us)  gets %10.0f/s (%5.2f us)"
               "  full scan %.0f entries/s%s\n",
               p->name, durable ? "durable" : "volatile", n, (double)n / (t1 - t0),
               (t1 - t0) / (double)n * 1e6, (double)n / (t2 - t1),
               (t2 - t1) / (double)n * 1e6, (double)vis / (t3 - t2),
               found == n && vis == n ? "" : "  [COUNT MISMATCH]");
    fflush(stdout);
    p->close(h);
    rm_rf(dir);
    return rc;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    uint64_t nops = 20000, seed = 0x7e3b0c0ffee, bench_n = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
            nops = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--peer") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--bench") == 0) {
            bench_n = 100000;
            if (i + 1 < argc && argv[i + 1][0] != '-')
                bench_n = strtoull(argv[++i], NULL, 10);
        } else {
            fprintf(stderr,
                    "usage: %s [--ops N] [--seed S] [--peer NAME] [--bench [N]]\n", argv[0]);
            return 2;
        }
    }

    char base[] = "/dev/shm/peer_test.XXXXXX";
    if (mkdtemp(base) == NULL) {
        perror("mkdtemp /dev/shm/peer_test.XXXXXX");
        return 2;
    }
    int failed = 0, ran = 0;
    for (size_t i = 0; i < NPEERS; i++) {
        if (only != NULL && strcmp(only, PEERS[i].name) != 0)
            continue;
        for (int durable = 1; durable >= 0; durable--) {
            ran++;
            int rc = bench_n ? run_bench(&PEERS[i], durable, base, bench_n)
                             : run_model_test(&PEERS[i], durable, base, nops, seed + i);
            failed |= rc != 0;
        }
    }
    rm_rf(base);
    if (ran == 0) {
        fprintf(stderr, "no peer named %s\n", only);
        return 2;
    }
    if (!bench_n)
        printf("%s\n", failed ? "SOME PEERS FAILED" : "all peers passed");
    return failed ? 1 : 0;
}
