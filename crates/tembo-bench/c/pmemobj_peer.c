/*
 * PMDK libpmemobj peer of `tembo bench` (libpmemobj.h, -lpmemobj). See peer.h for the contract.
 *
 * This peer is a B+tree of our own built on pmemobj's undo-log transactions.
 * It is the "strongest durable" baseline: the classic PMDK way to build a
 * persistent index, and the baseline of the Kamino-Tx paper.
 *
 * Pool and transactions
 * - The pool is `dir/pmemobj.pool`, made with pmemobj_create(layout
 *   "tembo-bench-btree", size max(3 * size_hint, 256 MiB)). If the file
 *   already exists it is reopened with pmemobj_open. The 3x covers value
 *   allocation headers and size-class rounding, half-full nodes, and
 *   undo-log space.
 * - The root object holds only the tree root. The tree always has at least
 *   one node: open creates an empty root leaf.
 * - Every put/del is exactly one TX_BEGIN ... TX_END transaction. Before
 *   its first store in a transaction, every persistent byte we change is
 *   snapshotted with pmemobj_tx_add_range_direct (TX_ADD of a range).
 *   That covers node headers, the shifted tail of a node's key/pointer
 *   arrays, separators in parents, and the root pointer. We snapshot only
 *   the ranges that change, not whole nodes, because copying 2.6 KB into
 *   the undo log per insert would measure our laziness rather than
 *   pmemobj. Objects allocated in the transaction are not snapshotted:
 *   pmemobj discards them on abort and flushes them on commit.
 * - Values are separate objects ({u64 len; bytes}) from pmemobj_tx_alloc.
 *   An overwrite allocates the new value and frees the old one in the same
 *   transaction, and a delete frees it (pmemobj_tx_free).
 * - Any failure inside a transaction (pool full, ...) aborts it. pmemobj
 *   rolls everything back, and the call returns -1 with pmemobj_errormsg().
 *   When the pool is full, even deletes can fail ("out of memory"): a
 *   snapshot larger than the lane's built-in undo log needs heap space to
 *   extend the log. Hence the generous pool size.
 *
 * Tree
 * - Keys are 0..64 bytes stored inline in the node. Longer keys are
 *   rejected with -1 and an error message before any transaction starts.
 * - MAXK = 32 keys per node (internal fanout 33), minimum MINK = 16 for a
 *   non-root node. Why 32: a slot is 64 B key + 1 B length + 16 B oid, so
 *   a node is ~2.6 KB, in the range of LMDB's and BDB's 4 KB pages. The
 *   tree stays 5 levels deep at 10M keys, which keeps a get to a handful
 *   of cache-missing node visits. The per-insert undo-log cost is the
 *   shifted tail (16 slots on average), and it grows linearly with the
 *   fanout. So 64 would double that cost, and 16 would add a level and
 *   split twice as often, and a split allocates and flushes a whole node.
 *   At 32 these costs balance. (MAXK is a compile-time macro, so other
 *   values can be measured.)
 * - Real B+tree: all entries are in leaves, and leaves are linked left to
 *   right (`next`) for scans. Internal nodes hold separators: key[i]
 *   divides ptr[i] (keys < key[i]) from ptr[i+1] (keys >= key[i]).
 *   Inserts split full leaves (16 | 17) and full internal nodes (16 | up 1
 *   | 16) bottom-up along the recorded path. A root split grows a new
 *   root.
 * - Delete is the full algorithm. After the entry is removed and its value
 *   freed, a non-root node left with fewer than MINK keys first borrows
 *   one entry from its left sibling, or else its right one, if that
 *   sibling has more than MINK (rotating the parent separator for internal
 *   nodes). Otherwise it merges with a sibling: the left node absorbs the
 *   right one, the separator comes down for internal nodes, the leaf chain
 *   is relinked, the emptied node is freed with pmemobj_tx_free, and the
 *   parent loses one separator. This can cascade up. When the root is an
 *   internal node with no keys left, its only child becomes the root and
 *   the old root is freed. The root leaf may be empty.
 * - del first checks, read-only and outside any transaction, that the key
 *   exists. A missing key returns 0 without opening a transaction.
 * - Built with -DPMEMOBJ_PEER_CHECK, every put/del also verifies all tree
 *   invariants (tests only; peer_test was run that way with MAXK 4, 6 and 32).
 *
 * Modes and flushing
 * - libpmemobj has no volatile mode. open(durable = 0) behaves exactly
 *   like durable = 1 (one synced transaction per op). PMEM_NO_FLUSH (skip
 *   cache flushes, keep fences) does exist, but libpmem reads it once,
 *   when the library is loaded. So it cannot be chosen per handle, and
 *   with it pmemobj would no longer be the "strongest durable" baseline.
 *   The harness should report pmemobj's volatile row as equal to its
 *   durable one, or omit it.
 * - On a file that is not on DAX (e.g. /dev/shm or tmpfs), pmemobj asks
 *   libpmem's pmem_is_pmem(), which says no. It then makes every
 *   persist an msync(MS_SYNC) system call (pmem_msync) with no-op drains.
 *   That is not what pmemobj costs on persistent memory. So open() does
 *   setenv("PMEM_IS_PMEM_FORCE", "1", 0) before the first pool is
 *   mapped. libpmem documents this variable as forcing pmem_is_pmem() to
 *   true. pmemobj then persists with cache-line flush instructions
 *   (CLWB / CLFLUSHOPT / CLFLUSH, whichever the CPU has) plus SFENCE, as
 *   on real pmem. Caveats: libpmem reads the variable once, on the
 *   process's first pmem_is_pmem() call (our first pool open), so it must
 *   not have been called before. Because overwrite is 0, a user-set value
 *   wins, and PMEM_IS_PMEM_FORCE=0 measures the msync mode. setenv is not
 *   thread-safe, so open pools from one thread.
 *
 * A handle is not thread-safe: use one thread at a time.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpmemobj.h>
#include <sys/stat.h>

#include "peer.h"

#define LAYOUT "tembo-bench-btree"
#define POOL_FILE "pmemobj.pool"
#define MIB (1024ull * 1024)
#define MIN_POOL (256 * MIB)

#define KEY_MAX 64 /* inline key bytes per slot */
#ifndef MAXK
#define MAXK 32 /* keys per node; see the top comment */
#endif
#define MINK (MAXK / 2) /* minimum keys in a non-root node */
#define MAX_DEPTH 32    /* far more than any tree in a pool can reach */

#define TYPE_NODE 1
#define TYPE_VALUE 2

struct node {
    uint32_t leaf; /* 1 = leaf, 0 = internal */
    uint32_t n;    /* number of keys */
    PMEMoid next;  /* leaves: right sibling (OID_NULL at the end) */
    uint8_t klen[MAXK];
    uint8_t key[MAXK][KEY_MAX];
    /* leaves: ptr[i] is key[i]'s value object, i < n;
     * internal: ptr[0..n] are the children. */
    PMEMoid ptr[MAXK + 1];
};

struct value {
    uint64_t len;
    uint8_t data[];
};

struct root {
    PMEMoid tree; /* the root node; never OID_NULL after open */
};

struct pmemobj_peer_handle {
    PMEMobjpool *pop;
    size_t pool_bytes; /* the pool file's size: its mapping starts at pop */
    struct root *root;
    uint8_t *scratch; /* scan copies each value here ("reads" it) */
    size_t scratch_cap;
    char err[512];
};

/* One step of a root-to-leaf path: an internal node and the child taken. */
struct step {
    struct node *nd;
    unsigned idx;
};

static void set_err(pmemobj_peer_handle *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_err(pmemobj_peer_handle *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof h->err, fmt, ap);
    va_end(ap);
}

static inline struct node *NODE(PMEMoid o) { return pmemobj_direct(o); }
static inline struct value *VALUE(PMEMoid o) { return pmemobj_direct(o); }

/* ---- keys ---------------------------------------------------------------- */

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    if (c != 0)
        return c;
    return (al > bl) - (al < bl);
}

/* First index i < nd->n with key[i] >= k (strict == 0) or key[i] > k
 * (strict == 1); nd->n if none. */
static unsigned search(const struct node *nd, const uint8_t *k, size_t kl, int strict) {
    unsigned lo = 0, hi = nd->n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        int c = key_cmp(nd->key[mid], nd->klen[mid], k, kl);
        if (c < 0 || (strict && c == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int key_eq(const struct node *nd, unsigned i, const uint8_t *k, size_t kl) {
    return nd->klen[i] == kl && (kl == 0 || memcmp(nd->key[i], k, kl) == 0);
}

/*
 * Walk from the root to the leaf that holds (or would hold) k, recording
 * the internal nodes and the child index taken in `path` (may be NULL).
 * Returns NULL if the tree is deeper than MAX_DEPTH (corruption).
 */
static struct node *descend(pmemobj_peer_handle *h, const uint8_t *k, size_t kl,
                            struct step *path, int *depth) {
    struct node *nd = NODE(h->root->tree);
    int d = 0;
    while (!nd->leaf) {
        if (d >= MAX_DEPTH)
            return NULL;
        unsigned i = search(nd, k, kl, 1);
        if (path != NULL) {
            path[d].nd = nd;
            path[d].idx = i;
        }
        d++;
        nd = NODE(nd->ptr[i]);
    }
    if (depth != NULL)
        *depth = d;
    return nd;
}

/* ---- transactional helpers (only inside TX_BEGIN ... TX_END) ------------- */

/*
 * Snapshot [p, p + len) into the undo log before modifying it. On failure
 * pmemobj aborts the transaction and longjmps to TX_ONABORT (the default
 * POBJ_TX_FAILURE_ABORT behaviour), so there is no return code to handle.
 */
static void snap(const void *p, size_t len) {
    if (len > 0)
        (void)pmemobj_tx_add_range_direct(p, len);
}
static void snap_hdr(struct node *nd) { snap(nd, offsetof(struct node, klen)); }
static void snap_keys(struct node *nd, unsigned from, unsigned to) {
    if (to > from) {
        snap(&nd->klen[from], to - from);
        snap(nd->key[from], (size_t)(to - from) * KEY_MAX);
    }
}
static void snap_ptrs(struct node *nd, unsigned from, unsigned to) {
    if (to > from)
        snap(&nd->ptr[from], (size_t)(to - from) * sizeof(PMEMoid));
}

static void set_key(struct node *nd, unsigned i, const uint8_t *k, size_t kl) {
    nd->klen[i] = (uint8_t)kl;
    if (kl > 0)
        memcpy(nd->key[i], k, kl);
}

/* Copy key slot `si` of `src` to slot `di` of `dst` (no snapshot). */
static void copy_key(struct node *dst, unsigned di, const struct node *src, unsigned si) {
    set_key(dst, di, src->key[si], src->klen[si]);
}

/* Move key slots [from, n) of nd by `delta` (+1 or -1), no snapshot. */
static void shift_keys(struct node *nd, unsigned from, unsigned n, int delta) {
    if (n > from) {
        memmove(&nd->klen[from + delta], &nd->klen[from], n - from);
        memmove(nd->key[from + delta], nd->key[from], (size_t)(n - from) * KEY_MAX);
    }
}
static void shift_ptrs(struct node *nd, unsigned from, unsigned n, int delta) {
    if (n > from)
        memmove(&nd->ptr[from + delta], &nd->ptr[from], (size_t)(n - from) * sizeof(PMEMoid));
}

/* A new node: allocated in this transaction, so it needs no snapshot. */
static PMEMoid alloc_node(int leaf) {
    PMEMoid o = pmemobj_tx_alloc(sizeof(struct node), TYPE_NODE);
    struct node *nd = NODE(o);
    nd->leaf = (uint32_t)leaf;
    nd->n = 0;
    nd->next = OID_NULL;
    return o;
}

static PMEMoid alloc_value(const uint8_t *v, size_t vl) {
    PMEMoid o = pmemobj_tx_alloc(sizeof(struct value) + vl, TYPE_VALUE);
    struct value *val = VALUE(o);
    val->len = vl;
    if (vl > 0)
        memcpy(val->data, v, vl); /* flushed by pmemobj at commit */
    return o;
}

/* ---- insert -------------------------------------------------------------- */

/*
 * Insert separator `sk` with right child `right` into the parents on
 * `path`, bottom-up, splitting full internal nodes, and growing a new
 * root if the old root splits.
 */
static void insert_up(pmemobj_peer_handle *h, struct step *path, int depth,
                      const uint8_t *sk, size_t skl, PMEMoid right) {
    uint8_t kbuf[KEY_MAX];
    size_t kl = skl;
    memcpy(kbuf, sk, skl);

    for (int lvl = depth - 1; lvl >= 0; lvl--) {
        struct node *nd = path[lvl].nd;
        unsigned ci = path[lvl].idx, n = nd->n;
        if (n < MAXK) {
            /* key goes to slot ci, its right child to ptr ci+1 */
            snap_hdr(nd);
            snap_keys(nd, ci, n + 1);
            snap_ptrs(nd, ci + 1, n + 2);
            shift_keys(nd, ci, n, 1);
            shift_ptrs(nd, ci + 1, n + 1, 1);
            set_key(nd, ci, kbuf, kl);
            nd->ptr[ci + 1] = right;
            nd->n = n + 1;
            return;
        }

        /* Full: lay out the MAXK+1 keys and MAXK+2 children, then split
         * into left (mid keys), the separator moved up, right (the rest). */
        uint8_t tl[MAXK + 1], tk[MAXK + 1][KEY_MAX];
        PMEMoid tp[MAXK + 2];
        for (unsigned s = 0, d = 0; d < MAXK + 1; d++) {
            if (d == ci) {
                tl[d] = (uint8_t)kl;
                memcpy(tk[d], kbuf, kl);
            } else {
                tl[d] = nd->klen[s];
                memcpy(tk[d], nd->key[s], nd->klen[s]);
                s++;
            }
        }
        for (unsigned s = 0, d = 0; d < MAXK + 2; d++)
            tp[d] = d == ci + 1 ? right : nd->ptr[s++];

        const unsigned mid = (MAXK + 1) / 2;
        PMEMoid no = alloc_node(0);
        struct node *nn = NODE(no);
        for (unsigned d = mid + 1; d < MAXK + 1; d++)
            set_key(nn, d - mid - 1, tk[d], tl[d]);
        for (unsigned d = mid + 1; d < MAXK + 2; d++)
            nn->ptr[d - mid - 1] = tp[d];
        nn->n = MAXK - mid;

        snap_hdr(nd);
        if (ci < mid) { /* only the part from the insertion point changes */
            snap_keys(nd, ci, mid);
            snap_ptrs(nd, ci + 1, mid + 1);
            for (unsigned d = ci; d < mid; d++)
                set_key(nd, d, tk[d], tl[d]);
            for (unsigned d = ci + 1; d <= mid; d++)
                nd->ptr[d] = tp[d];
        }
        nd->n = mid;

        kl = tl[mid];
        memcpy(kbuf, tk[mid], kl);
        right = no;
    }

    /* The root split: a new root with one separator and two children. */
    PMEMoid ro = alloc_node(0);
    struct node *r = NODE(ro);
    set_key(r, 0, kbuf, kl);
    r->ptr[0] = h->root->tree;
    r->ptr[1] = right;
    r->n = 1;
    snap(&h->root->tree, sizeof(PMEMoid));
    h->root->tree = ro;
}

static void tx_put(pmemobj_peer_handle *h, const uint8_t *k, size_t kl, const uint8_t *v,
                   size_t vl) {
    struct step path[MAX_DEPTH];
    int depth = 0;
    struct node *leaf = descend(h, k, kl, path, &depth);
    if (leaf == NULL)
        pmemobj_tx_abort(EUCLEAN);
    unsigned i = search(leaf, k, kl, 0), n = leaf->n;
    PMEMoid vo = alloc_value(v, vl);

    if (i < n && key_eq(leaf, i, k, kl)) { /* overwrite: replace the value */
        snap(&leaf->ptr[i], sizeof(PMEMoid));
        pmemobj_tx_free(leaf->ptr[i]);
        leaf->ptr[i] = vo;
        return;
    }
    if (n < MAXK) {
        snap_hdr(leaf);
        snap_keys(leaf, i, n + 1);
        snap_ptrs(leaf, i, n + 1);
        shift_keys(leaf, i, n, 1);
        shift_ptrs(leaf, i, n, 1);
        set_key(leaf, i, k, kl);
        leaf->ptr[i] = vo;
        leaf->n = n + 1;
        return;
    }

    /* Full leaf: MAXK+1 entries, left keeps L, the new right leaf the rest. */
    uint8_t tl[MAXK + 1], tk[MAXK + 1][KEY_MAX];
    PMEMoid tp[MAXK + 1];
    for (unsigned s = 0, d = 0; d < MAXK + 1; d++) {
        if (d == i) {
            tl[d] = (uint8_t)kl;
            memcpy(tk[d], k, kl);
            tp[d] = vo;
        } else {
            tl[d] = leaf->klen[s];
            memcpy(tk[d], leaf->key[s], leaf->klen[s]);
            tp[d] = leaf->ptr[s];
            s++;
        }
    }
    const unsigned L = (MAXK + 1) / 2;
    PMEMoid no = alloc_node(1);
    struct node *nn = NODE(no);
    for (unsigned d = L; d < MAXK + 1; d++) {
        set_key(nn, d - L, tk[d], tl[d]);
        nn->ptr[d - L] = tp[d];
    }
    nn->n = MAXK + 1 - L;
    nn->next = leaf->next;

    snap_hdr(leaf); /* n and next */
    if (i < L) {
        snap_keys(leaf, i, L);
        snap_ptrs(leaf, i, L);
        for (unsigned d = i; d < L; d++) {
            set_key(leaf, d, tk[d], tl[d]);
            leaf->ptr[d] = tp[d];
        }
    }
    leaf->n = L;
    leaf->next = no;

    insert_up(h, path, depth, nn->key[0], nn->klen[0], no);
}

/* ---- delete -------------------------------------------------------------- */

/* nd (child ci of par) takes the last entry of its left sibling. */
static void borrow_left(struct node *par, unsigned ci, struct node *left, struct node *nd) {
    unsigned n = nd->n, ln = left->n;
    snap_hdr(left);
    snap_hdr(nd);
    snap_keys(par, ci - 1, ci);
    if (nd->leaf) {
        snap_keys(nd, 0, n + 1);
        snap_ptrs(nd, 0, n + 1);
        shift_keys(nd, 0, n, 1);
        shift_ptrs(nd, 0, n, 1);
        copy_key(nd, 0, left, ln - 1);
        nd->ptr[0] = left->ptr[ln - 1];
        copy_key(par, ci - 1, nd, 0);
    } else {
        /* rotate: separator comes down, left's last key goes up */
        snap_keys(nd, 0, n + 1);
        snap_ptrs(nd, 0, n + 2);
        shift_keys(nd, 0, n, 1);
        shift_ptrs(nd, 0, n + 1, 1);
        copy_key(nd, 0, par, ci - 1);
        nd->ptr[0] = left->ptr[ln];
        copy_key(par, ci - 1, left, ln - 1);
    }
    nd->n = n + 1;
    left->n = ln - 1;
}

/* nd (child ci of par) takes the first entry of its right sibling. */
static void borrow_right(struct node *par, unsigned ci, struct node *nd, struct node *right) {
    unsigned n = nd->n, rn = right->n;
    snap_hdr(nd);
    snap_hdr(right);
    snap_keys(par, ci, ci + 1);
    snap_keys(right, 0, rn);
    snap_keys(nd, n, n + 1);
    if (nd->leaf) {
        snap_ptrs(nd, n, n + 1);
        snap_ptrs(right, 0, rn);
        copy_key(nd, n, right, 0);
        nd->ptr[n] = right->ptr[0];
        shift_keys(right, 1, rn, -1);
        shift_ptrs(right, 1, rn, -1);
        copy_key(par, ci, right, 0);
    } else {
        snap_ptrs(nd, n + 1, n + 2);
        snap_ptrs(right, 0, rn + 1);
        copy_key(nd, n, par, ci);
        nd->ptr[n + 1] = right->ptr[0];
        copy_key(par, ci, right, 0);
        shift_keys(right, 1, rn, -1);
        shift_ptrs(right, 1, rn + 1, -1);
    }
    nd->n = n + 1;
    right->n = rn - 1;
}

/* Merge child j+1 of par into child j, drop separator j, free the right node. */
static void merge(struct node *par, unsigned j, struct node *left, struct node *right) {
    unsigned ln = left->n, rn = right->n, pn = par->n;
    PMEMoid ro = par->ptr[j + 1];
    snap_hdr(left); /* n and, for leaves, next */
    if (left->leaf) {
        snap_keys(left, ln, ln + rn);
        snap_ptrs(left, ln, ln + rn);
        for (unsigned s = 0; s < rn; s++) {
            copy_key(left, ln + s, right, s);
            left->ptr[ln + s] = right->ptr[s];
        }
        left->n = ln + rn;
        left->next = right->next;
    } else {
        snap_keys(left, ln, ln + rn + 1);
        snap_ptrs(left, ln + 1, ln + rn + 2);
        copy_key(left, ln, par, j);
        for (unsigned s = 0; s < rn; s++)
            copy_key(left, ln + 1 + s, right, s);
        for (unsigned s = 0; s <= rn; s++)
            left->ptr[ln + 1 + s] = right->ptr[s];
        left->n = ln + rn + 1;
    }
    snap_hdr(par);
    snap_keys(par, j, pn);
    snap_ptrs(par, j + 1, pn + 1);
    shift_keys(par, j + 1, pn, -1);
    shift_ptrs(par, j + 2, pn + 1, -1);
    par->n = pn - 1;
    pmemobj_tx_free(ro);
}

static void tx_del(pmemobj_peer_handle *h, const uint8_t *k, size_t kl) {
    struct step path[MAX_DEPTH];
    int depth = 0;
    struct node *leaf = descend(h, k, kl, path, &depth);
    if (leaf == NULL)
        pmemobj_tx_abort(EUCLEAN);
    unsigned i = search(leaf, k, kl, 0), n = leaf->n;
    if (i >= n || !key_eq(leaf, i, k, kl))
        pmemobj_tx_abort(ENOENT); /* checked before the tx; cannot happen */

    snap_hdr(leaf);
    snap_keys(leaf, i, n);
    snap_ptrs(leaf, i, n);
    pmemobj_tx_free(leaf->ptr[i]);
    shift_keys(leaf, i + 1, n, -1);
    shift_ptrs(leaf, i + 1, n, -1);
    leaf->n = n - 1;

    /* Rebalance bottom-up while a non-root node is under MINK keys. */
    struct node *nd = leaf;
    for (int lvl = depth - 1; lvl >= 0 && nd->n < MINK; lvl--) {
        struct node *par = path[lvl].nd;
        unsigned ci = path[lvl].idx;
        struct node *left = ci > 0 ? NODE(par->ptr[ci - 1]) : NULL;
        struct node *right = ci < par->n ? NODE(par->ptr[ci + 1]) : NULL;
        if (left != NULL && left->n > MINK) {
            borrow_left(par, ci, left, nd);
            return;
        }
        if (right != NULL && right->n > MINK) {
            borrow_right(par, ci, nd, right);
            return;
        }
        if (left != NULL)
            merge(par, ci - 1, left, nd);
        else if (right != NULL)
            merge(par, ci, nd, right);
        else
            pmemobj_tx_abort(EUCLEAN); /* a non-root node always has a sibling */
        nd = par;
    }

    /* An internal root left without separators: its only child becomes root. */
    struct node *r = NODE(h->root->tree);
    if (!r->leaf && r->n == 0) {
        PMEMoid old = h->root->tree;
        snap(&h->root->tree, sizeof(PMEMoid));
        h->root->tree = r->ptr[0];
        pmemobj_tx_free(old);
    }
}

/* ---- invariant check (tests only) ---------------------------------------- */

#ifdef PMEMOBJ_PEER_CHECK
/*
 * Built with -DPMEMOBJ_PEER_CHECK, every put/del then verifies the whole
 * tree: keys sorted and within their parent's separator bounds, every
 * non-root node at least MINK keys, all leaves at one depth, and the leaf
 * chain visiting exactly the leaves in order. O(n) per op: tests only.
 */
struct chk {
    int leaf_depth;
    struct node *expect_leaf; /* next leaf the chain must reach */
    const char *bad;
};

static void chk_node(struct chk *c, PMEMoid o, int depth, int is_root, const uint8_t *lo,
                     size_t lol, const uint8_t *hi, size_t hil) {
    struct node *nd = NODE(o);
    if (c->bad != NULL)
        return;
    if (nd->n > MAXK || (!is_root && nd->n < MINK) || (!nd->leaf && nd->n == 0)) {
        c->bad = "node key count out of range";
        return;
    }
    for (unsigned i = 0; i < nd->n; i++) {
        if (nd->klen[i] > KEY_MAX ||
            (i > 0 && key_cmp(nd->key[i - 1], nd->klen[i - 1], nd->key[i], nd->klen[i]) >= 0) ||
            (lo != NULL && key_cmp(nd->key[i], nd->klen[i], lo, lol) < 0) ||
            (hi != NULL && key_cmp(nd->key[i], nd->klen[i], hi, hil) >= 0)) {
            c->bad = "keys out of order or outside the separator bounds";
            return;
        }
    }
    if (nd->leaf) {
        if (c->leaf_depth < 0)
            c->leaf_depth = depth;
        if (depth != c->leaf_depth)
            c->bad = "leaves at different depths";
        else if (c->expect_leaf != NULL && c->expect_leaf != nd)
            c->bad = "leaf chain does not follow key order";
        else
            c->expect_leaf = NODE(nd->next);
        return;
    }
    for (unsigned i = 0; i <= nd->n; i++)
        chk_node(c, nd->ptr[i], depth + 1, 0, i ? nd->key[i - 1] : lo,
                 i ? nd->klen[i - 1] : lol, i < nd->n ? nd->key[i] : hi,
                 i < nd->n ? nd->klen[i] : hil);
}

static int check_tree(pmemobj_peer_handle *h) {
    struct chk c = {-1, NULL, NULL};
    chk_node(&c, h->root->tree, 0, 1, NULL, 0, NULL, 0);
    if (c.bad == NULL && c.expect_leaf != NULL)
        c.bad = "leaf chain continues past the last leaf";
    if (c.bad != NULL) {
        set_err(h, "pmemobj: tree invariant broken: %s", c.bad);
        return -1;
    }
    return 0;
}
#define CHECK_TREE(h) check_tree(h)
#else
#define CHECK_TREE(h) 0
#endif

/* ---- the peer interface -------------------------------------------------- */

/* Give a fresh pool its empty root leaf; 0 on success. (A function of its
 * own so that no local of open() lives across the transaction's setjmp.) */
static int init_root(pmemobj_peer_handle *h) {
    volatile int failed = 0;
    TX_BEGIN(h->pop) {
        snap(&h->root->tree, sizeof(PMEMoid));
        h->root->tree = alloc_node(1);
    } TX_ONABORT {
        failed = 1;
    } TX_END
    return failed ? -1 : 0;
}

pmemobj_peer_handle *pmemobj_peer_open(const char *dir, int durable, uint64_t size_hint,
                                       char *err, size_t errlen) {
    (void)durable; /* pmemobj has no volatile mode; see the top comment */
    pmemobj_peer_handle *h = calloc(1, sizeof *h);
    char path[4096];
    if (h == NULL || snprintf(path, sizeof path, "%s/%s", dir, POOL_FILE) >= (int)sizeof path) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "pmemobj: %s", h ? "directory path too long" : "out of memory");
        free(h);
        return NULL;
    }

    /* Flush with CPU cache-line flushes, not msync (see the top comment). */
    setenv("PMEM_IS_PMEM_FORCE", "1", 0);

    if (access(path, F_OK) == 0) {
        h->pop = pmemobj_open(path, LAYOUT);
    } else {
        uint64_t size = size_hint > MIN_POOL / 3 ? 3 * size_hint : MIN_POOL;
        h->pop = pmemobj_create(path, LAYOUT, (size_t)size, 0644);
    }
    if (h->pop == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "pmemobj: %s: %s", path, pmemobj_errormsg());
        free(h);
        return NULL;
    }
    PMEMoid ro = pmemobj_root(h->pop, sizeof(struct root));
    if (OID_IS_NULL(ro)) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "pmemobj: root object: %s", pmemobj_errormsg());
        pmemobj_close(h->pop);
        free(h);
        return NULL;
    }
    h->root = pmemobj_direct(ro);
    struct stat st;
    h->pool_bytes = stat(path, &st) == 0 ? (size_t)st.st_size : 0;

    if (OID_IS_NULL(h->root->tree)) {
        if (init_root(h) != 0) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "pmemobj: creating the root leaf: %s",
                         pmemobj_errormsg());
            pmemobj_close(h->pop);
            free(h);
            return NULL;
        }
    }
    return h;
}

int pmemobj_peer_put(pmemobj_peer_handle *h, const uint8_t *k, size_t kl,
                     const uint8_t *v, size_t vl) {
    if (kl > KEY_MAX) {
        set_err(h, "pmemobj: key of %zu bytes is longer than the %d-byte inline key limit",
                kl, KEY_MAX);
        return -1;
    }
    volatile int failed = 0;
    TX_BEGIN(h->pop) {
        tx_put(h, k, kl, v, vl);
    } TX_ONABORT {
        failed = 1;
    } TX_END
    if (failed) {
        set_err(h, "pmemobj: put transaction aborted: %s", pmemobj_errormsg());
        return -1;
    }
    return CHECK_TREE(h);
}

int pmemobj_peer_get(pmemobj_peer_handle *h, const uint8_t *k, size_t kl, uint8_t *buf,
                     size_t cap, size_t *len) {
    if (kl > KEY_MAX)
        return 0; /* such a key can never have been stored */
    struct node *leaf = descend(h, k, kl, NULL, NULL);
    if (leaf == NULL) {
        set_err(h, "pmemobj: tree deeper than %d levels (corrupt?)", MAX_DEPTH);
        return -1;
    }
    unsigned i = search(leaf, k, kl, 0);
    if (i >= leaf->n || !key_eq(leaf, i, k, kl))
        return 0;
    const struct value *val = VALUE(leaf->ptr[i]);
    size_t vl = (size_t)val->len;
    *len = vl;
    size_t ncopy = vl < cap ? vl : cap;
    if (ncopy > 0) /* buf may be NULL when cap is 0 */
        memcpy(buf, val->data, ncopy);
    return 1;
}

int pmemobj_peer_del(pmemobj_peer_handle *h, const uint8_t *k, size_t kl) {
    if (kl > KEY_MAX)
        return 0;
    /* Read-only existence check first: a miss needs no transaction. */
    struct node *leaf = descend(h, k, kl, NULL, NULL);
    if (leaf == NULL) {
        set_err(h, "pmemobj: tree deeper than %d levels (corrupt?)", MAX_DEPTH);
        return -1;
    }
    unsigned i = search(leaf, k, kl, 0);
    if (i >= leaf->n || !key_eq(leaf, i, k, kl))
        return 0;

    volatile int failed = 0;
    TX_BEGIN(h->pop) {
        tx_del(h, k, kl);
    } TX_ONABORT {
        failed = 1;
    } TX_END
    if (failed) {
        set_err(h, "pmemobj: delete transaction aborted: %s", pmemobj_errormsg());
        return -1;
    }
    return CHECK_TREE(h) == 0 ? 1 : -1;
}

int pmemobj_peer_scan(pmemobj_peer_handle *h, const uint8_t *k, size_t kl, size_t n,
                      size_t *visited, uint64_t *bytes) {
    *visited = 0;
    *bytes = 0;
    if (n == 0)
        return 0;
    /* A longer-than-inline start key still orders correctly via key_cmp. */
    struct node *leaf = descend(h, k, kl, NULL, NULL);
    if (leaf == NULL) {
        set_err(h, "pmemobj: tree deeper than %d levels (corrupt?)", MAX_DEPTH);
        return -1;
    }
    unsigned i = search(leaf, k, kl, 0);
    size_t cnt = 0;
    uint64_t sum = 0;
    while (cnt < n) {
        if (i >= leaf->n) {
            if (OID_IS_NULL(leaf->next))
                break;
            leaf = NODE(leaf->next);
            i = 0;
            continue;
        }
        const struct value *val = VALUE(leaf->ptr[i]);
        size_t vl = (size_t)val->len;
        if (peer_grow(&h->scratch, &h->scratch_cap, vl) != 0) {
            set_err(h, "pmemobj: out of memory for a %zu-byte value", vl);
            *visited = cnt;
            *bytes = sum;
            return -1;
        }
        memcpy(h->scratch, val->data, vl);
        cnt++;
        sum += vl;
        i++;
    }
    *visited = cnt;
    *bytes = sum;
    return 0;
}

const char *pmemobj_peer_error(pmemobj_peer_handle *h) { return h->err; }

void pmemobj_peer_close(pmemobj_peer_handle *h) {
    if (h == NULL)
        return;
    /* Every transaction was persisted at commit; closing just unmaps. */
    pmemobj_close(h->pop);
    free(h->scratch);
    free(h);
}

/* The pool's mapping (pmemobj maps the whole file at the pool handle), for
 * tembo bench's write heat map, which watches which pages each operation
 * writes. 0 = ok, -1 = unknown size. */
int pmemobj_peer_range(pmemobj_peer_handle *h, void **base, size_t *len) {
    if (h->pool_bytes == 0) {
        set_err(h, "pmemobj: the pool's size is unknown");
        return -1;
    }
    *base = (void *)h->pop;
    *len = h->pool_bytes;
    return 0;
}
