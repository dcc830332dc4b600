#!/usr/bin/env python3
"""kill -9 crash test for a Redis-compatible server with durable writes.

    python3 crash_kill9.py --server-cmd 'CMD ... {port} ...' --rounds 50 --seed 1

The server command is run by the shell in its own process group; `{port}` is
replaced by a free loopback port (a new one at each start) and `{dir}` by a
directory that stays the same for the whole run (created here unless --dir is
given). Each round:

  1. 4 client threads write for a random 0.2-1.5 s: SET k<i> <unique value>,
     INCR of a per-thread and a shared counter, HSET into a per-thread hash,
     RPUSH to a per-thread and a shared list, and MULTI/EXEC transactions that
     set the 5 keys g<n>:0..4 to one token and INCR a per-thread tx counter.
     Every write whose reply arrived is ACKNOWLEDGED; a write that was sent
     (or being sent) when the connection died is IN FLIGHT.
  2. At a random moment during the load the whole process group gets SIGKILL.
     (With --recovery-kill-prob, the restarted server is sometimes killed
     again while it recovers, before it has answered anything.)
  3. The server is restarted with the same command and everything ever
     written is checked against the model:
       - each key / hash field / group holds its last acknowledged value, or
         the value of the in-flight write issued after it (never older, never
         a value that was not written);
       - counters: acked <= value <= acked + in-flight (and the shared counter
         is >= every value an acknowledged INCR returned);
       - each transaction group is all-or-nothing: the 5 keys hold the same
         token and the transaction counter agrees with it;
       - lists hold exactly the acknowledged pushes in order, plus possibly the
         in-flight one; the shared list keeps each thread's pushes in order;
       - DBSIZE equals the number of keys the model expects.
     The model then adopts the recovered state and the next round goes on
     writing to the same data, so data from round 1 is checked after every
     later crash.

Exit status: 0 when every round passed, 1 on any violation, 2 when the server
could not be started or answered with errors.
"""

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

THREADS = 4
KEYS_PER_THREAD = 400
FIELDS_PER_THREAD = 100
GROUPS_PER_THREAD = 16


# --------------------------------------------------------------------------
# minimal RESP2 client (no hidden retries: we must know what was sent)
# --------------------------------------------------------------------------


class ServerError(Exception):
    pass


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, password=None, timeout=30.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        if password:
            self.call("AUTH", password)

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def send(self, data):
        self.s.sendall(data)

    def call(self, *args):
        self.send(encode(*args))
        return self.read()

    def _fill(self):
        d = self.s.recv(1 << 16)
        if not d:
            raise ConnectionError("connection closed by server")
        self.buf += d

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2 :]
                return line
            self._fill()

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return ServerError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2 :]
            return data.decode()
        if t == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        raise ServerError("unexpected reply type %r" % line[:50])


def check(reply):
    if isinstance(reply, ServerError):
        raise reply
    return reply


# --------------------------------------------------------------------------
# server process control
# --------------------------------------------------------------------------


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, template, datadir, password, log_path, ready_timeout):
        self.template = template
        self.datadir = datadir
        self.password = password
        self.log_path = log_path
        self.ready_timeout = ready_timeout
        self.proc = None
        self.port = None
        self.starts = 0

    def spawn(self):
        self.port = free_port()
        cmd = self.template.replace("{port}", str(self.port)).replace("{dir}", self.datadir)
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(b"\n===== start %d: %s\n" % (self.starts, cmd.encode()))
        log.flush()
        self.proc = subprocess.Popen(
            cmd,
            shell=True,
            cwd=self.datadir,  # files a server writes to its cwd stay in the data dir
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: killpg gets everything
        )
        log.close()

    def wait_ready(self):
        t0 = time.time()
        deadline = t0 + self.ready_timeout
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise HarnessError(
                    "server exited with status %s before answering PING" % self.proc.returncode
                )
            try:
                c = Conn(self.port, self.password, timeout=5)
                try:
                    if c.call("PING") == "PONG":
                        return time.time() - t0
                finally:
                    c.close()
            except (OSError, ConnectionError, ServerError) as e:
                last = e
            time.sleep(0.01)
        raise HarnessError(
            "server did not answer PING within %.0f s (last error: %s)" % (self.ready_timeout, last)
        )

    def start(self):
        self.spawn()
        return self.wait_ready()

    def kill9(self):
        if self.proc is None:
            return
        pgid = self.proc.pid
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        # Wait until every process of the group is dead (it holds the pool
        # lock and the port). Zombies are dead: they hold nothing, and may
        # wait a while for an init that reaps slowly.
        deadline = time.time() + 10
        while time.time() < deadline and group_alive(pgid):
            time.sleep(0.005)
        self.proc = None

    def log_tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""


class HarnessError(Exception):
    pass


def _stat_fields(path):
    """state, ppid, pgrp, ... of a /proc stat file (None if it is gone)."""
    try:
        with open(path, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # pid (comm) state ppid pgrp ...; comm may contain spaces and ')'
    return stat[stat.rfind(b")") + 2 :].split()


def group_alive(pgid):
    """True while a process of group `pgid` is alive (zombies do not count).

    A process whose main thread is already a zombie may still have other
    threads exiting, and they hold its descriptors (and so the pool's
    flock) until the last one is gone: every thread is looked at.
    """
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fields = _stat_fields("/proc/%s/stat" % pid)
        if not fields or len(fields) <= 2 or int(fields[2]) != pgid:
            continue
        try:
            tids = os.listdir("/proc/%s/task" % pid)
        except OSError:
            tids = [pid]
        for tid in tids:
            t = _stat_fields("/proc/%s/task/%s/stat" % (pid, tid))
            if t and t[0] not in (b"Z", b"X"):
                return True
    return False


# --------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------


class Track:
    """One register (a key, a hash field, a transaction group)."""

    __slots__ = ("acked", "inflight")

    def __init__(self):
        self.acked = None  # None: no acknowledged value, so absent is allowed
        self.inflight = []  # values sent after `acked` whose outcome is unknown

    def ack(self, v):
        self.acked = v
        self.inflight = []

    def allowed(self):
        return [self.acked] + self.inflight


class Model:
    def __init__(self):
        self.keys = {}  # "k<i>" -> Track
        self.fields = [dict() for _ in range(THREADS)]  # h:<t> field -> Track
        self.groups = {}  # n -> Track (token)
        self.ctr = [0] * THREADS  # per-thread counter: acknowledged value
        self.ctr_inflight = [0] * THREADS
        self.shared = 0  # shared counter: value at round start + acked INCRs
        self.shared_inflight = 0
        self.shared_max_reply = 0
        self.tx = [0] * THREADS  # committed transactions per thread
        self.tx_inflight = [None] * THREADS  # group n of an in-flight MULTI
        self.lists = [0] * THREADS  # per-thread list length (acked pushes)
        self.list_inflight = [0] * THREADS
        self.shared_list = [0] * THREADS  # this thread's pushes to list:all
        self.shared_list_inflight = [0] * THREADS
        self.lock = threading.Lock()


class Stats:
    def __init__(self):
        self.acked = 0
        self.inflight = 0
        self.inflight_applied = 0
        self.errors = []


def worker(t, port, password, model, stats, rnd, round_no, start_evt, ready_evt, result):
    """Write until the connection dies. Ops touch only this thread's keys,
    except INCR ctr:all and RPUSH list:all."""
    try:
        c = Conn(port, password, timeout=30)
    except OSError as e:
        result[t] = ("connect", str(e))
        ready_evt.release()
        return
    ready_evt.release()
    start_evt.wait()
    seq = 0
    acked = 0
    m = model
    try:
        while True:
            seq += 1
            op = rnd.random()
            if op < 0.35:
                j = rnd.randrange(KEYS_PER_THREAD)
                key = "k%d" % (t + THREADS * j)
                pad = "x" * (rnd.randrange(2000) if rnd.random() < 0.1 else rnd.randrange(40))
                val = "v%d.%d.%d.%s" % (round_no, t, seq, pad)
                tr = m.keys.setdefault(key, Track())
                tr.inflight.append(val)
                rep = c.call("SET", key, val)
                check(rep)
                tr.ack(val)
            elif op < 0.45:
                m.ctr_inflight[t] = 1
                rep = check(c.call("INCR", "ctr:%d" % t))
                if rep != m.ctr[t] + 1:
                    stats.errors.append(
                        "thread %d: INCR ctr:%d returned %r, expected %d" % (t, t, rep, m.ctr[t] + 1)
                    )
                m.ctr[t] = rep
                m.ctr_inflight[t] = 0
            elif op < 0.55:
                with m.lock:
                    m.shared_inflight += 1
                rep = check(c.call("INCR", "ctr:all"))
                with m.lock:
                    m.shared_inflight -= 1
                    m.shared += 1
                    m.shared_max_reply = max(m.shared_max_reply, rep)
            elif op < 0.70:
                f = "f%d" % rnd.randrange(FIELDS_PER_THREAD)
                val = "h%d.%d.%d" % (round_no, t, seq)
                tr = m.fields[t].setdefault(f, Track())
                tr.inflight.append(val)
                rep = check(c.call("HSET", "h:%d" % t, f, val))
                if rep not in (0, 1):
                    stats.errors.append("HSET returned %r" % (rep,))
                tr.ack(val)
            elif op < 0.78:
                n = m.lists[t]
                m.list_inflight[t] = 1
                rep = check(c.call("RPUSH", "list:%d" % t, str(n)))
                if rep != n + 1:
                    stats.errors.append(
                        "thread %d: RPUSH list:%d returned %r, expected %d" % (t, t, rep, n + 1)
                    )
                m.lists[t] = n + 1
                m.list_inflight[t] = 0
            elif op < 0.85:
                n = m.shared_list[t]
                m.shared_list_inflight[t] = 1
                check(c.call("RPUSH", "list:all", "%d:%d" % (t, n)))
                m.shared_list[t] = n + 1
                m.shared_list_inflight[t] = 0
            else:
                g = t * GROUPS_PER_THREAD + rnd.randrange(GROUPS_PER_THREAD)
                tok = "t%d.%d.%d" % (round_no, t, seq)
                tr = m.groups.setdefault(g, Track())
                tr.inflight.append(tok)
                m.tx_inflight[t] = g
                cmds = [encode("MULTI")]
                cmds += [encode("SET", "g%d:%d" % (g, i), tok) for i in range(5)]
                cmds.append(encode("INCR", "txcount:%d" % t))
                cmds.append(encode("EXEC"))
                c.send(b"".join(cmds))
                replies = [c.read() for _ in range(8)]
                for x in replies[:7]:
                    check(x)
                res = replies[7]
                check(res)
                if not isinstance(res, list) or len(res) != 6 or res[5] != m.tx[t] + 1:
                    stats.errors.append("thread %d: EXEC returned %r" % (t, res))
                tr.ack(tok)
                m.tx[t] += 1
                m.tx_inflight[t] = None
            acked += 1
    except (OSError, ConnectionError):
        result[t] = ("died", acked)
    except ServerError as e:
        stats.errors.append("thread %d: server error reply: %s" % (t, e))
        result[t] = ("error", acked)
    finally:
        c.close()
        with m.lock:
            stats.acked += acked


# --------------------------------------------------------------------------
# verification
# --------------------------------------------------------------------------


def verify(port, password, model, stats, round_no):
    """Compare the recovered server with the model; adopt the recovered state.
    Returns a list of violations."""
    bad = []
    c = Conn(port, password, timeout=60)
    expected_keys = 0
    m = model
    try:
        # --- plain keys -----------------------------------------------------
        names = sorted(m.keys)
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            vals = check(c.call("MGET", *chunk))
            for k, v in zip(chunk, vals):
                tr = m.keys[k]
                allowed = tr.allowed()
                if v not in allowed:
                    bad.append(
                        "key %s = %s; allowed %s" % (k, short(v), [short(a) for a in allowed])
                    )
                if tr.inflight:
                    stats.inflight += 1
                    if v is not None and v != tr.acked:
                        stats.inflight_applied += 1
                tr.ack(v)
                if v is not None:
                    expected_keys += 1
        # --- hashes ---------------------------------------------------------
        for t in range(THREADS):
            got = check(c.call("HGETALL", "h:%d" % t)) or []
            got = dict(zip(got[0::2], got[1::2]))
            fields = m.fields[t]
            for f in set(got) - set(fields):
                bad.append("hash h:%d has unexpected field %s" % (t, f))
            for f, tr in fields.items():
                v = got.get(f)
                if v not in tr.allowed():
                    bad.append("hash h:%d field %s = %s; allowed %s" % (t, f, short(v), tr.allowed()))
                if tr.inflight:
                    stats.inflight += 1
                    if v is not None and v != tr.acked:
                        stats.inflight_applied += 1
                tr.ack(v)
            if got:
                expected_keys += 1
        # --- counters -------------------------------------------------------
        for t in range(THREADS):
            v = check(c.call("GET", "ctr:%d" % t))
            v = int(v) if v is not None else 0
            lo, hi = m.ctr[t], m.ctr[t] + m.ctr_inflight[t]
            if not lo <= v <= hi:
                bad.append("counter ctr:%d = %d; expected %d..%d" % (t, v, lo, hi))
            if m.ctr_inflight[t]:
                stats.inflight += 1
                stats.inflight_applied += v > m.ctr[t]
            m.ctr[t] = v
            m.ctr_inflight[t] = 0
            if v:
                expected_keys += 1
        v = check(c.call("GET", "ctr:all"))
        v = int(v) if v is not None else 0
        lo, hi = m.shared, m.shared + m.shared_inflight
        if not lo <= v <= hi:
            bad.append("counter ctr:all = %d; expected %d..%d" % (v, lo, hi))
        if v < m.shared_max_reply:
            bad.append(
                "counter ctr:all = %d but an acknowledged INCR returned %d" % (v, m.shared_max_reply)
            )
        stats.inflight += m.shared_inflight
        stats.inflight_applied += max(0, v - m.shared)
        m.shared = v
        m.shared_inflight = 0
        m.shared_max_reply = v
        if v:
            expected_keys += 1
        # --- transactions ---------------------------------------------------
        for g in sorted(m.groups):
            tr = m.groups[g]
            vals = check(c.call("MGET", *["g%d:%d" % (g, i) for i in range(5)]))
            if len(set(vals)) != 1:
                bad.append("group g%d not all-or-nothing: %s" % (g, vals))
                continue
            v = vals[0]
            if v not in tr.allowed():
                bad.append("group g%d = %s; allowed %s" % (g, v, tr.allowed()))
            if v is not None:
                expected_keys += 5
        for t in range(THREADS):
            v = check(c.call("GET", "txcount:%d" % t))
            v = int(v) if v is not None else 0
            g = m.tx_inflight[t]
            if g is not None:
                stats.inflight += 1
                tr = m.groups[g]
                gv = check(c.call("GET", "g%d:0" % g))
                applied = tr.inflight and gv == tr.inflight[-1] and gv != tr.acked
                want = m.tx[t] + (1 if applied else 0)
                stats.inflight_applied += 1 if applied else 0
                if v != want:
                    bad.append(
                        "txcount:%d = %d but group g%d says the in-flight MULTI %s (want %d)"
                        % (t, v, g, "applied" if applied else "did not apply", want)
                    )
            elif v != m.tx[t]:
                bad.append("txcount:%d = %d; expected %d" % (t, v, m.tx[t]))
            m.tx[t] = v
            m.tx_inflight[t] = None
            if v:
                expected_keys += 1
        for g, tr in m.groups.items():
            v = check(c.call("GET", "g%d:0" % g))
            tr.ack(v)
        # --- lists ----------------------------------------------------------
        for t in range(THREADS):
            got = check(c.call("LRANGE", "list:%d" % t, "0", "-1")) or []
            n = len(got)
            lo, hi = m.lists[t], m.lists[t] + m.list_inflight[t]
            if not lo <= n <= hi:
                bad.append("list:%d has %d elements; expected %d..%d" % (t, n, lo, hi))
            if got != [str(i) for i in range(n)]:
                first = next((i for i, x in enumerate(got) if x != str(i)), None)
                bad.append("list:%d content wrong at index %s: %s" % (t, first, got[first : first + 5]))
            if m.list_inflight[t]:
                stats.inflight += 1
                stats.inflight_applied += n > m.lists[t]
            m.lists[t] = n
            m.list_inflight[t] = 0
            if n:
                expected_keys += 1
        got = check(c.call("LRANGE", "list:all", "0", "-1")) or []
        per = [[] for _ in range(THREADS)]
        for x in got:
            try:
                a, b = x.split(":")
                per[int(a)].append(int(b))
            except (ValueError, IndexError):
                bad.append("list:all has a foreign element %r" % (x,))
        for t in range(THREADS):
            n = len(per[t])
            lo, hi = m.shared_list[t], m.shared_list[t] + m.shared_list_inflight[t]
            if not lo <= n <= hi:
                bad.append("list:all holds %d pushes of thread %d; expected %d..%d" % (n, t, lo, hi))
            if per[t] != list(range(n)):
                bad.append("list:all: thread %d pushes out of order or missing" % t)
            if m.shared_list_inflight[t]:
                stats.inflight += 1
                stats.inflight_applied += n > m.shared_list[t]
            m.shared_list[t] = n
            m.shared_list_inflight[t] = 0
        if got:
            expected_keys += 1
        # --- nothing else ---------------------------------------------------
        size = check(c.call("DBSIZE"))
        if size != expected_keys:
            bad.append("DBSIZE = %d; the model expects %d keys" % (size, expected_keys))
    finally:
        c.close()
    return bad


def short(v):
    if v is None:
        return "(absent)"
    return v if len(v) <= 40 else v[:37] + "..."


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-cmd", required=True, help="shell command; {port} and {dir} are substituted")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dir", default=None, help="data directory for {dir} (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory and log")
    ap.add_argument("--password", default=os.environ.get("TEMBO_PASSWORD") or None)
    ap.add_argument("--min-load", type=float, default=0.2)
    ap.add_argument("--max-load", type=float, default=1.5)
    ap.add_argument("--ready-timeout", type=float, default=120.0, help="seconds to wait for PING")
    ap.add_argument(
        "--recovery-kill-prob",
        type=float,
        default=0.2,
        help="chance per round of a second kill -9 while the server recovers",
    )
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rnd = random.Random(seed)
    own_dir = args.dir is None
    datadir = args.dir or tempfile.mkdtemp(prefix="tembo-crash-")
    os.makedirs(datadir, exist_ok=True)
    if own_dir:
        log_path = os.path.join(datadir, "server.log")
    else:
        fd, log_path = tempfile.mkstemp(prefix="tembo-crash-", suffix=".log")
        os.close(fd)
    print("crash_kill9: seed %d, %d rounds, data dir %s" % (seed, args.rounds, datadir), flush=True)
    print("crash_kill9: server command: %s" % args.server_cmd, flush=True)

    srv = Server(args.server_cmd, datadir, args.password, log_path, args.ready_timeout)
    model = Model()
    total = Stats()
    ready_times = []
    violations = []
    status = 0
    t_start = time.time()
    try:
        ready_times.append(srv.start())
        c = Conn(srv.port, args.password)
        size = check(c.call("DBSIZE"))
        c.close()
        if size != 0:
            raise HarnessError("the server starts with %d keys; point it at an empty data directory" % size)
        for rno in range(1, args.rounds + 1):
            stats = Stats()
            load = rnd.uniform(args.min_load, args.max_load)
            start_evt = threading.Event()
            ready_evt = threading.Semaphore(0)
            result = [None] * THREADS
            threads = [
                threading.Thread(
                    target=worker,
                    args=(t, srv.port, args.password, model, stats,
                          random.Random(rnd.randrange(1 << 62)), rno, start_evt, ready_evt, result),
                    daemon=True,
                )
                for t in range(THREADS)
            ]
            for th in threads:
                th.start()
            for _ in threads:
                ready_evt.acquire()
            for t, res in enumerate(result):
                if res and res[0] == "connect":
                    raise HarnessError("thread %d could not connect: %s" % (t, res[1]))
            start_evt.set()
            time.sleep(load)
            srv.kill9()
            for th in threads:
                th.join(60)
                if th.is_alive():
                    raise HarnessError("a client thread hung after the kill")
            if stats.errors:
                violations += ["round %d: %s" % (rno, e) for e in stats.errors]
            extra = ""
            if rnd.random() < args.recovery_kill_prob:
                # kill it again during recovery, before it answers
                srv.spawn()
                time.sleep(rnd.uniform(0.0, 0.05))
                srv.kill9()
                extra = " (+kill during recovery)"
            ready = srv.start()
            ready_times.append(ready)
            t0 = time.time()
            bad = verify(srv.port, args.password, model, stats, rno)
            vt = time.time() - t0
            total.acked += stats.acked
            total.inflight += stats.inflight
            total.inflight_applied += stats.inflight_applied
            if not args.quiet:
                print(
                    "round %2d: load %.2f s, %6d acked writes, %d in flight (%d applied), "
                    "ready after %.3f s%s, verify %.2f s: %s"
                    % (rno, load, stats.acked, stats.inflight, stats.inflight_applied,
                       ready, extra, vt, "OK" if not bad else "%d VIOLATIONS" % len(bad)),
                    flush=True,
                )
            for b in bad[:30]:
                print("  VIOLATION: %s" % b, flush=True)
            if len(bad) > 30:
                print("  ... and %d more" % (len(bad) - 30), flush=True)
            violations += ["round %d: %s" % (rno, b) for b in bad]
            if len(violations) > 200:
                print("too many violations, stopping", flush=True)
                break
        if violations:
            status = 1
    except HarnessError as e:
        print("crash_kill9: HARNESS ERROR: %s" % e, flush=True)
        print("---- server log tail ----\n%s\n-------------------------" % srv.log_tail(), flush=True)
        status = 2
    finally:
        srv.kill9()
    elapsed = time.time() - t_start
    rt = sorted(ready_times)
    print("crash_kill9 summary:")
    print("  seed %d, rounds run: %d, server starts: %d, time %.1f s" % (seed, args.rounds, srv.starts, elapsed))
    print("  acknowledged writes: %d, in flight at kills: %d (applied: %d)"
          % (total.acked, total.inflight, total.inflight_applied))
    if rt:
        print("  time to first PING after start: min %.3f s, median %.3f s, max %.3f s"
              % (rt[0], rt[len(rt) // 2], rt[-1]))
    print("  keys tracked: %d, groups: %d, committed transactions: %d"
          % (len(model.keys), len(model.groups), sum(model.tx)))
    if violations:
        print("  VIOLATIONS: %d (first ones below)" % len(violations))
        for v in violations[:20]:
            print("    " + v)
        print("---- server log tail ----\n%s\n-------------------------" % srv.log_tail())
    print("crash_kill9: %s" % ("PASS" if status == 0 else "FAIL"), flush=True)
    if status == 0 and not args.keep:
        if own_dir:
            shutil.rmtree(datadir, ignore_errors=True)
        elif os.path.exists(log_path):
            os.unlink(log_path)
    else:
        print("crash_kill9: data dir kept: %s, server log: %s" % (datadir, log_path))
    return status


if __name__ == "__main__":
    sys.exit(main())
