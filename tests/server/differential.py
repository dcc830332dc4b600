#!/usr/bin/env python3
"""Differential test: Tembo's replies against a real redis-server's.

    python3 tests/server/differential.py --tembo target/debug/tembo --seeds 40
    python3 tests/server/differential.py --tembo ... --seed 17 --proto 3 -v   # one sequence, verbose

Starts a `redis-server` (no persistence, its dir in a temporary folder) and a
`tembo serve` (pool under /dev/shm when it is writable), both on free loopback
ports, and sends the same seeded random command sequences to both over raw
RESP (a tiny client of its own: no response callbacks, so what is compared is
what the servers sent, errors included — error replies are compared whole,
code word and message). A share of the sequences runs in RESP3 (`HELLO 3`).

The generator covers the command families Tembo implements (strings, keys
with the EXPIRE family, hashes, lists, sets, sorted sets, MULTI/EXEC/WATCH,
wrong types, wrong arity, bad numbers) on a small key space, so that commands
keep hitting keys of other types, with small member spaces. Replies that are
legitimately random or time-dependent are normalized:

  - unordered replies (SMEMBERS, HKEYS, HGETALL, KEYS, SINTER…) are sorted,
    except SMEMBERS, HKEYS, HVALS and HGETALL of a key the reference holds
    as a listpack or an intset, whose order (insertion; numeric) must match;
  - TTL/PTTL are compared within a tolerance;
  - SCAN/HSCAN/SSCAN/ZSCAN are run to the end and the *set* of what they
    returned is compared, never cursors;
  - SRANDMEMBER/HRANDFIELD/ZRANDMEMBER/SPOP/RANDOMKEY are checked for their
    size and that what they returned belongs to the key (as the reference
    held it, with its value or score);
    after an SPOP the popped key is copied from Redis to Tembo, so both go
    on from the same state.

Every few dozen commands, and at the end of each sequence, the whole key space
is compared (type, contents, whether a TTL is set). On the first mismatch of a
sequence the sequence stops (the states may have diverged); the mismatch is
reported with its seed and protocol, the history is minimized by replaying
shorter histories on flushed servers, and the commands that reproduce it are
printed as redis-cli lines.

DUMP / RESTORE is checked across the servers: once at the start for values
in each of Redis's encodings, and at the end of each sequence for every key,
each server restores the other's payload, which must read back as the key.

Not compared, on purpose: the commands Tembo does not implement (README,
"The server": scripting, streams, ...), pub/sub and the blocking commands
(BLPOP, BZPOPMIN...: their waiting is timing; tests/server/test_commands.py
covers them), and INFO, OBJECT ENCODING/FREQ/IDLETIME, DEBUG, CLIENT, CONFIG,
COMMAND DOCS, TIME, HELLO's server map, whose contents are documented to
differ. COMMAND INFO and COMMAND GETKEYSANDFLAGS are compared once, before
the sequences (`command_table_check`), and so are the fixed calls of
`fixed_replies_check` (subcommand arity errors, CONFIG SET's number errors,
OBJECT ENCODING of sets).

Exit status: 0 when nothing differed, 1 on a mismatch, 2 when a server could
not be started.
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
import time

# --------------------------------------------------------------------------
# tiny RESP2/RESP3 client
# --------------------------------------------------------------------------


class ProtocolError(Exception):
    pass


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """One connection. Replies are tagged tuples, so that RESP2 and RESP3
    types stay apart: ("+", str), ("-", str), (":", int), ("$", bytes),
    ("nil",), ("*", tuple), ("nilarr",), ("%", tuple of pairs), ("~", tuple),
    (",", str), ("null",), ("#", bool), ("=", bytes), ("(", str),
    (">", tuple)."""

    def __init__(self, port, timeout=10.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def close(self):
        try:
            self.f.close()
            self.s.close()
        except OSError:
            pass

    def call(self, args):
        self.s.sendall(encode(args))
        return self.read()

    def _line(self):
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise ProtocolError("connection closed or bad line %r" % line)
        return line[:-2]

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return ("+", rest.decode("utf-8", "replace"))
        if t == b"-":
            return ("-", rest.decode("utf-8", "replace"))
        if t == b":":
            return (":", int(rest))
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return ("nil",)
            data = self.f.read(n + 2)
            if len(data) != n + 2:
                raise ProtocolError("short bulk")
            return (t.decode(), data[:-2])
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return ("nilarr",)
            return (t.decode(), tuple(self.read() for _ in range(n)))
        if t == b"%":
            n = int(rest)
            return ("%", tuple((self.read(), self.read()) for _ in range(n)))
        if t == b"|":  # attribute: read and ignore, then the reply itself
            n = int(rest)
            for _ in range(2 * n):
                self.read()
            return self.read()
        if t == b",":
            return (",", rest.decode())
        if t == b"_":
            return ("null",)
        if t == b"#":
            return ("#", rest == b"t")
        if t == b"(":
            return ("(", rest.decode())
        raise ProtocolError("unknown reply type %r" % line)


def show(reply):
    """A compact text for a reply."""
    t = reply[0]
    if t in ("+", "-", ":", ",", "(", "#"):
        return "%s%s" % (t, reply[1])
    if t in ("$", "="):
        return repr(reply[1])[1:]
    if t in ("nil", "nilarr", "null"):
        return t
    if t == "%":
        return "{" + ", ".join("%s: %s" % (show(k), show(v)) for k, v in reply[1]) + "}"
    if t in ("*", "~", ">"):
        o, c = {"*": "[]", "~": "{}", ">": "<>"}[t]
        return o + ", ".join(show(x) for x in reply[1]) + c
    if t == "scan":
        return "scan:{" + ", ".join(show(x) if isinstance(x[0], str) else "(%s, %s)" % (show(x[0]), show(x[1]))
                                    for x in reply[1]) + "}"
    return repr(reply)


def quote(arg):
    """An argument as redis-cli reads it."""
    s = arg if isinstance(arg, str) else arg.decode("latin-1")
    if s and all(c.isalnum() or c in "-+_.:()[]*?^!@$%&/<>=,;{}~" for c in s):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace(
        "\x00", "\\x00") + '"'


def cmdline(args):
    return " ".join(quote(a) for a in args)


# --------------------------------------------------------------------------
# servers
# --------------------------------------------------------------------------


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, name, argv, port, cwd, log):
        self.name, self.port = name, port
        self.logf = open(log, "ab")
        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s before answering (log: %s)" % (name, self.proc.returncode, log))
            try:
                c = Conn(port, timeout=5)
                ok = c.call(["PING"]) == ("+", "PONG")
                c.close()
                if ok:
                    break
            except (OSError, ProtocolError):
                pass
            if time.time() > deadline:
                raise RuntimeError("%s did not answer PING within 60 s" % name)
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


def start_servers(args, work):
    rport = free_port()
    tport = free_port()
    while tport == rport:
        tport = free_port()
    rdir = os.path.join(work, "redis")
    tdir = os.path.join(work, "tembo")
    os.makedirs(rdir)
    os.makedirs(tdir)
    redis = Server(
        "redis-server",
        [args.redis_server, "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", rdir, "--databases", "16"],
        rport,
        rdir,
        os.path.join(work, "redis.log"),
    )
    try:
        tembo = Server(
            "tembo",
            [args.tembo, "serve", "--bind", "127.0.0.1", "--port", str(tport), "--pool",
             os.path.join(tdir, "tembo.pool")],
            tport,
            tdir,
            os.path.join(work, "tembo.log"),
        )
    except Exception:
        redis.stop()
        raise
    return redis, tembo


# --------------------------------------------------------------------------
# the generator
# --------------------------------------------------------------------------

KEYS = ["k0", "k1", "k2", "k3", "k4", "k5"]
MEMBERS = ["a", "b", "c", "d", "e", "1", "2", "-1", "10", "1.5", "A", ""]
VALUES = ["", "v", "hello", "0", "1", "-5", "10", "007", "3.5", "-0", "1e3", "abc", "9223372036854775807",
          "-9223372036854775808", "0.1", " 1", "inf", "x" * 40, "a b", "x\r\ny", "\x00"]
INT_EDGE = ["9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
            "abc", "", "1.5", "01", "+1", "-0", " 1", "1 ", "0x10", "4294967296", "2147483648", "-2147483649"]
FLOAT_EDGE = ["1e300", "-1e300", "1e-300", "inf", "-inf", "+inf", "nan", "abc", "", "-0", "1e400", ".5",
              "5.", "0x10", " 1", "1 ", "3.14159", "1e17", "123456789.123", "1.1", "0.1", "-2.5",
              "1e-5", "1e-4", "100000000000000000000", "2.5e-7", "Infinity", "-infinity", "1.7976931348623157e308"]
SCORES = ["0", "1", "2", "-1", "1.5", "-0", "+inf", "-inf", "1e300", "0.1", "3.0", "1e-5", "10", "2.5", "1e17",
          "123456789.123", "-1e-7"]
SCORE_BAD = ["nan", "abc", "", "(1", "1e", "--1"]
SCORE_RANGE = ["-inf", "+inf", "inf", "(1", "1", "(-inf", "(+inf", "2.5", "(2.5", "0", "-1", "(0", "10",
               "1e300", "abc", "(", "[1", "(abc", "1.5", "-0"]
LEX_RANGE = ["-", "+", "[a", "(a", "[c", "(c", "[e", "(e", "[", "(", "[1", "(10", "a", "", "[A", "(b", "[d"]
PATTERNS = ["*", "k*", "k[0-2]", "k?", "*1", "a*", "[ab]", "?", "*[^a]*", "k\\*", "", "[a-c]", "*e*"]
TYPES = ["string", "hash", "list", "set", "zset", "stream", "STRING", "none", "foo"]
COUNTS = ["1", "3", "100", "0", "-1", "abc"]


class Gen:
    def __init__(self, rng, now_ms, zfocus=False, hgfocus=False):
        self.r = rng
        self.now_ms = now_ms
        # Mostly sorted sets and sets (a quarter of the seeds): the sorted-set
        # commands that read several keys then meet sorted sets and sets far
        # more often than keys of other types.
        self.zfocus = zfocus
        self.hgfocus = hgfocus

    def pick(self, xs):
        return self.r.choice(xs)

    def key(self):
        return self.pick(KEYS)

    def keys(self, lo=1, hi=4):
        return [self.key() for _ in range(self.r.randint(lo, hi))]

    def member(self):
        return self.pick(MEMBERS)

    def members(self, lo=1, hi=4):
        return [self.member() for _ in range(self.r.randint(lo, hi))]

    def value(self):
        if self.r.random() < 0.1:
            return "%d" % self.r.randint(-100, 100)
        return self.pick(VALUES)

    def int(self, lo=-5, hi=10, edge=0.1):
        if self.r.random() < edge:
            return self.pick(INT_EDGE)
        return str(self.r.randint(lo, hi))

    def float(self, edge=0.15):
        r = self.r.random()
        if r < edge:
            return self.pick(FLOAT_EDGE)
        if r < 0.5:
            return str(self.r.randint(-10, 10))
        return self.pick(["1.5", "-0.5", "0.25", "2", "0.1", "3.3", "1e2", "-7", "2.0e1", "10.5"])

    def score(self):
        return self.pick(SCORE_BAD) if self.r.random() < 0.04 else self.pick(SCORES)

    # Expiry times are long enough not to run out during a run, or at once
    # (<= 0 or in the past), or invalid: never a race between the servers.

    def ttl_seconds(self):
        r = self.r.random()
        if r < 0.15:
            return self.pick(["0", "-1", "-100"])
        if r < 0.25:
            return self.pick(INT_EDGE + ["9223372036854775", "9223372036854776", "922337203685477580"])
        return str(self.r.randint(100, 100000))

    def ttl_ms(self):
        r = self.r.random()
        if r < 0.15:
            return self.pick(["0", "-1", "-100"])
        if r < 0.25:
            return self.pick(INT_EDGE)
        return str(self.r.randint(100000, 100000000))

    def unix_s(self):
        r = self.r.random()
        if r < 0.2:
            return self.pick(["1", "0", "-1", "1000"])
        if r < 0.3:
            return self.pick(INT_EDGE)
        return str(self.now_ms // 1000 + self.r.randint(100, 100000))

    def unix_ms(self):
        r = self.r.random()
        if r < 0.2:
            return self.pick(["1", "0", "-1", "1000"])
        if r < 0.3:
            return self.pick(INT_EDGE)
        return str(self.now_ms + self.r.randint(100000, 100000000))

    def rand_count(self):
        """A count for SRANDMEMBER/HRANDFIELD: never a huge negative one
        that Redis 7.0 accepts (it would build a reply of billions)."""
        if self.r.random() < 0.1:
            return self.pick(["-9223372036854775808", "9223372036854775807", "4294967296", "abc", "1.5", "",
                              "-0", "+1"])
        return str(self.r.randint(-6, 6))

    def scan_opts(self):
        opts = []
        for _ in range(self.r.randint(0, 2)):
            if self.r.random() < 0.5:
                opts += ["MATCH", self.pick(PATTERNS)]
            else:
                opts += ["COUNT", self.pick(COUNTS)]
        return opts

    # ---- families ---------------------------------------------------------

    def strings(self):
        r = self.r
        c = r.randint(0, 24)
        k = self.key()
        if c == 0:
            return ["GET", k]
        if c in (1, 2, 3):
            cmd = ["SET", k, self.value()]
            for _ in range(r.randint(0, 3)):
                o = r.random()
                if o < 0.2:
                    cmd.append(self.pick(["NX", "XX", "nx", "xx"]))
                elif o < 0.35:
                    cmd.append("GET")
                elif o < 0.45:
                    cmd.append("KEEPTTL")
                elif o < 0.6:
                    cmd += ["EX", self.ttl_seconds()]
                elif o < 0.7:
                    cmd += ["PX", self.ttl_ms()]
                elif o < 0.8:
                    cmd += ["EXAT", self.unix_s()]
                elif o < 0.9:
                    cmd += ["PXAT", self.unix_ms()]
                elif o < 0.95:
                    cmd.append(self.pick(["EX", "PX", "FOO", "PERSIST"]))
                else:
                    cmd += [self.pick(["ex", "px"]), self.ttl_seconds()]
            return cmd
        if c == 4:
            return ["SETNX", k, self.value()]
        if c == 5:
            return [self.pick(["SETEX", "PSETEX"]), k, self.ttl_seconds() if r.random() < 0.5 else self.ttl_ms(),
                    self.value()]
        if c == 6:
            return [self.pick(["GETSET", "GETDEL"]), k] + ([self.value()] if r.random() < 0.5 else [])
        if c == 7:
            cmd = ["GETEX", k]
            for _ in range(r.randint(0, 2)):
                o = r.random()
                if o < 0.3:
                    cmd.append("PERSIST")
                elif o < 0.5:
                    cmd += ["EX", self.ttl_seconds()]
                elif o < 0.65:
                    cmd += ["PX", self.ttl_ms()]
                elif o < 0.8:
                    cmd += ["EXAT", self.unix_s()]
                elif o < 0.9:
                    cmd += ["PXAT", self.unix_ms()]
                else:
                    cmd.append(self.pick(["EX", "KEEPTTL", "NX"]))
            return cmd
        if c == 8:
            return ["MGET"] + self.keys()
        if c == 9:
            cmd = [self.pick(["MSET", "MSETNX"])]
            for _ in range(r.randint(1, 3)):
                cmd += [self.key(), self.value()]
            if r.random() < 0.1:
                cmd.append(self.key())
            return cmd
        if c in (10, 11):
            return [self.pick(["INCR", "DECR"]), k]
        if c == 12:
            return [self.pick(["INCRBY", "DECRBY"]), k, self.int(-100, 100, 0.2)]
        if c in (13, 14):
            return ["INCRBYFLOAT", k, self.float(0.3)]
        if c == 15:
            return ["APPEND", k, self.value()]
        if c == 16:
            return ["STRLEN", k]
        if c in (17, 18):
            return ["GETRANGE", k, self.int(-12, 12), self.int(-12, 12)]
        if c in (19, 20):
            if r.random() < 0.1:
                # Past the 512 MiB limit (never a success: that would allocate it).
                return ["SETRANGE", k, self.pick(["536870911", "536870912", "9223372036854775807"]), "abc"]
            return ["SETRANGE", k, self.int(-2, 12), self.pick(["", "x", "abc", "HELLO", "\x00z"])]
        if c == 21:
            return ["GETRANGE", k, self.pick(INT_EDGE + ["0", "-1"]), self.pick(["-1", "0", "5", "-100"])]
        if c == 22:
            return ["SET", k, self.pick(["1", "10", "-3", "1.5", "9223372036854775806", "-9223372036854775807",
                                         "1e3", "3.0", "abc", "5.0e3", " 2", "0.1", "1e300"])]
        if c == 23:
            return ["INCRBY", k, self.pick(["9223372036854775807", "-9223372036854775808", "1", "-1"])]
        return ["SET", k, self.value(), self.pick(["EX", "PX"]), self.pick(["100000", "0", "-1", "abc", "1.5"])]

    def keyspace(self):
        r = self.r
        c = r.randint(0, 21)
        k = self.key()
        if c == 0:
            return [self.pick(["DEL", "UNLINK"])] + self.keys()
        if c == 1:
            ks = self.keys(1, 5)
            if r.random() < 0.5:
                ks.append(ks[0])
            return ["EXISTS"] + ks
        if c == 2:
            return ["TYPE", k]
        if c == 3:
            return ["KEYS", self.pick(PATTERNS)]
        if c in (4, 5):
            cmd = ["SCAN", "0"]
            for _ in range(r.randint(0, 3)):
                o = r.random()
                if o < 0.4:
                    cmd += ["MATCH", self.pick(PATTERNS)]
                elif o < 0.7:
                    cmd += ["COUNT", self.pick(COUNTS)]
                elif o < 0.95:
                    cmd += ["TYPE", self.pick(TYPES)]
                else:
                    cmd.append(self.pick(["MATCH", "COUNT", "FOO"]))
            if r.random() < 0.05:
                cmd[1] = self.pick(["abc", "-1", "18446744073709551616", "18446744073709551615"])
            return cmd
        if c in (6, 7):
            return [self.pick(["RENAME", "RENAMENX"]), k, self.key()]
        if c in (8, 9, 10, 11):
            name = self.pick(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])
            t = {"EXPIRE": self.ttl_seconds, "PEXPIRE": self.ttl_ms, "EXPIREAT": self.unix_s,
                 "PEXPIREAT": self.unix_ms}[name]()
            cmd = [name, k, t]
            for _ in range(r.choice([0, 0, 1, 1, 2])):
                cmd.append(self.pick(["NX", "XX", "GT", "LT", "nx", "gt", "FOO"]))
            return cmd
        if c in (12, 13):
            return [self.pick(["TTL", "PTTL"]), k]
        if c == 14:
            return ["PERSIST", k]
        if c == 15:
            return ["RANDOMKEY"]
        if c == 16:
            return ["TOUCH"] + self.keys()
        if c == 17:
            return ["DBSIZE"]
        if c == 18:
            if r.random() < 0.5:
                return ["ECHO", self.value()]
            return ["PING"] + ([self.value()] if r.random() < 0.5 else [])
        if c == 19:
            return ["SELECT", self.pick(["0", "1", "0", "1", "16", "-1", "abc", "15"])]
        if c == 20:
            if r.random() < 0.3:
                return [self.pick(["FLUSHDB", "FLUSHALL"])] + self.pick([[], [], ["ASYNC"], ["SYNC"], ["foo"]])
            return ["EXISTS", k]
        if r.random() < 0.1:
            # Never a valid version: switching protocols mid-sequence is not compared.
            return ["HELLO", self.pick(["4", "1", "abc", "-1", "0"])]
        return ["TYPE", k]

    def hashes(self):
        r = self.r
        c = r.randint(0, 18)
        k = self.key()
        if c in (0, 1, 2):
            cmd = [self.pick(["HSET", "HSET", "HMSET"]), k]
            for _ in range(r.randint(1, 3)):
                cmd += [self.member(), self.value()]
            if r.random() < 0.08:
                cmd.append(self.member())
            return cmd
        if c == 3:
            return ["HSETNX", k, self.member(), self.value()]
        if c == 4:
            return ["HGET", k, self.member()]
        if c == 5:
            return ["HMGET", k] + self.members()
        if c == 6:
            return ["HGETALL", k]
        if c == 7:
            return ["HDEL", k] + self.members(1, 3)
        if c == 8:
            return ["HLEN", k]
        if c == 9:
            return ["HEXISTS", k, self.member()]
        if c == 10:
            return [self.pick(["HKEYS", "HVALS"]), k]
        if c == 11:
            return ["HSTRLEN", k, self.member()]
        if c == 12:
            return ["HINCRBY", k, self.member(), self.int(-100, 100, 0.2)]
        if c == 13:
            return ["HINCRBYFLOAT", k, self.member(), self.float(0.3)]
        if c == 14:
            return ["HSCAN", k, "0"] + self.scan_opts()
        if c == 15:
            cmd = ["HRANDFIELD", k]
            if r.random() < 0.7:
                cmd.append(self.rand_count())
                if r.random() < 0.5:
                    cmd.append("WITHVALUES")
            return cmd
        if c == 16:
            return ["HSET", k, self.member(), self.pick(["1", "10", "-3", "1.5", "9223372036854775807", "abc",
                                                         "1e3", "3.0", "0.1", "1e300"])]
        if c == 17:
            return ["HINCRBY", k, self.member(), self.pick(["9223372036854775807", "-9223372036854775808"])]
        return ["HGETALL", k]

    def lists(self):
        r = self.r
        c = r.randint(0, 16)
        k = self.key()
        if c in (0, 1, 2):
            return [self.pick(["LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "LPUSH", "RPUSH"]), k] + self.members()
        if c in (3, 4):
            cmd = [self.pick(["LPOP", "RPOP"]), k]
            if r.random() < 0.5:
                cmd.append(self.int(-2, 6, 0.1))
            return cmd
        if c == 5:
            return ["LLEN", k]
        if c in (6, 7):
            return ["LRANGE", k, self.int(-8, 8), self.int(-8, 8)]
        if c == 8:
            return ["LINDEX", k, self.int(-8, 8)]
        if c == 9:
            return ["LSET", k, self.int(-8, 8), self.member()]
        if c in (10, 11):
            return ["LREM", k, self.int(-3, 3), self.member()]
        if c in (12, 13):
            return ["LTRIM", k, self.int(-8, 8), self.int(-8, 8)]
        if c == 14:
            return ["RPUSH", k] + [self.pick(["a", "b", "a"]) for _ in range(r.randint(2, 6))]
        if c == 15:
            return ["LRANGE", k, "0", "-1"]
        return [self.pick(["LPOP", "RPOP"]), k, self.pick(["0", "100", "-1", "9223372036854775807"])]

    def extras(self):
        """Bits, list searches and inserts, LCS, moves between databases,
        absolute expiry times, SUBSTR."""
        r = self.r
        c = r.randint(0, 18)
        k = self.key()

        def offset():
            if r.random() < 0.08:
                # (4294967295, the last bit, would make a 512 MiB string.)
                return self.pick(["-1", "4294967296", "8388607", "abc", "1.5", ""])
            return str(r.randint(0, 40))

        def unit():
            return [self.pick(["BYTE", "BIT", "byte", "bit", "FOO"])] if r.random() < 0.4 else []

        if c in (0, 1, 2):
            return ["SETBIT", k, offset(), self.pick(["0", "1", "1", "2", "-1", "abc"])]
        if c == 3:
            return ["GETBIT", k, offset()]
        if c in (4, 5):
            cmd = ["BITCOUNT", k]
            if r.random() < 0.7:
                cmd += [self.int(-6, 6), self.int(-6, 6)] + unit()
            elif r.random() < 0.5:
                cmd.append(self.int(-6, 6))  # a start without an end: a syntax error
            return cmd
        if c in (6, 7):
            cmd = ["BITPOS", k, self.pick(["0", "1", "1", "2", "abc"])]
            n = r.randint(0, 2)
            if n >= 1:
                cmd.append(self.int(-6, 6))
            if n >= 2:
                cmd += [self.int(-6, 6)] + unit()
            return cmd
        if c == 8:
            op = self.pick(["AND", "OR", "XOR", "NOT", "and", "FOO"])
            return ["BITOP", op, self.key()] + self.keys(1, 1 if op == "NOT" and r.random() < 0.8 else 3)
        if c in (9, 10):
            cmd = ["LPOS", k, self.pick(["a", "b", self.member()])]
            for _ in range(r.randint(0, 3)):
                o = r.random()
                if o < 0.35:
                    cmd += ["RANK", self.pick(["1", "-1", "2", "-2", "0", "3", "abc",
                                               "-9223372036854775808", "9223372036854775807"])]
                elif o < 0.7:
                    cmd += ["COUNT", self.pick(["0", "1", "2", "-1", "abc"])]
                elif o < 0.95:
                    cmd += ["MAXLEN", self.pick(["0", "1", "3", "-1", "abc"])]
                else:
                    cmd.append(self.pick(["RANK", "FOO"]))
            return cmd
        if c == 11:
            return ["LINSERT", k, self.pick(["BEFORE", "AFTER", "before", "MIDDLE"]),
                    self.pick(["a", "b", self.member()]), self.member()]
        if c == 12:
            return ["RPOPLPUSH", k, self.key()]
        if c == 13:
            cmd = ["LCS", k, self.key()]
            for _ in range(r.randint(0, 3)):
                o = r.random()
                if o < 0.25:
                    cmd.append("LEN")
                elif o < 0.5:
                    cmd.append("IDX")
                elif o < 0.75:
                    cmd += ["MINMATCHLEN", self.pick(["0", "1", "2", "-1", "abc"])]
                elif o < 0.95:
                    cmd.append("WITHMATCHLEN")
                else:
                    cmd.append("FOO")
            return cmd
        if c == 14:
            return ["MOVE", k, self.pick(["0", "1", "1", "16", "-1", "abc"])]
        if c == 15:
            return ["SWAPDB", self.pick(["0", "1", "0"]), self.pick(["1", "0", "1", "16", "abc"])]
        if c == 16:
            return [self.pick(["EXPIRETIME", "PEXPIRETIME"]), k]
        if c == 17:
            return self.sort(k)
        return ["SUBSTR", k, self.int(-12, 12), self.int(-12, 12)]

    def sort(self, k):
        """SORT / SORT_RO with BY and GET patterns over the key space
        (members such as "1" name keys "k1"), LIMIT, ASC/DESC, ALPHA and
        STORE. Never BY nosort, nor a BY pattern without `*` (the same):
        a set's order would then be its hash table's. Nor ALPHA with BY:
        Redis then leaves elements whose weights tie (or are missing) in
        the order it loaded them, a set's or sorted set's hash-table order
        (numeric sorting breaks ties by the elements themselves)."""
        r = self.r
        name = self.pick(["SORT", "SORT", "SORT_RO"])
        cmd = [name, k]
        for _ in range(r.randint(0, 4)):
            o = r.random()
            if o < 0.2:
                if not any(str(x).upper() == "ALPHA" for x in cmd):
                    cmd += ["BY", self.pick(["k*", "*", "w_*", "k*->a"])]
            elif o < 0.4:
                cmd += ["GET", self.pick(["#", "k*", "k*->a", "k*->", "w_*"])]
            elif o < 0.55:
                cmd += ["LIMIT", self.int(-2, 4), self.int(-2, 4)]
            elif o < 0.7:
                cmd.append(self.pick(["ASC", "DESC", "desc"]))
            elif o < 0.85:
                if not any(str(x).upper() == "BY" for x in cmd):
                    cmd.append(self.pick(["ALPHA", "alpha"]))
            elif o < 0.95 and name == "SORT":
                cmd += ["STORE", self.key()]
            else:
                # (Not BY: the next word would be its pattern, likely without `*`.)
                cmd.append(self.pick(["FOO", "LIMIT", "GET", "STORE"]))
        return cmd

    def sets(self):
        r = self.r
        c = r.randint(0, 18)
        k = self.key()
        if c in (0, 1, 2):
            return ["SADD", k] + self.members()
        if c == 3:
            return ["SREM", k] + self.members(1, 3)
        if c == 4:
            return ["SMEMBERS", k]
        if c == 5:
            return ["SISMEMBER", k, self.member()]
        if c == 6:
            return ["SMISMEMBER", k] + self.members(1, 3)
        if c == 7:
            return ["SCARD", k]
        if c == 8:
            cmd = ["SPOP", k]
            if r.random() < 0.7:
                cmd.append(self.int(-1, 6, 0.1))
            return cmd
        if c == 9:
            cmd = ["SRANDMEMBER", k]
            if r.random() < 0.7:
                cmd.append(self.rand_count())
            return cmd
        if c == 10:
            return ["SSCAN", k, "0"] + self.scan_opts()
        if c == 11:
            return ["SMOVE", k, self.key(), self.member()]
        if c in (12, 13):
            return [self.pick(["SINTER", "SUNION", "SDIFF"])] + self.keys()
        if c in (14, 15):
            return [self.pick(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), k] + self.keys()
        if c == 16:
            ks = self.keys()
            n = str(len(ks)) if r.random() < 0.8 else self.pick(["0", "-1", "abc", str(len(ks) + 1), "1"])
            cmd = ["SINTERCARD", n] + ks
            if r.random() < 0.4:
                cmd += ["LIMIT", self.int(0, 4, 0.15)]
            return cmd
        if c == 17:
            return ["SADD", k] + [self.pick(["1", "2", "3", "10", "-5"]) for _ in range(r.randint(1, 4))]
        return ["SMEMBERS", k]

    def zrange(self, name):
        r = self.r
        k = self.key()
        if name == "ZRANGE":
            mode = r.random()
            if mode < 0.35:
                cmd = ["ZRANGE", k, self.int(-6, 6), self.int(-6, 6)]
            elif mode < 0.7:
                cmd = ["ZRANGE", k, self.pick(SCORE_RANGE), self.pick(SCORE_RANGE), "BYSCORE"]
            else:
                cmd = ["ZRANGE", k, self.pick(LEX_RANGE), self.pick(LEX_RANGE), "BYLEX"]
            groups = []
            if r.random() < 0.4:
                groups.append(["REV"])
            if r.random() < 0.35:
                groups.append(["LIMIT", self.int(-1, 4, 0.05), self.int(-2, 4, 0.05)])
            if r.random() < 0.4:
                groups.append(["WITHSCORES"])
            if r.random() < 0.05:
                groups.append([self.pick(["FOO", "LIMIT", "BYSCORE", "BYLEX", "REV"])])
            r.shuffle(groups)
            return cmd + [x for g in groups for x in g]
        if name in ("ZRANGEBYSCORE", "ZREVRANGEBYSCORE"):
            cmd = [name, k, self.pick(SCORE_RANGE), self.pick(SCORE_RANGE)]
            if r.random() < 0.4:
                cmd.append("WITHSCORES")
            if r.random() < 0.35:
                cmd += ["LIMIT", self.int(-1, 4, 0.05), self.int(-2, 4, 0.05)]
            if r.random() < 0.03:
                cmd.append("FOO")
            return cmd
        if name in ("ZRANGEBYLEX", "ZREVRANGEBYLEX"):
            cmd = [name, k, self.pick(LEX_RANGE), self.pick(LEX_RANGE)]
            if r.random() < 0.35:
                cmd += ["LIMIT", self.int(-1, 4, 0.05), self.int(-2, 4, 0.05)]
            if r.random() < 0.05:
                cmd.append(self.pick(["WITHSCORES", "FOO"]))
            return cmd
        cmd = ["ZREVRANGE", k, self.int(-6, 6), self.int(-6, 6)]
        if r.random() < 0.4:
            cmd.append("WITHSCORES")
        return cmd

    def weight(self):
        if self.r.random() < 0.1:
            return self.pick(["nan", "abc", "", "inf", "-inf", "1e400", " 1"])
        return self.pick(["1", "2", "0", "-1", "0.5", "1.5", "-2.5", "3", "10", "1e300", "0.1"])

    def zalgebra(self, name):
        """ZUNION ZINTER ZDIFF, their *STORE forms and ZINTERCARD: numkeys
        (now and then a wrong one), keys (sets among them: they score 1) and
        the options in any order, sometimes bad or repeated."""
        r = self.r
        ks = self.keys(1, 3)
        n = str(len(ks))
        if r.random() < 0.08:
            n = self.pick(["0", "-1", "abc", str(len(ks) + 1), str(len(ks) + 3), "9223372036854775807", ""])
        cmd = [name] + ([self.key()] if name.endswith("STORE") else []) + [n] + ks
        groups = []
        if name == "ZINTERCARD":
            if r.random() < 0.5:
                groups.append(["LIMIT", self.int(0, 4, 0.15)])
        else:
            if r.random() < 0.35:
                nw = len(ks) if r.random() < 0.85 else r.randint(0, len(ks) + 1)
                groups.append(["WEIGHTS"] + [self.weight() for _ in range(nw)])
            if r.random() < 0.35:
                groups.append(["AGGREGATE", self.pick(["SUM", "MIN", "MAX", "sum", "min", "max", "avg"])])
            if r.random() < (0.5 if not name.endswith("STORE") else 0.04):
                groups.append(["WITHSCORES"])
        if r.random() < 0.05:
            groups.append([self.pick(["FOO", "LIMIT", "WEIGHTS", "AGGREGATE", "WITHSCORES"])])
        r.shuffle(groups)
        return cmd + [x for g in groups for x in g]

    def znew(self):
        """The commands added in Redis 6.2/7.0 that are not set algebra."""
        r = self.r
        c = r.randint(0, 9)
        if c in (0, 1, 2):
            # ZRANGESTORE: ZRANGE's argument forms, with a destination.
            cmd = self.zrange("ZRANGE")
            cmd = ["ZRANGESTORE", self.key()] + cmd[1:]
            if "WITHSCORES" in cmd and r.random() < 0.8:
                cmd.remove("WITHSCORES")
            return cmd
        if c in (3, 4):
            cmd = ["ZRANDMEMBER", self.key()]
            if r.random() < 0.75:
                cmd.append(self.rand_count())
                if r.random() < 0.5:
                    cmd.append(self.pick(["WITHSCORES", "WITHSCORES", "withscores", "FOO"]))
            return cmd
        # ZMPOP numkeys key... MIN|MAX [COUNT n]
        ks = self.keys(1, 3)
        n = str(len(ks)) if r.random() < 0.9 else self.pick(["0", "-1", "abc", str(len(ks) + 1), "1"])
        cmd = ["ZMPOP", n] + ks + [self.pick(["MIN", "MAX", "min", "max", "LEFT"])]
        if r.random() < 0.5:
            cmd += ["COUNT", self.int(-1, 5, 0.1)]
        if r.random() < 0.04:
            cmd.append(self.pick(["COUNT", "FOO"]))
        return cmd

    def zsets(self):
        r = self.r
        c = r.randint(0, 34)
        k = self.key()
        if c in (27, 28, 29, 30):
            return self.zalgebra(self.pick(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE",
                                            "ZINTERCARD"]))
        if c in (31, 32, 33, 34):
            return self.znew()
        if c in (0, 1, 2, 3):
            cmd = ["ZADD", k]
            flags = [self.pick(["NX", "XX", "GT", "LT", "CH", "INCR", "ch", "nx"])
                     for _ in range(r.choice([0, 0, 1, 1, 2, 3]))]
            cmd += flags
            n = 1 if "INCR" in flags and r.random() < 0.8 else r.randint(1, 4)
            for _ in range(n):
                cmd += [self.score(), self.member()]
            if r.random() < 0.05:
                cmd.append(self.member())
            return cmd
        if c == 4:
            incr = self.pick(SCORES + ["nan", "abc"]) if r.random() < 0.5 else self.float(0.3)
            return ["ZINCRBY", k, incr, self.member()]
        if c == 5:
            return ["ZREM", k] + self.members(1, 3)
        if c == 6:
            return ["ZSCORE", k, self.member()]
        if c == 7:
            return ["ZMSCORE", k] + self.members(1, 3)
        if c == 8:
            return ["ZCARD", k]
        if c == 9:
            return ["ZCOUNT", k, self.pick(SCORE_RANGE), self.pick(SCORE_RANGE)]
        if c == 10:
            return ["ZLEXCOUNT", k, self.pick(LEX_RANGE), self.pick(LEX_RANGE)]
        if c == 11:
            cmd = [self.pick(["ZRANK", "ZREVRANK"]), k, self.member()]
            if r.random() < 0.1:
                cmd.append("WITHSCORE")  # Redis 7.2+: 7.0 answers with an arity error
            return cmd
        if c in (12, 13, 14, 15, 16):
            return self.zrange("ZRANGE")
        if c in (17, 18):
            return self.zrange(self.pick(["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]))
        if c in (19, 20):
            return self.zrange(self.pick(["ZRANGEBYLEX", "ZREVRANGEBYLEX"]))
        if c == 21:
            return self.zrange("ZREVRANGE")
        if c == 22:
            name = self.pick(["ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZREMRANGEBYLEX"])
            if name == "ZREMRANGEBYSCORE":
                return [name, k, self.pick(SCORE_RANGE), self.pick(SCORE_RANGE)]
            if name == "ZREMRANGEBYRANK":
                return [name, k, self.int(-6, 6), self.int(-6, 6)]
            return [name, k, self.pick(LEX_RANGE), self.pick(LEX_RANGE)]
        if c == 23:
            cmd = [self.pick(["ZPOPMIN", "ZPOPMAX"]), k]
            if r.random() < 0.6:
                cmd.append(self.int(-2, 6, 0.1))
            return cmd
        if c == 24:
            return ["ZSCAN", k, "0"] + self.scan_opts()
        if c == 25:
            # Members that share a score, so that lex order matters.
            cmd = ["ZADD", k]
            for m in r.sample(["a", "b", "c", "d", "e"], r.randint(2, 5)):
                cmd += ["0", m]
            return cmd
        return ["ZADD", k, self.pick(["1e300", "-0", "inf", "-inf", "1.1", "0.1", "1e17", "123456789012345678",
                                      "1e-300", "5e-324", "1.7976931348623157e308"]), self.member()]

    def hll(self):
        """HyperLogLogs: small element spaces (so PFADD often changes
        nothing), now and then a batch large enough to turn the HLL dense,
        PFCOUNT of one key (whose cache is written into the string) or
        several, PFMERGE, and SETRANGE/APPEND corruption."""
        r = self.r
        c = r.randint(0, 11)
        k = self.key()
        if c in (0, 1, 2, 3):
            return ["PFADD", k] + self.members(0, 5)
        if c == 4:
            n = r.choice([50, 300, 1500, 4000])
            return ["PFADD", k] + ["e%d" % r.randrange(n * 2) for _ in range(n)]
        if c in (5, 6):
            return ["PFCOUNT", k]
        if c == 7:
            return ["PFCOUNT"] + self.keys(1, 4)
        if c == 8:
            return ["PFMERGE", k] + self.keys(0, 3)
        if c == 9:
            return ["PFDEBUG", self.pick(["ENCODING", "TODENSE", "DECODE", "GETREG", "nope"]), k]
        if c == 10:
            return ["SETRANGE", k, str(r.randint(0, 40)), self.pick(["x", "\x00", "\xff", "HYLL", "\x80"])]
        return [self.pick(["GET", "STRLEN", "APPEND"]), k] + (["z"] if r.random() < 0.3 else [])

    def lon(self):
        r = self.r
        if r.random() < 0.04:
            return self.pick(["181", "-180", "180", "abc", "nan", "", "1e400", "-180.0000001", "inf"])
        if r.random() < 0.1:
            return "%.6f" % r.uniform(-180, 180)
        return "%.6f" % r.uniform(12.0, 16.0)  # mostly one region, so searches find places

    def lat(self):
        r = self.r
        if r.random() < 0.04:
            return self.pick(["85.05112879", "-85.05112878", "85.05112878", "90", "x", "-91"])
        if r.random() < 0.05:
            return self.pick(["84.9", "-84.5", "70.2", "-67"])
        if r.random() < 0.1:
            return "%.6f" % r.uniform(-85, 85)
        return "%.6f" % r.uniform(36.0, 40.0)

    def geo_unit(self):
        return self.pick(["m", "km", "ft", "mi", "KM", "M", "mi", "km", "yd"])

    def geo_opts(self, store_ok):
        r = self.r
        opts = []
        for _ in range(r.choice([0, 1, 1, 2, 3, 4])):
            c = r.randint(0, 9)
            if c == 0:
                opts.append("WITHDIST")
            elif c == 1:
                opts.append("WITHCOORD")
            elif c == 2:
                opts.append("WITHHASH")
            elif c in (3, 4):
                opts += ["COUNT", self.pick(["1", "2", "3", "5", "0", "-1", "x"])]
                if r.random() < 0.3:
                    opts.append("ANY")
            elif c == 5:
                opts.append(self.pick(["ASC", "DESC"]))
            elif c == 6:
                opts.append("ANY")
            elif c == 7 and store_ok:
                opts += [self.pick(["STORE", "STOREDIST"]), self.key()]
            elif c == 8:
                opts.append(self.pick(["asc", "withdist", "desc"]))
        # Ties in distance would be ordered by Redis's (unstable) partial
        # quicksort under COUNT; distinct places make them improbable.
        return opts

    def geo_radius(self):
        r = self.r
        return self.pick(["0", "1", "10", "50", "100", "200", "500", "1000", "-1", "x"]) if r.random() < 0.2 \
            else str(r.choice([1, 10, 100, 250]) * r.choice([1, 1000]))

    def geo(self):
        r = self.r
        c = r.randint(0, 15)
        k = self.key()
        if c in (0, 1, 2, 3):
            cmd = ["GEOADD", k] + [self.pick(["NX", "XX", "CH", "ch"]) for _ in range(r.choice([0, 0, 0, 1, 2]))]
            for _ in range(r.randint(1, 4)):
                cmd += [self.lon(), self.lat(), self.member()]
            if r.random() < 0.04:
                cmd.pop()
            return cmd
        if c == 4:
            return ["GEOPOS", k] + self.members(0, 3)
        if c == 5:
            cmd = ["GEODIST", k, self.member(), self.member()]
            if r.random() < 0.6:
                cmd.append(self.geo_unit())
            if r.random() < 0.03:
                cmd.append("km")
            return cmd
        if c == 6:
            return ["GEOHASH", k] + self.members(0, 3)
        if c in (7, 8, 9, 10):
            name = self.pick(["GEOSEARCH", "GEOSEARCH", "GEOSEARCHSTORE"])
            cmd = [name] + ([self.key()] if name == "GEOSEARCHSTORE" else []) + [k]
            parts = []
            if r.random() < 0.95:
                parts.append(["FROMMEMBER", self.member()] if r.random() < 0.5 else ["FROMLONLAT", self.lon(), self.lat()])
            if r.random() < 0.95:
                if r.random() < 0.5:
                    parts.append(["BYRADIUS", self.geo_radius(), self.geo_unit()])
                else:
                    parts.append(["BYBOX", self.geo_radius(), self.geo_radius(), self.geo_unit()])
            if r.random() < 0.03:
                parts.append(["FROMLONLAT", "15", "37"])
            opts = self.geo_opts(False)
            if name == "GEOSEARCHSTORE" and r.random() < 0.5:
                opts.append("STOREDIST")
            r.shuffle(parts)
            for p in parts:
                cmd += p
            return cmd + opts
        if c in (11, 12):
            name = self.pick(["GEORADIUS", "GEORADIUS_RO"])
            return [name, k, self.lon(), self.lat(), self.geo_radius(), self.geo_unit()] + \
                self.geo_opts(name == "GEORADIUS")
        if c == 13:
            name = self.pick(["GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"])
            return [name, k, self.member(), self.geo_radius(), self.geo_unit()] + \
                self.geo_opts(name == "GEORADIUSBYMEMBER")
        if c == 14:
            return ["ZSCORE", k, self.member()]
        return self.pick([["ZRANGE", k, "0", "-1", "WITHSCORES"], ["ZREM", k, self.member()]])

    def txn(self):
        c = self.r.randint(0, 9)
        if c in (0, 1, 2):
            return ["MULTI"]
        if c in (3, 4):
            return ["EXEC"]
        if c == 5:
            return ["DISCARD"]
        if c in (6, 7):
            return ["WATCH"] + self.keys(1, 2)
        if c == 8:
            return ["UNWATCH"]
        # A command refused when queued (wrong arity, unknown), so that EXEC aborts.
        return self.pick([["GET"], ["SET", self.key()], ["ZADD", self.key(), "1"], ["LPUSH", self.key()],
                          ["NOSUCHCOMMAND", "x"]])

    def arity(self, cmd):
        """Wrong arity: drop or add arguments."""
        if self.r.random() < 0.5 and len(cmd) > 1:
            return cmd[: self.r.randint(1, len(cmd) - 1)]
        return cmd + self.members(1, 3)

    def bulk(self):
        """A collection past Redis's small encodings (128 elements), so that
        the paging paths of SCAN and the big-set paths of the random
        commands run too."""
        k, n = self.key(), self.r.randint(120, 300)
        kind = self.r.randint(0, 3)
        if kind == 0:
            cmd = ["ZADD", k]
            for i in range(n):
                cmd += [str(self.r.choice([i, i / 4, -i, 0])), "m%d" % i]
            return cmd
        if kind == 1:
            return ["SADD", k] + ["m%d" % i for i in range(n)]
        if kind == 2:
            cmd = ["HSET", k]
            for i in range(n):
                cmd += ["m%d" % i, str(i)]
            return cmd
        return ["RPUSH", k] + ["m%d" % (i % 50) for i in range(n)]

    # -- streams (explicit IDs only: `*` would make replies time-dependent) --

    def sid(self, bad=0.05):
        r = self.r
        x = r.random()
        if x < bad:
            return self.pick(["0-0", "abc", "-", "+", "1-x", "-1", "18446744073709551615-18446744073709551615"])
        ms = r.randint(0, 25)
        if x < 0.25:
            return str(ms)
        return "%d-%d" % (ms, r.randint(0, 3))

    def srange(self, lo):
        x = self.r.random()
        if x < 0.25:
            return "-" if lo else "+"
        if x < 0.4:
            return "(" + self.sid(0.02)
        return self.sid(0.02)

    def sfields(self):
        out = []
        for _ in range(self.r.randint(1, 3)):
            out += [self.pick(["f", "g", "h"]), self.value()]
        return out

    def strim(self):
        r = self.r
        how = self.pick(["MAXLEN", "MAXLEN", "MINID"])
        out = [how]
        mod = r.random()
        if mod < 0.3:
            out.append("~")
        elif mod < 0.5:
            out.append("=")
        out.append(self.int(-1, 8, 0.05) if how == "MAXLEN" else self.sid(0.03))
        if r.random() < 0.2:
            out += ["LIMIT", self.int(-1, 5, 0.05)]
        return out

    def sgroup(self):
        return self.pick(["g1", "g2", "g3"])

    def sconsumer(self):
        return self.pick(["alice", "bob", "carol"])

    def streams(self):
        r = self.r
        c = r.randint(0, 27)
        k = self.key()
        if c <= 6:
            cmd = ["XADD", k]
            if r.random() < 0.1:
                cmd.append("NOMKSTREAM")
            if r.random() < 0.25:
                cmd += self.strim()
            x = r.random()
            if x < 0.15:
                cmd.append("%d-*" % r.randint(0, 25))
            else:
                cmd.append(self.sid())
            return cmd + self.sfields()
        if c == 7:
            return ["XLEN", k]
        if c in (8, 9):
            name = self.pick(["XRANGE", "XREVRANGE"])
            a, b = self.srange(True), self.srange(False)
            cmd = [name, k] + ([a, b] if name == "XRANGE" else [b, a])
            if r.random() < 0.4:
                cmd += ["COUNT", self.int(-1, 5, 0.05)]
            return cmd
        if c == 10:
            return ["XDEL", k] + [self.sid(0.02) for _ in range(r.randint(1, 3))]
        if c == 11:
            return ["XTRIM", k] + self.strim()
        if c == 12:
            cmd = ["XSETID", k, self.sid(0.05)]
            if r.random() < 0.3:
                cmd += ["ENTRIESADDED", self.int(-1, 30, 0.05)]
            if r.random() < 0.3:
                cmd += ["MAXDELETEDID", self.sid(0.05)]
            return cmd
        if c == 13:
            ks = self.keys(1, 3)
            cmd = ["XREAD"]
            if r.random() < 0.4:
                cmd += ["COUNT", self.int(-1, 4, 0.05)]
            return cmd + ["STREAMS"] + ks + [self.pick(["$", "0", self.sid(0.02)]) for _ in ks]
        if c in (14, 15):
            cmd = ["XGROUP", "CREATE", k, self.sgroup(), self.pick(["$", "0", self.sid(0.03)])]
            if r.random() < 0.5:
                cmd.append("MKSTREAM")
            if r.random() < 0.2:
                cmd += ["ENTRIESREAD", self.int(-2, 10, 0.05)]
            return cmd
        if c == 16:
            sub = self.pick(["SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER"])
            cmd = ["XGROUP", sub, k, self.sgroup()]
            if sub == "SETID":
                cmd.append(self.pick(["$", "0", self.sid(0.03)]))
                if r.random() < 0.2:
                    cmd += ["ENTRIESREAD", self.int(-1, 10, 0.05)]
            elif sub != "DESTROY":
                cmd.append(self.sconsumer())
            return cmd
        if c in (17, 18, 19):
            ks = self.keys(1, 2)
            cmd = ["XREADGROUP", "GROUP", self.sgroup(), self.sconsumer()]
            if r.random() < 0.5:
                cmd += ["COUNT", self.int(0, 3, 0.05)]
            if r.random() < 0.2:
                cmd.append("NOACK")
            return cmd + ["STREAMS"] + ks + [self.pick([">", ">", "0", self.sid(0.02)]) for _ in ks]
        if c == 20:
            return ["XACK", k, self.sgroup()] + [self.sid(0.02) for _ in range(r.randint(1, 3))]
        if c == 21:
            cmd = ["XPENDING", k, self.sgroup()]
            if r.random() < 0.6:
                cmd += [self.srange(True), self.srange(False), self.int(-1, 5, 0.05)]
                if r.random() < 0.4:
                    cmd.append(self.sconsumer())
            return cmd
        if c == 22:
            cmd = ["XCLAIM", k, self.sgroup(), self.sconsumer(), "0"] + [self.sid(0.02) for _ in range(r.randint(1, 3))]
            for opt in ("JUSTID", "FORCE"):
                if r.random() < 0.3:
                    cmd.append(opt)
            if r.random() < 0.2:
                cmd += ["RETRYCOUNT", self.int(0, 5, 0.05)]
            return cmd
        if c == 23:
            cmd = ["XAUTOCLAIM", k, self.sgroup(), self.sconsumer(), "0", self.srange(True)]
            if r.random() < 0.5:
                cmd += ["COUNT", self.int(0, 4, 0.05)]
            if r.random() < 0.3:
                cmd.append("JUSTID")
            return cmd
        if c == 24:
            return ["XINFO", "GROUPS", k]
        if c == 25:
            return ["XINFO", "CONSUMERS", k, self.sgroup()]
        if c == 26:
            return ["XINFO", "STREAM", k]
        return ["TYPE", k]

    def command(self):
        if self.r.random() < 0.01:
            return self.bulk()
        r = self.r.random()
        if self.hgfocus:
            # GEO 45%, HyperLogLog 25%, sorted sets 15%, strings 10%, keyspace 5%.
            cmd = (self.geo() if r < 0.45 else self.hll() if r < 0.7 else self.zsets() if r < 0.85
                   else self.strings() if r < 0.95 else self.keyspace())
        elif self.zfocus:
            # Sorted sets 60%, sets 20%, keyspace 10%, transactions 10%.
            cmd = (self.zsets() if r < 0.6 else self.sets() if r < 0.8 else self.keyspace() if r < 0.9
                   else self.txn())
        elif r < 0.13:
            cmd = self.strings()
        elif r < 0.17:
            cmd = self.extras()
        elif r < 0.29:
            cmd = self.keyspace()
        elif r < 0.41:
            cmd = self.hashes()
        elif r < 0.53:
            cmd = self.lists()
        elif r < 0.65:
            cmd = self.sets()
        elif r < 0.80:
            cmd = self.zsets()
        elif r < 0.87:
            cmd = self.streams()
        elif r < 0.905:
            cmd = self.hll()
        elif r < 0.94:
            cmd = self.geo()
        else:
            cmd = self.txn()
        if self.r.random() < 0.03:
            cmd = self.arity(cmd)
        return cmd


# --------------------------------------------------------------------------
# normalization and comparison
# --------------------------------------------------------------------------

SORTED = {"smembers", "hkeys", "hvals", "keys", "sinter", "sunion", "sdiff"}
PAIRS = {"hgetall"}
SCANS = {"scan": 1, "hscan": 2, "sscan": 2, "zscan": 2}  # where the cursor is
TTLS = {"ttl": 1, "pttl": 1500, "expiretime": 1, "pexpiretime": 1500}  # tolerance
RANDOM = {"srandmember", "hrandfield", "zrandmember", "spop", "randomkey"}
# Unordered replies whose order is Redis's when the key is a listpack hash
# or an intset: compared exactly then (`Runner.compact_on_reference`).
COMPACT_ORDER = {"smembers", "hkeys", "hvals", "hgetall"}


def items(reply):
    """The elements of an aggregate reply, or None."""
    if reply[0] in ("*", "~"):
        return list(reply[1])
    if reply[0] == "%":
        return [x for kv in reply[1] for x in kv]
    return None


def sort_key(reply):
    return repr(reply)


def unsign_zero(reply):
    """A reply with every score "-0" written "0". Redis answers -0 for a
    member scored -0 only in a sorted set past 128 members (a skiplist keeps
    the double; a listpack stores the text "0"); Tembo keeps one index for
    both sizes and writes 0 (a documented difference, see the report)."""
    t = reply[0]
    if t == "$" and reply[1] == b"-0":
        return ("$", b"0")
    if t == "," and reply[1] == "-0":
        return (",", "0")
    if t in ("*", "~", ">"):
        return (t, tuple(unsign_zero(x) for x in reply[1]))
    if t == "scan":
        return (t, tuple(tuple(unsign_zero(y) for y in x) if isinstance(x[0], tuple) else unsign_zero(x)
                         for x in reply[1]))
    return reply


# Stream reply fields that are times (idle, seen) or Redis's radix-tree
# internals (no counterpart in Tembo's layout): compared as 0.
TIMELY = {b"idle", b"seen-time", b"radix-tree-nodes"}


def untime(reply):
    """A reply with the value after each TIMELY field name set to 0."""
    t = reply[0]
    if t in ("*", "~"):
        xs = list(reply[1])
        for i in range(len(xs) - 1):
            if xs[i][0] == "$" and xs[i][1] in TIMELY:
                xs[i + 1] = (":", 0)
        return (t, tuple(untime(x) for x in xs))
    if t == "%":
        return ("%", tuple((k, (":", 0) if k[0] == "$" and k[1] in TIMELY else untime(v)) for k, v in reply[1]))
    return reply


def hll_truncated_tail(v):
    """`v` with its last byte's length bits cleared when it is a sparse
    HyperLogLog whose last opcode is an XZERO missing its second byte (a
    string damaged by SETRANGE). Redis reads that byte from past the end
    of the string: after a PFADD splits such a run, its buffer keeps the
    byte its memcpy wrote beyond the new length (not the terminator), so
    the next split's length depends on memory that is not part of the
    value; Tembo reads 0 there, as a fresh copy of the string would."""
    if len(v) <= 16 or not v.startswith(b"HYLL") or v[4] != 1:
        return v
    p = 16
    while p < len(v):
        op = v[p] & 0xC0
        if op == 0x40 and p == len(v) - 1:
            return v[:-1] + bytes([0x40])
        p += 2 if op == 0x40 else 1
    return v


def hll_decoded_tail(reply):
    """PFDEBUG DECODE's text with the low byte of its last XZERO's length
    masked: when that opcode lost its second byte (see
    `hll_truncated_tail`), Redis decodes it from memory past the string's
    end."""
    text = reply[1]
    if not isinstance(text, (bytes, str)):
        return reply
    raw = text.encode() if isinstance(text, str) else text
    head, _, last = raw.rpartition(b" ")
    if not last.startswith(b"Z:") or not last[2:].isdigit():
        return reply
    masked = b"Z:%d*" % ((int(last[2:]) - 1) >> 8)
    out = head + b" " + masked if head else masked
    return (reply[0], out.decode() if isinstance(text, str) else out)


def normalize(args, reply):
    """Replaces replies that may differ legitimately by something stable."""
    if reply[0] == "-":
        return reply
    if reply[0] == "$" and isinstance(reply[1], bytes):
        reply = ("$", hll_truncated_tail(reply[1]))
    name = args[0].lower()
    if name == "pfdebug" and len(args) > 1 and args[1].lower() == "decode":
        reply = hll_decoded_tail(reply)
    if name == "xinfo":
        return untime(reply)
    if name == "xpending" and len(args) > 3 and reply[0] == "*":
        # The extended form's third field is the idle time.
        return ("*", tuple((r[0], r[1][:2] + ((":", 0),) + r[1][3:]) if r[0] == "*" else r for r in reply[1]))
    if name.startswith("z"):
        reply = unsign_zero(reply)
    if name in SORTED and reply[0] in ("*", "~"):
        return (reply[0], tuple(sorted(reply[1], key=sort_key)))
    if name in PAIRS:
        if reply[0] == "%":
            return ("%", tuple(sorted(reply[1], key=sort_key)))
        if reply[0] == "*":
            xs = reply[1]
            pairs = [(xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
            return ("*", tuple(sorted(pairs, key=sort_key)))
    return reply


def same(args, a, b):
    """Whether reference reply `a` and Tembo's `b` agree for command `args`."""
    name = args[0].lower()
    if name == "hello" and a[0] != "-":
        # The server map: its client id differs (documented: not compared).
        return a[0] == b[0]
    if name in TTLS and a[0] == ":" and b[0] == ":":
        x, y = a[1], b[1]
        if x < 0 or y < 0:
            return x == y
        return abs(x - y) <= TTLS[name]
    return normalize(args, a) == normalize(args, b)


class Mismatch(Exception):
    def __init__(self, step, args, ref, got, note=""):
        super().__init__(note)
        self.step, self.args, self.ref, self.got, self.note = step, args, ref, got, note


# --------------------------------------------------------------------------
# one sequence against both servers
# --------------------------------------------------------------------------

WHICH = {"main": 0, "other": 1, "check": 2}


def pipeline(conns, cmds):
    """Sends `cmds` to every connection, then reads every reply."""
    data = b"".join(encode(c) for c in cmds)
    for c in conns:
        c.s.sendall(data)
    return [[read(c) for _ in cmds] for c in conns]


def read(conn):
    """A reply, or a made-up one when the connection failed (a hang or a
    crash is a finding too)."""
    try:
        return conn.read()
    except (OSError, ProtocolError, ValueError) as e:
        return ("connection failed", "%s: %s" % (type(e).__name__, e))


class Pair:
    """The two servers' connections for one sequence: a main one, a second
    one (it modifies WATCHed keys, runs commands while the main one is in
    MULTI) and one for the state checks."""

    def __init__(self, redis, tembo, proto):
        self.conns = {}
        for name, srv in (("r", redis), ("t", tembo)):
            main, other, check = Conn(srv.port), Conn(srv.port), Conn(srv.port)
            if proto == 3:
                for c in (main, other):
                    rep = c.call(["HELLO", "3"])  # the server map differs: not compared
                    if rep[0] not in ("%", "*"):
                        raise RuntimeError("%s: HELLO 3 answered %s" % (srv.name, show(rep)))
            self.conns[name] = (main, other, check)
        self.multi = False  # the main connection is inside MULTI (as the reference says)
        self.queued = []  # the queued commands, for EXEC's array
        self.db = 0  # the main connection's database
        self.dbs_used = {0}

    def close(self):
        for cs in self.conns.values():
            for c in cs:
                c.close()

    def both(self, which, args):
        """Sends to both servers before reading either reply (so that they
        work at the same time)."""
        i = WHICH[which]
        r, t = self.conns["r"][i], self.conns["t"][i]
        sent = []
        for c in (r, t):
            try:
                c.s.sendall(encode(args))
                sent.append(None)
            except OSError as e:
                sent.append(("connection failed", "%s: %s" % (type(e).__name__, e)))
        return tuple(failed or read(c) for c, failed in zip((r, t), sent))


class Runner:
    def __init__(self, redis, tembo, proto, verbose=False):
        self.redis, self.tembo, self.proto, self.verbose = redis, tembo, proto, verbose
        self.history = []  # (which, args) as sent
        self.pair = None
        self.expired_pending = False  # a SET with a past EXAT/PXAT was sent

    def open(self):
        for srv in (self.redis, self.tembo):
            c = Conn(srv.port)
            rep = c.call(["FLUSHALL"])
            c.close()
            if rep != ("+", "OK"):
                raise RuntimeError("%s: FLUSHALL answered %s" % (srv.name, show(rep)))
        self.pair = Pair(self.redis, self.tembo, self.proto)

    def close(self):
        if self.pair:
            self.pair.close()
            self.pair = None

    def log(self, which, args, a, b, ok):
        if self.verbose:
            print("  %s%-60s -> %s%s" % ({"other": "[2] ", "check": "[3] "}.get(which, ""), cmdline(args)[:60],
                                          show(a)[:100],
                                          "" if ok else "   TEMBO: " + show(b)[:100]))

    def step(self, which, args):
        """Sends `args` to both servers and compares; raises Mismatch."""
        step = len(self.history)
        p = self.pair
        name = args[0].lower()
        in_multi = which == "main" and p.multi
        if not in_multi and name in SCANS and len(args) > SCANS[name]:
            return self.full_scan(which, args)
        if name == "set" and self.past_expiry(args) or self.short_ttl(args):
            self.expired_pending = True
        random_reply = not in_multi and name in RANDOM
        snapshot = self.reference_contents(which, args) if random_reply else None
        self.history.append((which, list(args)))
        a, b = p.both(which, args)
        if (name in ("sort", "sort_ro") and not in_multi and a[0] == "-" and b[0] != "-"
                and "can't be converted into double" in str(a[1])):
            a = self.sort_after_errno_reset(which, args)
        try:
            if a[0] == "-" or b[0] == "-":
                if not same(args, a, b):
                    raise Mismatch(step, args, a, b, "error replies differ")
            elif random_reply:
                self.check_random(step, args, a, b, snapshot)
            elif self.loose(args):
                pass
            elif name == "exec" and in_multi and a[0] == "*":
                self.check_exec(step, args, a, b)
            elif not same(args, a, b):
                raise Mismatch(step, args, a, b)
            elif name in COMPACT_ORDER and not in_multi and a != b and self.compact_on_reference(which, args):
                raise Mismatch(step, args, a, b, "order differs from the reference's listpack or intset")
        except Mismatch:
            self.log(which, args, a, b, False)
            raise
        self.log(which, args, a, b, True)
        # Follow the transaction state as the reference reports it.
        if which == "main":
            if name == "multi" and a == ("+", "OK"):
                p.multi, p.queued = True, []
            elif name == "exec" and p.multi and a != ("-", "ERR EXEC without MULTI"):
                # An array, a nil (WATCH), EXECABORT: the transaction is over.
                if a[0] == "*":
                    self.after_exec(a)
                p.multi, p.queued = False, []
            elif name == "discard" and a == ("+", "OK"):
                p.multi, p.queued = False, []
            elif p.multi and a == ("+", "QUEUED"):
                p.queued.append(args)
            elif name == "select" and a == ("+", "OK"):
                p.db = int(args[1])
                p.dbs_used.add(p.db)
        if name in ("move", "swapdb") and a[0] == ":" or a == ("+", "OK") and name == "swapdb":
            # Keys reach the databases named (a queued one: at EXEC, harmless to add now).
            p.dbs_used.update(int(x) for x in args[1 + (name == "move"):] if x.isdigit() and int(x) < 16)
        if name == "spop" and not in_multi and a[0] != "-":
            self.resync([p.db if which == "main" else 0], [args[1]])
        return a, b

    def sort_after_errno_reset(self, which, args):
        """Redis's SORT judges each number by `errno == ERANGE` after strtod
        without clearing errno first, so an ERANGE left by an earlier
        command's number (ZADD's score 5e-324, say) fails a SORT of valid
        numbers: a Redis bug, not a reply to match. A new connection
        resets errno (Redis's accept loop ends on EAGAIN); the SORT is
        asked again after one. (It wrote nothing: with STORE too, an
        error stores nothing.)"""
        c = Conn(self.redis.port)
        c.call(["PING"])
        c.close()
        return self.pair.conns["r"][WHICH[which]].call(args)

    def loose(self, args):
        """Whether only the kind of reply is compared: a key SET with an
        EXAT/PXAT in the past is counted by Redis's DBSIZE until its active
        expire cycle deletes it (~100 ms), by Tembo's until its own does:
        timing, not semantics."""
        return args[0].lower() == "dbsize" and self.expired_pending

    @staticmethod
    def short_ttl(args):
        """Whether a command gives a key a TTL in milliseconds short enough
        to run out during the sequence (PSETEX, or SET/GETEX PX, given a
        count of seconds): once it has, DBSIZE counts the key until each
        server's active expire cycle finds it, as after a past EXAT."""
        name = args[0].lower()
        if name == "psetex":
            ttls = args[2:3]
        elif name in ("set", "getex"):
            ttls = [args[i + 1] for i in range(2, len(args) - 1) if str(args[i]).upper() == "PX"]
        else:
            return False
        for t in ttls:
            try:
                if 0 < int(t) <= 60_000:
                    return True
            except ValueError:
                pass
        return False

    @staticmethod
    def past_expiry(args):
        """Whether a SET names an absolute expiry already past."""
        now_ms = time.time() * 1000
        for i, o in enumerate(args[3:-1], 3):
            try:
                if o.upper() == "EXAT" and int(args[i + 1]) * 1000 <= now_ms:
                    return True
                if o.upper() == "PXAT" and int(args[i + 1]) <= now_ms:
                    return True
            except ValueError:
                pass
        return False

    def check_exec(self, step, args, a, b):
        if b[0] != "*" or len(a[1]) != len(b[1]):
            raise Mismatch(step, args, a, b)
        popped = False
        for qargs, x, y in zip(self.pair.queued, a[1], b[1]):
            qname = qargs[0].lower()
            if popped:
                # The servers popped different members (see below), and
                # what follows may differ in any way: a set emptied by an
                # intersection on one side only is gone there, a later
                # command on its key finds no type or another. After EXEC
                # resync() copies the sets over and the states are compared.
                ok = True
            elif (qname in ("sort", "sort_ro") and x[0] == "-" and y[0] != "-"
                  and "can't be converted into double" in str(x[1])
                  and not any(str(q).lower() == "store" for q in qargs[2:])):
                # Redis's stale-ERANGE SORT bug (sort_after_errno_reset),
                # which inside EXEC cannot be asked again: nothing stored.
                ok = True
            elif qname in RANDOM or qname in SCANS or self.loose(qargs):
                # Random members or a cursor: compared only as a kind of reply.
                ok = x[0] == y[0]
            else:
                ok = same(qargs, x, y)
            if not ok:
                raise Mismatch(step, args, a, b, "inside EXEC, %s: redis %s, tembo %s" % (
                    cmdline(qargs), show(x), show(y)))
            # After an SPOP the sets may differ until resync(): what follows
            # in this transaction is not compared.
            popped |= qname == "spop" and x[0] != "-"

    def after_exec(self, reply):
        """Follows SELECTs inside the transaction; after an SPOP, resyncs
        every set of the databases it visited (later commands may have
        copied the popped set: SUNIONSTORE, SMOVE, RENAME...)."""
        p = self.pair
        visited, popped = {p.db}, False
        for q, x in zip(p.queued, reply[1]):
            if q[0].lower() == "select" and x == ("+", "OK"):
                p.db = int(q[1])
                p.dbs_used.add(p.db)
                visited.add(p.db)
            elif q[0].lower() in ("swapdb", "move") and x[0] != "-":
                # Keys (a popped set among them) moved between databases.
                moved = {int(d) for d in q[1 + (q[0].lower() == "move"):] if d.isdigit() and int(d) < 16}
                p.dbs_used |= moved
                visited |= moved
            popped |= q[0].lower() == "spop" and x[0] != "-"
        if popped:
            self.resync(sorted(visited), KEYS)

    def lex_unspecified(self, which, args):
        """Whether `args` is a lex-range command on a sorted set whose
        members have different scores and which Redis keeps as a skiplist
        (OBJECT ENCODING): Redis leaves that answer unspecified, and
        it depends on the skiplist's random levels, so it is not compared.
        Inside MULTI every lex range counts as such (see below)."""
        name = args[0].lower()
        lex = name in ("zrangebylex", "zrevrangebylex", "zlexcount", "zremrangebylex") or (
            name in ("zrange", "zrangestore") and any(str(a).upper() == "BYLEX" for a in args[2:])
        )
        src = 2 if name == "zrangestore" else 1  # where the sorted set is named
        if not lex or len(args) <= src:
            return False
        if which == "main" and self.pair.multi:
            # A probe would be queued too, and the commands queued before it
            # (a bulk ZADD, a ZUNIONSTORE) can make the set big by EXEC:
            # inside MULTI lex ranges are left out (outside, they run).
            return True
        c = self.pair.conns["r"][WHICH[which]]
        key = args[src]
        # The encoding, not the size: a set once over 128 members, or one
        # with a member over 64 bytes, stays a skiplist when it shrinks.
        if c.call(["OBJECT", "ENCODING", key]) != ("$", b"skiplist"):
            return False
        ends = [items(c.call(["ZRANGE", key, i, i])) for i in ("0", "-1")]
        if not all(ends):
            return False
        first, last = (e[0][1] if isinstance(e[0], tuple) else e[0] for e in ends)
        return c.call(["ZSCORE", key, first]) != c.call(["ZSCORE", key, last])

    def compact_on_reference(self, which, args):
        """Whether the reference holds the key a reply came from as a
        listpack or an intset, whose order is defined (insertion; numeric),
        so that Tembo's must be the same."""
        if len(args) < 2:
            return False
        rep = self.pair.conns["r"][WHICH[which]].call(["OBJECT", "ENCODING", args[1]])
        return rep[0] in ("$", "+") and rep[1] in (b"listpack", b"intset", "listpack", "intset")

    def reference_contents(self, which, args):
        """What the reference holds at the key a random command reads."""
        c = self.pair.conns["r"][WHICH[which]]
        name = args[0].lower()
        if name == "randomkey" or len(args) < 2:
            return None
        if name in ("srandmember", "spop"):
            rep = c.call(["SMEMBERS", args[1]])
            return set(items(rep)) if rep[0] in ("*", "~") else None
        if name == "zrandmember":
            # member -> score, as this protocol writes a score (RESP3: pairs).
            rep = unsign_zero(c.call(["ZRANGE", args[1], "0", "-1", "WITHSCORES"]))
            if rep[0] != "*":
                return None
            xs = [x for pair in rep[1] for x in pair[1]] if self.proto == 3 else list(rep[1])
            return {xs[i]: xs[i + 1] for i in range(0, len(xs), 2)}
        rep = c.call(["HGETALL", args[1]])
        xs = items(rep) if rep[0] in ("*", "%") else None
        return None if xs is None else {xs[i]: xs[i + 1] for i in range(0, len(xs), 2)}

    def check_random(self, step, args, a, b, snapshot):
        name = args[0].lower()

        def bad(why):
            raise Mismatch(step, args, a, b, why)

        if name == "randomkey":
            if (a[0] in ("nil", "null")) != (b[0] in ("nil", "null")) or a[0] != b[0]:
                bad("one has no key")
            return
        if a[0] != b[0]:
            bad("reply types differ")
        if a[0] in ("nil", "null", "nilarr"):
            return
        if snapshot is None:
            bad("no reference snapshot")
        if a[0] == "$":
            if b not in snapshot:
                bad("not a member")
            return
        if a[0] not in ("*", "~"):
            if a != b:
                bad("replies differ")
            return
        xa, xb = list(a[1]), list((unsign_zero(b) if name == "zrandmember" else b)[1])
        withvalues = name in ("hrandfield", "zrandmember") and len(args) > 3
        if withvalues and self.proto == 3:
            # RESP3: an array of [field, value] pairs; flatten both.
            def flat(xs):
                return [x for pair in xs for x in (pair[1] if pair[0] == "*" else (pair,))]
            xa, xb = flat(xa), flat(xb)
        if len(xa) != len(xb):
            bad("sizes differ")
        if withvalues:
            fields = [xb[i] for i in range(0, len(xb), 2)]
            for i in range(0, len(xb) - 1, 2):
                if snapshot.get(xb[i]) != xb[i + 1]:
                    bad("field/value pair not in the hash")
        else:
            fields = xb
        for f in fields:
            if f not in snapshot:
                bad("not a member: %s" % show(f))
        try:
            count = int(args[2]) if len(args) > 2 else 1
        except ValueError:
            count = 1
        if count >= 0 and len(set(fields)) != len(fields):
            bad("repeats with a positive count")

    def resync(self, dbs, keys):
        """Copies `keys` of databases `dbs` from the reference to Tembo: an
        SPOP took different random members from each, and commands after it
        in a transaction (SUNIONSTORE, ZINTERSTORE, SMOVE, RENAME...) may
        have carried the difference to keys of any type. Each key goes over
        as the reference's DUMP, restored into both servers with its TTL (or
        deleted from both). The commands (on the checking connection) are
        part of the history."""
        r, t = self.pair.conns["r"][2], self.pair.conns["t"][2]
        for db in dbs:
            cmds = [["SELECT", str(db)]]
            r.call(cmds[0])
            for key in sorted(set(keys)):
                payload = r.call(["DUMP", key])
                if payload[0] != "$":
                    cmds.append(["DEL", key])
                    continue
                # The absolute expiry: a relative one would drift, and near
                # the end of time overflow (Redis then drops the key).
                at = r.call(["PEXPIRETIME", key])[1]
                cmds.append(["RESTORE", key, str(max(at, 0)), payload[1], "REPLACE", "ABSTTL"])
            for cmd in cmds:
                self.history.append(("check", cmd))
                a, b = r.call(cmd), t.call(cmd)
                if cmd[0] == "RESTORE" and (a != ("+", "OK") or b != ("+", "OK")):
                    raise Mismatch(len(self.history) - 1, cmd, a, b, "resync after SPOP")

    @staticmethod
    def type_none(args):
        """Whether a SCAN filters on the type "none"."""
        up = [str(x).upper() for x in args]
        return any(up[i] == "TYPE" and up[i + 1] == "NONE" for i in range(len(up) - 1))

    def full_scan(self, which, args):
        """A SCAN run to the end on both; compares the set of what came back."""
        step = len(self.history)
        pos = SCANS[args[0].lower()]
        if args[pos] != "0":
            # A made-up cursor: Redis resumes at that hash-table position,
            # Tembo (documented in cursor.rs) starts over when it does not
            # know a cursor. Compared: the error, or that both answered with
            # a cursor and a list.
            self.history.append((which, list(args)))
            a, b = self.pair.both(which, args)

            def shape(rep):
                if rep[0] == "-":
                    return rep
                return rep[0] == "*" and len(rep[1]) == 2 and rep[1][1][0] in ("*", "~")

            ok = shape(a) == shape(b)
            self.log(which, args, a, b, ok)
            if not ok:
                raise Mismatch(step, args, a, b, "SCAN from a made-up cursor")
            return a, b
        results = []
        for who in ("r", "t"):
            c = self.pair.conns[who][WHICH[which]]
            cursor = args[pos]
            got = []
            for _ in range(10000):
                a = list(args)
                a[pos] = cursor
                rep = c.call(a)
                if rep[0] != "*" or len(rep[1]) != 2 or rep[1][0][0] != "$" or rep[1][1][0] not in ("*", "~"):
                    got = rep
                    break
                cursor = rep[1][0][1].decode()
                got += list(rep[1][1][1])
                if cursor == "0":
                    if pos == 2 and args[0].lower() != "sscan":
                        got = [(got[i], got[i + 1]) for i in range(0, len(got) - 1, 2)]
                    got = ("scan", tuple(sorted(set(got), key=sort_key)))
                    break
            else:
                got = ("unfinished scan",)
            results.append(got)
        self.history.append((which, list(args)))
        a, b = (unsign_zero(x) for x in results) if args[0].lower() == "zscan" else results
        ok = a == b
        if not ok and self.expired_pending and self.type_none(args) and a[0] == b[0] == "scan":
            # Redis 7.0's SCAN looks a key up for its type, which deletes
            # one that has expired and calls it "none"; so TYPE none lists
            # keys past their expiry until the active cycle removes them.
            # Tembo lists none of them: only such keys may be extra.
            ok = set(b[1]) <= set(a[1])
        self.log(which, args, a, b, ok)
        if not ok:
            raise Mismatch(step, args, a, b, "the full iteration differs")
        return a, b

    def state_check(self):
        """Compares every key of the key space in every database used (the
        commands pipelined, to both servers at once)."""
        step = len(self.history)
        conns = [self.pair.conns[who][2] for who in ("r", "t")]
        dump_cmd = {"string": ["GET"], "hash": ["HGETALL"], "list": ["LRANGE", "0", "-1"], "set": ["SMEMBERS"],
                    "zset": ["ZRANGE", "0", "-1", "WITHSCORES"]}
        for db in sorted(self.pair.dbs_used):
            # DBSIZE only while no key may await its active expiry (see loose()).
            first = [["SELECT", str(db)]] + ([] if self.expired_pending else [["DBSIZE"]])
            first += [[c, k] for k in KEYS for c in ("TYPE", "PTTL")]
            heads = pipeline(conns, first)
            dumps = []
            for replies in heads:
                types = {k: replies[-2 * len(KEYS) + 2 * i] for i, k in enumerate(KEYS)}
                dumps.append((replies, types))
            second = []
            for replies, types in dumps:
                cmds = []
                for k in KEYS:
                    d = dump_cmd.get(types[k][1])
                    cmds.append([d[0], k] + d[1:] if d else ["EXISTS", k])
                second.append(cmds)
            if second[0] != second[1]:
                which = next(k for k, x, y in zip(KEYS, second[0], second[1]) if x != y)
                x, y = (dict(zip(KEYS, [r[-2 * len(KEYS) + 2 * i] for i in range(len(KEYS))]))[which]
                        for r, _ in dumps)
                raise Mismatch(step, ["(state check)", "db", str(db), which, "TYPE"], x, y,
                               "the stored state differs")
            bodies = pipeline(conns, second[0])
            norm = [[normalize(cmd, rep) for cmd, rep in zip(second[0], reps)] for reps in bodies]
            for i, k in enumerate(KEYS):
                ttl = [("ttl" if r[-2 * len(KEYS) + 2 * i + 1][0] == ":" and r[-2 * len(KEYS) + 2 * i + 1][1] >= 0
                        else "no ttl") for r, _ in dumps]
                if norm[0][i] != norm[1][i] or ttl[0] != ttl[1]:
                    raise Mismatch(step, ["(state check)", "db", str(db), k] + second[0][i][:1],
                                   ("+", "%s %s" % (ttl[0], show(norm[0][i]))),
                                   ("+", "%s %s" % (ttl[1], show(norm[1][i]))), "the stored state differs")
            if not self.expired_pending and heads[0][1] != heads[1][1]:
                raise Mismatch(step, ["(state check)", "db", str(db), "DBSIZE"], heads[0][1], heads[1][1],
                               "the stored state differs")


    def dump_check(self):
        """DUMP / RESTORE across the two servers: each key's payload from
        Redis restored into Tembo, and Tembo's into Redis, under a scratch
        key (deleted after), must read back as the original key. Payloads
        are Redis's RDB format both ways, Redis's compact encodings
        (listpacks, intsets, LZF strings) included."""
        step = len(self.history)
        r, t = self.pair.conns["r"][2], self.pair.conns["t"][2]
        read = {"string": ["GET"], "hash": ["HGETALL"], "list": ["LRANGE", "0", "-1"], "set": ["SMEMBERS"],
                "zset": ["ZRANGE", "0", "-1", "WITHSCORES"]}
        for db in sorted(self.pair.dbs_used):
            for c in (r, t):
                c.call(["SELECT", str(db)])
            for k in KEYS:
                kind = r.call(["TYPE", k])
                if kind[0] != "+" or kind[1] not in read:
                    continue
                cmd = read[kind[1]]
                want = normalize([cmd[0]], r.call([cmd[0], k] + cmd[1:]))
                for src, dst, direction in ((r, t, "Redis -> Tembo"), (t, r, "Tembo -> Redis")):
                    payload = src.call(["DUMP", k])
                    if payload[0] in ("nil", "null"):
                        break  # expired meanwhile
                    if payload[0] != "$":
                        raise Mismatch(step, ["DUMP", k], ("$", b"a payload"), payload, direction)
                    restored = dst.call(["RESTORE", "dump:scratch", "0", payload[1], "REPLACE"])
                    got = normalize([cmd[0]], dst.call([cmd[0], "dump:scratch"] + cmd[1:]))
                    dst.call(["DEL", "dump:scratch"])
                    if restored != ("+", "OK") or got != want:
                        raise Mismatch(step, ["(dump check)", "db", str(db), k, direction], want,
                                       got if restored == ("+", "OK") else restored, "DUMP / RESTORE")


def encodings_check(redis, tembo):
    """DUMP / RESTORE of values in each of Redis's encodings, both ways:
    small and large hashes, sorted sets and lists (listpack vs hash table,
    skiplist, many-node quicklist), sets of integers (intset) and of
    strings, integer and compressible strings (RDB's integer and LZF forms).
    Returns a list of what failed."""
    r, t = Conn(redis.port), Conn(tembo.port)
    values = {
        "small-hash": ["HSET", "x"] + [v for i in range(5) for v in ("f%d" % i, str(i))],
        "big-hash": ["HSET", "x"] + [v for i in range(300) for v in ("f%d" % i, "v" * (i % 70))],
        "small-zset": ["ZADD", "x"] + [v for i in range(5) for v in (str(i / 3), "m%d" % i)],
        "big-zset": ["ZADD", "x"] + [v for i in range(300) for v in (str(i * 1.5 - 100), "m%d" % i)],
        "small-list": ["RPUSH", "x", "a", "12", "-7", "300000", "b" * 70],
        "big-list": ["RPUSH", "x"] + [("e%d" % i) * (1 + i % 5) for i in range(3000)],
        "intset": ["SADD", "x"] + [str(i * 7919 - 10**6) for i in range(200)] + ["9223372036854775807"],
        "string-set": ["SADD", "x"] + ["s%d" % i for i in range(200)],
        "int-string": ["SET", "x", "-12345"],
        "long-string": ["SET", "x", "abc" * 500],
    }
    read = {"HSET": ["HGETALL"], "ZADD": ["ZRANGE", "0", "-1", "WITHSCORES"], "RPUSH": ["LRANGE", "0", "-1"],
            "SADD": ["SMEMBERS"], "SET": ["GET"]}
    failed = []
    try:
        for name, cmd in values.items():
            for c in (r, t):
                c.call(["DEL", "x", "y"])
                c.call(cmd)
            rd = read[cmd[0]]
            want = normalize([rd[0]], r.call([rd[0], "x"] + rd[1:]))
            for src, dst, direction in ((r, t, "Redis -> Tembo"), (t, r, "Tembo -> Redis")):
                payload = src.call(["DUMP", "x"])
                restored = dst.call(["RESTORE", "y", "0", payload[1]]) if payload[0] == "$" else payload
                got = normalize([rd[0]], dst.call([rd[0], "y"] + rd[1:]))
                dst.call(["DEL", "y"])
                if restored != ("+", "OK") or got != want:
                    failed.append("%s, %s: %s" % (name, direction, show(restored if restored != ("+", "OK") else got)))
        for c in (r, t):
            c.call(["FLUSHALL"])
    finally:
        r.close()
        t.close()
    return failed


def command_table_check(redis, tembo):
    """COMMAND INFO of every command Tembo lists, compared whole with
    redis-server's in RESP2 and RESP3 (flag and category sets compared as
    sets; a container's subcommands that Tembo does not implement are left
    out), and COMMAND GETKEYSANDFLAGS on calls that exercise each kind of key
    spec. Returns a list of what differed."""
    failed = []
    getkeys = [
        ["LMOVE", "a", "b", "LEFT", "RIGHT"], ["SET", "k", "v"], ["SET", "k", "v", "GET"], ["MSET", "a", "1", "b", "2"],
        ["ZUNIONSTORE", "d", "2", "x", "y", "WEIGHTS", "1", "2"], ["EVAL", "return 1", "2", "a", "b", "c"],
        ["XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"], ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
        ["SORT", "src", "BY", "w_*", "STORE", "dst"], ["SORT_RO", "src"], ["BITFIELD", "k", "GET", "u8", "0"],
        ["BITFIELD", "k", "INCRBY", "u8", "0", "1"], ["GEORADIUS", "g", "0", "0", "1", "km", "STORE", "d"],
        ["LMPOP", "2", "a", "b", "LEFT"], ["BLMPOP", "0", "1", "a", "RIGHT"], ["RENAME", "a", "b"], ["COPY", "a", "b"],
        ["XGROUP", "CREATE", "s", "g", "$"], ["OBJECT", "ENCODING", "k"], ["MEMORY", "USAGE", "k"], ["GET", "k"],
        ["SINTERCARD", "2", "a", "b"], ["EVAL", "return 1", "5", "a"], ["DEL", "a", "b", "c"], ["PING"],
    ]
    for proto in (2, 3):
        r, t = Conn(redis.port), Conn(tembo.port)
        try:
            if proto == 3:
                r.call(["HELLO", "3"])
                t.call(["HELLO", "3"])
            names = [n[1].decode() for n in t.call(["COMMAND", "LIST"])[1] if b"|" not in n[1]]
            for name in names:
                want, got = r.call(["COMMAND", "INFO", name]), t.call(["COMMAND", "INFO", name])
                if command_info_key(want, got) != command_info_key(got, got):
                    failed.append("COMMAND INFO %s (RESP%d): %s, Redis: %s" % (name, proto, show(got), show(want)))
            for call in getkeys:
                want, got = r.call(["COMMAND", "GETKEYSANDFLAGS"] + call), t.call(["COMMAND", "GETKEYSANDFLAGS"] + call)
                if sets_sorted(want) != sets_sorted(got):
                    failed.append("COMMAND GETKEYSANDFLAGS %s (RESP%d): %s, Redis: %s" % (
                        cmdline(call), proto, show(got), show(want)))
        finally:
            r.close()
            t.close()
    return failed


def fixed_replies_check(redis, tembo):
    """Replies that a random sequence rarely reaches, compared exactly: each
    container subcommand called with one argument too many or too few
    (Redis 7 answers "wrong number of arguments for 'config|get' command"
    before running anything), CONFIG SET values that are not numbers,
    CLIENT NO-EVICT's argument, OBJECT ENCODING of sets (intset while every
    member is a canonical integer, else hashtable, in Redis 7.0), script
    errors (the message names the line the error was raised at; a script's
    `pcall` gets the error's text) and the `fd=` of CLIENT LIST (a real
    descriptor, not 0). Returns a list of what differed."""
    r, t = Conn(redis.port), Conn(tembo.port)
    failed = []
    try:
        calls = []
        for name in sorted(n[1].decode() for n in t.call(["COMMAND", "LIST"])[1] if b"|" in n[1]):
            info = r.call(["COMMAND", "INFO", name])
            if info[0] != "*" or info[1][0][0] != "*":
                continue  # a subcommand newer than the reference (CLIENT SETINFO)
            arity = info[1][0][1][1][1]
            container, sub = name.split("|")
            if arity > 0:
                calls.append([container, sub] + ["x"] * (arity - 1))
                if arity > 2:
                    calls.append([container, sub])
            elif -arity > 2:
                calls.append([container, sub] + ["x"] * (-arity - 3))
        for setting in ("maxmemory", "proto-max-bulk-len", "hash-max-listpack-value", "maxclients",
                        "hash-max-listpack-entries", "stream-node-max-bytes"):
            calls.append(["CONFIG", "SET", setting, "abc"])
        calls += [["CLIENT", "NO-EVICT", "maybe"], ["CLIENT", "NO-EVICT", "off"]]
        # Script errors: where raised (a tail call too), what pcall gives back.
        calls.append(["SET", "str", "v"])
        for src in ["return redis.call('incr', 'str')", "local r = redis.call('incr', 'str') return r",
                    "local x = 1\nlocal r = redis.call('nosuch')\nreturn r", "redis.call()",
                    "return redis.call('get')", "error('plain')", "error('ERR foo', 0)", "error(nil)",
                    "error({err='MY custom'})", "local a = nil; return a.b", "return redis.error_reply('My Error')",
                    "return {err='X y'}", "return redis.pcall('incr', 'str')", "return redis.setresp(4)",
                    "local ok, e = pcall(redis.call, 'incr', 'str'); return {tostring(ok), type(e), e}",
                    "local ok, e = pcall(redis.call, 'incr', 'str'); error(e, 0)",
                    "local ok, e = pcall(error, {err='Q'}); return {tostring(ok), type(e), e}",
                    "local t = redis.pcall('incr', 'str'); return {type(t), t.err}"]:
            calls.append(["EVAL", src, "0"])
        calls.append(["DEL", "str"])
        calls += [["DEL", "s1", "s2", "s3"], ["SADD", "s1", "1", "-2", "30"], ["OBJECT", "ENCODING", "s1"],
                  ["SADD", "s2", "1", "01"], ["OBJECT", "ENCODING", "s2"], ["SADD", "s3", "a", "b"],
                  ["OBJECT", "ENCODING", "s3"], ["DEL", "s1", "s2", "s3"]]
        # GEOSEARCH's box: both numbers are parsed before either's sign is judged.
        calls.append(["GEOADD", "g", "1", "1", "a"])
        for w, h in (("-1", "x"), ("x", "-1"), ("-1", "1"), ("1", "-1"), ("x", "y")):
            calls.append(["GEOSEARCH", "g", "FROMMEMBER", "a", "BYBOX", w, h, "km"])
        calls.append(["DEL", "g"])
        for call in calls:
            want, got = r.call(call), t.call(call)
            if want != got:
                failed.append("%s: %s, Redis: %s" % (cmdline(call), show(got), show(want)))
        listed = t.call(["CLIENT", "LIST"])
        if b" fd=0 " in listed[1] or b" fd=-1 " in listed[1]:
            failed.append("CLIENT LIST shows no socket descriptor: %s" % show(listed))
    finally:
        r.close()
        t.close()
    return failed


def sets_sorted(reply):
    """A reply with every RESP3 set sorted (sets carry no order)."""
    if reply[0] in ("*", "~", ">"):
        items = tuple(sets_sorted(x) for x in reply[1])
        return (reply[0], tuple(sorted(items, key=repr)) if reply[0] == "~" else items)
    if reply[0] == "%":
        return ("%", tuple((sets_sorted(k), sets_sorted(v)) for k, v in reply[1]))
    return reply


def command_info_key(reply, only_of):
    """A COMMAND INFO reply made comparable: flags (element 3) and ACL
    categories (element 7) of the command and of each subcommand sorted, as
    RESP2 sends them as arrays in whatever order; subcommands kept only
    where `only_of` lists them too."""
    def entry(e):
        if e[0] != "*" or len(e[1]) < 10:
            return sets_sorted(e)
        f = list(e[1])
        for i in (2, 6):
            f[i] = ("~", tuple(sorted((sets_sorted(x) for x in f[i][1]), key=repr)))
        keep = {s[1][0] for s in only_of_subs} if only_of_subs is not None else None
        f[9] = ("~", tuple(sorted((entry(s) for s in f[9][1] if keep is None or s[1][0] in keep), key=repr)))
        return ("*", tuple(sets_sorted(x) if i not in (2, 6, 9) else x for i, x in enumerate(f)))
    only_of_subs = None
    if only_of[0] == "*" and only_of[1] and only_of[1][0][0] == "*" and len(only_of[1][0][1]) >= 10:
        only_of_subs = only_of[1][0][1][9][1]
    if reply[0] != "*":
        return sets_sorted(reply)
    return ("*", tuple(entry(e) for e in reply[1]))


def run_sequence(redis, tembo, seed, proto, nops, verbose=False, replay=None):
    """Runs one seeded sequence (or replays a history). Returns (the
    Mismatch or None, the history)."""
    runner = Runner(redis, tembo, proto, verbose)
    runner.open()
    try:
        if replay is not None:
            for which, args in replay:
                runner.step(which, args)
            runner.state_check()
            runner.dump_check()
            return None, runner.history
        rng = random.Random(seed)
        gen = Gen(rng, int(time.time() * 1000), zfocus=seed % 4 == 2, hgfocus=seed % 8 == 3)
        for i in range(nops):
            which = "other" if rng.random() < 0.06 else "main"
            cmd = gen.command()
            if which == "other" and cmd[0].upper() in ("MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH", "SELECT"):
                which = "main"
            if runner.lex_unspecified(which, cmd):
                cmd = ["ZCARD", cmd[1]]
            runner.step(which, cmd)
            if (i + 1) % 40 == 0:
                runner.state_check()
        if runner.pair.multi:
            runner.step("main", ["DISCARD"])
        runner.state_check()
        runner.dump_check()
        return None, runner.history
    except Mismatch as m:
        return m, runner.history
    finally:
        runner.close()


def reproduces(redis, tembo, proto, history, target):
    """Whether replaying `history` ends with the same mismatch: on its last
    command, that command being the target's (or the same key's state)."""
    m, _ = run_sequence(redis, tembo, 0, proto, 0, replay=history)
    if m is None or m.args != target.args:
        return False
    return target.args[0] == "(state check)" or m.step == len(history) - 1


def minimize(redis, tembo, proto, history, m, budget_s=30.0):
    """Greedy delta debugging: drops chunks of the commands before the
    mismatching one while the mismatch still happens."""
    deadline = time.time() + budget_s
    state = m.args[0] == "(state check)"
    hist = list(history) if state else list(history[: m.step + 1])
    if not reproduces(redis, tembo, proto, hist, m):
        return hist
    chunk = max(1, len(hist) // 2)
    while chunk >= 1 and time.time() < deadline:
        i = 0
        changed = False
        while i < (len(hist) if state else len(hist) - 1) and time.time() < deadline:
            if state:
                cand = hist[:i] + hist[i + chunk:]
            else:
                cand = hist[:i] + hist[i:-1][chunk:] + hist[-1:]
            if cand and reproduces(redis, tembo, proto, cand, m):
                hist, changed = cand, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return hist


def report(seed, proto, m, hist, out):
    print("MISMATCH seed=%s proto=%d step=%d: %s" % (seed, proto, m.step, m.note or "replies differ"), file=out)
    print("  command: %s" % cmdline(m.args), file=out)
    print("  redis:   %s" % show(m.ref)[:3000], file=out)
    print("  tembo:   %s" % show(m.got)[:3000], file=out)
    print("  reproduce (%s, %d commands; [2], [3]: second, third connection):" % ("HELLO 3" if proto == 3 else "RESP2",
                                                                         len(hist)), file=out)
    for which, args in hist:
        print("    %s%s" % ({"other": "[2] ", "check": "[3] "}.get(which, ""), cmdline(args)), file=out)
    print("  rerun: python3 tests/server/differential.py --tembo BIN --seed %s --proto %d -v" % (seed, proto),
          file=out)


def main():
    # Started in the background by scripts/test-server, SIGINT comes in
    # ignored, and SIGTERM would end the process before its `finally`
    # stops the servers it started: both end it through SystemExit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tembo", default=os.environ.get("TEMBO_BIN"), help="tembo binary (default $TEMBO_BIN)")
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--seeds", type=int, default=20, help="number of sequences, seeds first-seed...")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--seed", type=int, help="run this one seed only")
    ap.add_argument("--ops", type=int, default=300, help="commands per sequence")
    ap.add_argument("--proto", type=int, choices=(2, 3), help="protocol (default: RESP3 for every third seed)")
    ap.add_argument("--max-mismatches", type=int, default=10, help="stop after this many mismatching sequences")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command and reply")
    args = ap.parse_args()
    if not args.tembo:
        ap.error("--tembo (or $TEMBO_BIN) is required")
    args.tembo = os.path.abspath(args.tembo)
    if not shutil.which(args.redis_server):
        print("differential: %s not found" % args.redis_server, file=sys.stderr)
        return 2

    base = "/dev/shm" if not os.environ.get("TMPDIR") and os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="tembo-diff.", dir=base)
    t0 = time.time()
    try:
        redis, tembo = start_servers(args, work)
    except Exception as e:
        print("differential: %s" % e, file=sys.stderr)
        return 2
    seeds = [args.seed] if args.seed is not None else list(range(args.first_seed, args.first_seed + args.seeds))
    mismatches = 0
    commands = 0
    try:
        for failure in encodings_check(redis, tembo):
            print("differential: DUMP / RESTORE mismatch: %s" % failure)
            mismatches += 1
        for failure in command_table_check(redis, tembo):
            print("differential: command table mismatch: %s" % failure)
            mismatches += 1
        for failure in fixed_replies_check(redis, tembo):
            print("differential: reply mismatch: %s" % failure)
            mismatches += 1
        for seed in seeds:
            proto = args.proto or (3 if seed % 3 == 0 else 2)
            if args.verbose:
                print("seed %d, RESP%d" % (seed, proto))
            m, hist = run_sequence(redis, tembo, seed, proto, args.ops, args.verbose)
            commands += len(hist)
            if m is None:
                continue
            mismatches += 1
            if not args.no_minimize:
                hist = minimize(redis, tembo, proto, hist, m)
            report(seed, proto, m, hist, sys.stdout)
            sys.stdout.flush()
            if mismatches >= args.max_mismatches:
                print("differential: stopping after %d mismatching sequences" % mismatches)
                break
    finally:
        redis.stop()
        tembo.stop()
        # The servers' data (pools reach gigabytes, and /dev/shm is memory)
        # goes in every case; only the logs may be kept.
        for name in os.listdir(work):
            if os.path.isdir(os.path.join(work, name)):
                shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    print("differential: %d sequences, %d commands, %d mismatching, %.1f s" % (
        len(seeds), commands, mismatches, time.time() - t0))
    if mismatches:
        print("differential: server logs kept in %s" % work)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
