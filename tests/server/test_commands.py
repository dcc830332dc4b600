"""Real-client test suite for `tembo serve` (Redis-compatible server).

Runs with redis-py (5+) against the server at 127.0.0.1:$TEMBO_PORT, using
$TEMBO_PASSWORD when it is set. Every test starts from an empty server
(FLUSHALL). Most tests run twice: once over RESP2 and once over RESP3
(`redis.Redis(protocol=3)`).

The expected values are Redis 7 semantics; the suite was validated against
redis-server 7.0.15. Where the reference server cannot show a behaviour the
suite expects from Tembo, the test says so in a comment and skips only when it
detects that it talks to a real redis-server (see `is_reference_redis`).

    TEMBO_PORT=6379 python3 -m pytest -q tests/server/test_commands.py
"""

import os
import random
import socket
import threading
import time

import pytest
import redis

HOST = "127.0.0.1"
PORT = int(os.environ.get("TEMBO_PORT", "6379"))
PASSWORD = os.environ.get("TEMBO_PASSWORD") or None

# SETEX, PSETEX, HMSET, GETSET... are deprecated in redis-py but are still
# commands every server must answer.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# --------------------------------------------------------------------------
# helpers and fixtures
# --------------------------------------------------------------------------


def make_client(protocol=2, decode=True, db=0, **kw):
    kw.setdefault("socket_timeout", 60)
    return redis.Redis(
        host=HOST,
        port=PORT,
        password=PASSWORD,
        protocol=protocol,
        decode_responses=decode,
        db=db,
        **kw,
    )


def _flushall():
    c = make_client()
    try:
        c.flushall()
    finally:
        c.close()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(request):
    """A decoded client over RESP2 or RESP3, on an empty server."""
    _flushall()
    c = make_client(request.param)
    c.proto = request.param
    yield c
    c.close()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def rb(request):
    """A client that returns bytes (binary tests), RESP2 or RESP3."""
    _flushall()
    c = make_client(request.param, decode=False)
    c.proto = request.param
    yield c
    c.close()


@pytest.fixture
def r2():
    """A decoded RESP2 client for the heavy tests that need not run twice."""
    _flushall()
    c = make_client(2)
    c.proto = 2
    yield c
    c.close()


def err(excinfo):
    return str(excinfo.value)


def _server_info():
    c = make_client()
    try:
        return c.info("server")
    finally:
        c.close()


def is_reference_redis():
    """True when the server under test is a real redis-server (used only to
    skip checks for behaviour redis-server 7.0 does not have but Tembo must)."""
    info = _server_info()
    exe = str(info.get("executable", ""))
    return exe.endswith("redis-server")


def as_pairs(r, reply):
    """Pairs from a WITHSCORES/WITHVALUES style reply.

    RESP2: redis-py gives a list of tuples (ZRANGE...) or a flat list
    (HRANDFIELD/ZRANDMEMBER). RESP3: the server sends an array of 2-element
    arrays, which redis-py passes through as lists. The shape is asserted."""
    if reply and isinstance(reply[0], (list, tuple)):
        assert all(len(p) == 2 for p in reply), reply
        if r.proto == 3:
            assert all(isinstance(p, list) for p in reply), reply
        return [tuple(p) for p in reply]
    assert r.proto == 2 or not reply, "RESP3 must nest pairs: %r" % (reply,)
    assert len(reply) % 2 == 0
    return list(zip(reply[0::2], reply[1::2]))


# --------------------------------------------------------------------------
# raw RESP client (shape tests, protocol-error tests)
# --------------------------------------------------------------------------


class Raw:
    """A minimal RESP2/RESP3 client on a plain socket. Replies come back as
    (type-byte, value) so tests can check the exact wire type."""

    def __init__(self, auth=True, timeout=10):
        self.s = socket.create_connection((HOST, PORT), timeout=timeout)
        self.buf = b""
        if PASSWORD and auth:
            assert self.cmd("AUTH", PASSWORD) == ("+", "OK")

    def close(self):
        self.s.close()

    def send(self, data):
        self.s.sendall(data)

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, int):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def cmd(self, *args):
        self.send(self.encode(*args))
        return self.read()

    def _fill(self):
        d = self.s.recv(1 << 16)
        if not d:
            raise ConnectionError("closed by server")
        self.buf += d

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def read(self):
        line = self._line()
        t, rest = chr(line[0]), line[1:]
        if t in "+-":
            return (t, rest.decode())
        if t in ":(":
            return (t, int(rest))
        if t == ",":
            return (t, rest.decode())
        if t == "#":
            return (t, rest == b"t")
        if t == "_":
            return ("_", None)
        if t in "$=!":
            n = int(rest)
            return (t, None if n < 0 else self._exact(n))
        if t in "*~>":
            n = int(rest)
            return (t, None if n < 0 else [self.read() for _ in range(n)])
        if t in "%|":
            n = int(rest)
            return (t, [(self.read(), self.read()) for _ in range(n)])
        raise AssertionError("unknown RESP type %r in %r" % (t, line))

    def read_until_close(self, timeout=3.0):
        """Everything the server sends until it closes the connection.
        Fails if the connection is still open after `timeout`."""
        self.s.settimeout(timeout)
        data = self.buf
        self.buf = b""
        deadline = time.time() + timeout
        while True:
            if time.time() > deadline:
                raise AssertionError("connection not closed; got %r" % data[:200])
            try:
                d = self.s.recv(1 << 16)
            except ConnectionResetError:
                return data
            except socket.timeout:
                raise AssertionError("connection not closed; got %r" % data[:200])
            if not d:
                return data
            data += d


def plain(v):
    """Strip the RESP type tags (for comparing values)."""
    t, x = v
    if t in "$=":
        return None if x is None else x.decode()
    if t in "*~>":
        return None if x is None else [plain(e) for e in x]
    if t == "%":
        return {plain(k): plain(e) for k, e in x}
    return x


# --------------------------------------------------------------------------
# connection, server and introspection commands
# --------------------------------------------------------------------------


def test_ping_echo(r):
    assert r.ping() is True
    c = Raw()
    try:
        assert c.cmd("PING", "hello") == ("$", b"hello")
    finally:
        c.close()
    assert r.echo("héllo wörld") == "héllo wörld"
    assert r.echo("") == ""
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("PING", "a", "b")
    assert err(e) == "wrong number of arguments for 'ping' command"


def test_hello_same_protocol(r):
    reply = r.execute_command("HELLO", r.proto)
    if r.proto == 2:
        assert isinstance(reply, list)
        reply = dict(zip(reply[0::2], reply[1::2]))
    else:
        assert isinstance(reply, dict)
    assert reply["proto"] == r.proto
    for k in ("server", "version", "id", "mode", "role", "modules"):
        assert k in reply, k
    assert isinstance(reply["id"], int)
    assert reply["mode"] == "standalone"
    assert reply["role"] == "master"
    assert reply["modules"] == []


def test_hello_switches_protocol_raw():
    c = Raw()
    try:
        t, v = c.cmd("HELLO", "3")
        assert t == "%"
        h = plain((t, v))
        assert h["proto"] == 3
        assert c.cmd("GET", "nosuchkey") == ("_", None)
        t, v = c.cmd("HELLO", "2")
        assert t == "*"
        h = plain((t, v))
        h = dict(zip(h[0::2], h[1::2]))
        assert h["proto"] == 2
        assert c.cmd("GET", "nosuchkey") == ("$", None)
        t, v = c.cmd("HELLO", "4")
        assert t == "-" and v.startswith("NOPROTO"), v
        # HELLO with no version just reports, keeping the protocol.
        t, v = c.cmd("HELLO")
        assert t == "*"
    finally:
        c.close()


def test_hello_auth():
    c = Raw(auth=False)
    try:
        if PASSWORD:
            t, v = c.cmd("GET", "x")
            assert t == "-" and v.startswith("NOAUTH"), v
            t, v = c.cmd("HELLO", "3", "AUTH", "default", PASSWORD + "-wrong")
            assert t == "-" and v.startswith("WRONGPASS"), v
            t, v = c.cmd("AUTH", PASSWORD + "-wrong")
            assert t == "-" and v.startswith("WRONGPASS"), v
            t, v = c.cmd("HELLO", "3", "AUTH", "default", PASSWORD)
            assert t == "%"
            assert plain((t, v))["proto"] == 3
            assert c.cmd("PING") == ("+", "PONG")
            t, v = c.cmd("HELLO", "2", "AUTH", "default", PASSWORD)
            assert t == "*"
            assert c.cmd("AUTH", PASSWORD) == ("+", "OK")
            assert c.cmd("AUTH", "default", PASSWORD) == ("+", "OK")
        else:
            t, v = c.cmd("AUTH", "whatever")
            assert t == "-" and v.startswith(
                "ERR AUTH <password> called without any password configured"
            ), v
            t, v = c.cmd("HELLO", "3")
            assert t == "%"
    finally:
        c.close()


def test_select_isolation():
    _flushall()
    clients = [make_client(db=i) for i in range(16)]
    try:
        for i, c in enumerate(clients):
            assert c.set("k", "v%d" % i) is True
            if i % 2 == 0:
                c.set("only-even", i)
        for i, c in enumerate(clients):
            assert c.get("k") == "v%d" % i
            assert c.dbsize() == (2 if i % 2 == 0 else 1)
            assert c.exists("only-even") == (1 if i % 2 == 0 else 0)
        with pytest.raises(redis.ResponseError) as e:
            clients[0].execute_command("SELECT", 16)
        assert err(e) == "DB index is out of range"
        with pytest.raises(redis.ResponseError) as e:
            clients[0].execute_command("SELECT", -1)
        assert err(e) == "DB index is out of range"
        # FLUSHDB clears only the selected database.
        assert clients[3].flushdb() is True
        assert clients[3].dbsize() == 0
        assert clients[2].get("k") == "v2"
        assert clients[4].get("k") == "v4"
        # FLUSHALL clears every database.
        clients[0].flushall()
        assert all(c.dbsize() == 0 for c in clients)
    finally:
        for c in clients:
            c.close()


def test_select_raw():
    _flushall()
    c = Raw()
    try:
        assert c.cmd("SELECT", "5") == ("+", "OK")
        assert c.cmd("SET", "k", "five") == ("+", "OK")
        assert c.cmd("SELECT", "0") == ("+", "OK")
        assert c.cmd("GET", "k") == ("$", None)
        assert c.cmd("SELECT", "5") == ("+", "OK")
        assert c.cmd("GET", "k") == ("$", b"five")
        t, v = c.cmd("SELECT", "16")
        assert t == "-" and v == "ERR DB index is out of range"
        t, v = c.cmd("SELECT", "abc")
        assert t == "-" and v.startswith("ERR"), v
        # a failed SELECT keeps the current database
        assert c.cmd("GET", "k") == ("$", b"five")
    finally:
        c.close()


def test_client_commands(r):
    c = make_client(r.proto, single_connection_client=True)
    other = make_client(r.proto, single_connection_client=True)
    try:
        other.ping()
        assert c.client_getname() is None
        assert c.client_setname("tembo-test") is True
        assert c.client_getname() == "tembo-test"
        cid = c.client_id()
        assert isinstance(cid, int) and cid > 0
        assert other.client_id() != cid
        info = c.client_info()
        assert int(info["id"]) == cid
        assert info["name"] == "tembo-test"
        assert int(info["db"]) == 0
        assert "addr" in info and info["addr"].startswith("127.0.0.1:")
        lst = c.client_list()
        ids = {int(e["id"]) for e in lst}
        assert cid in ids and other.client_id() in ids
        mine = [e for e in lst if int(e["id"]) == cid][0]
        assert mine["name"] == "tembo-test"
        with pytest.raises(redis.ResponseError) as e:
            c.client_setname("has space")
        assert err(e).startswith("Client names cannot contain spaces")
        # empty name clears it
        assert c.client_setname("") is True
        assert c.client_getname() is None
    finally:
        c.close()
        other.close()


def test_client_setinfo(r):
    c = make_client(r.proto, single_connection_client=True)
    try:
        try:
            res = c.execute_command("CLIENT", "SETINFO", "LIB-NAME", "tembo-suite")
        except redis.ResponseError as e:
            # CLIENT SETINFO is Redis 7.2+; the reference redis-server 7.0
            # lacks it. Tembo must support it (redis-py sends it on connect).
            if "SETINFO" in str(e) and is_reference_redis():
                pytest.skip("redis-server 7.0 has no CLIENT SETINFO (Redis 7.2+)")
            raise
        assert res in (True, "OK", b"OK")
        assert c.execute_command("CLIENT", "SETINFO", "LIB-VER", "1.2.3") in (True, "OK")
        info = c.client_info()
        assert info["lib-name"] == "tembo-suite"
        assert info["lib-ver"] == "1.2.3"
        with pytest.raises(redis.ResponseError):
            c.execute_command("CLIENT", "SETINFO", "NO-SUCH-ATTR", "x")
    finally:
        c.close()


def test_command_introspection(r):
    n = r.command_count()
    assert isinstance(n, int) and n > 100
    info = r.execute_command("COMMAND", "INFO", "get", "set")
    assert isinstance(info, dict)
    assert info["get"]["name"] == "get"
    assert info["get"]["arity"] == 2
    assert info["get"]["first_key_pos"] == 1
    assert info["set"]["arity"] == -3
    allc = r.command()
    assert isinstance(allc, dict) and len(allc) > 100
    for name in ("get", "set", "hset", "zadd", "multi", "exec", "scan"):
        assert name in allc, name
    # ("COMMAND DOCS" as one word: redis-py splits it and applies no parser)
    docs = r.execute_command("COMMAND DOCS", "get")
    # RESP2: a flat list [name, [k, v, ...]]; RESP3: a map {name: {...}}.
    if r.proto == 3:
        assert isinstance(docs, dict) and "get" in docs
    else:
        assert isinstance(docs, (list, dict))
        if isinstance(docs, list):
            assert docs[0] == "get"


def test_info_sections(r2):
    r = r2
    r.set("a", 1)
    r.set("b", 2)
    r.set("c", 3, ex=1000)
    r.get("a")
    c = Raw()
    try:
        t, text = c.cmd("INFO")
        assert t == "$"
        text = text.decode()
        for sec in ("Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "Keyspace"):
            assert ("# %s" % sec) in text, sec
        assert "db0:keys=3," in text
        t, cs = c.cmd("INFO", "commandstats")
        cs = cs.decode()
        assert "# Commandstats" in cs
        assert "cmdstat_set:calls=" in cs
        t, text = c.cmd("INFO", "all")
        text = text.decode()
        assert "# Commandstats" in text and "# Keyspace" in text
    finally:
        c.close()
    ks = r.info("keyspace")
    assert ks["db0"]["keys"] == 3
    assert ks["db0"]["expires"] == 1
    srv = r.info("server")
    assert "redis_version" in srv
    assert "tcp_port" in srv and int(srv["tcp_port"]) == PORT
    clients = r.info("clients")
    assert int(clients["connected_clients"]) >= 1
    r.flushall()
    assert r.info("keyspace") == {}


def test_info_resp3(r):
    # INFO parses to a dict with both protocols (RESP3 sends a verbatim
    # string "txt:..." or a bulk string).
    r.set("x", 1)
    info = r.info()
    assert info["db0"]["keys"] == 1
    assert "redis_version" in info


def test_dbsize_flushdb_flushall(r):
    assert r.dbsize() == 0
    r.mset({"a": 1, "b": 2, "c": 3})
    r.rpush("l", 1)
    assert r.dbsize() == 4
    assert r.flushdb() is True
    assert r.dbsize() == 0
    r.mset({"a": 1, "b": 2})
    assert r.flushall(asynchronous=True) is True
    assert r.dbsize() == 0
    assert r.get("a") is None
    r.set("a", 1)
    assert r.execute_command("FLUSHALL", "SYNC") in (True, "OK")
    assert r.dbsize() == 0


def test_config(r):
    mc = r.config_get("maxclients")
    assert list(mc) == ["maxclients"]
    assert mc["maxclients"].isdigit() and int(mc["maxclients"]) > 0
    save = r.config_get("save")
    assert list(save) == ["save"] and isinstance(save["save"], str)
    assert r.config_get("appendonly").keys() <= {"appendonly"}
    assert r.config_get("no-such-parameter-xyz") == {}
    old = r.config_get("timeout")["timeout"]
    try:
        assert r.config_set("timeout", 300) is True
        assert r.config_get("timeout") == {"timeout": "300"}
    finally:
        r.config_set("timeout", old)
    with pytest.raises(redis.ResponseError) as e:
        r.config_set("no-such-parameter-xyz", "1")
    assert err(e).startswith("Unknown option"), err(e)


def test_time_lastsave_save(r):
    secs, usecs = r.time()
    assert abs(secs + usecs / 1e6 - time.time()) < 5
    assert 0 <= usecs < 1_000_000
    before = r.lastsave()  # redis-py turns the integer into a datetime
    assert r.save() is True
    after = r.lastsave()
    assert after >= before
    assert abs(after.timestamp() - time.time()) < 5


def test_debug_sleep(r):
    try:
        t0 = time.time()
        assert r.execute_command("DEBUG", "SLEEP", "0") in (True, "OK")
        assert time.time() - t0 < 1
    except redis.ResponseError as e:
        # redis-server 7 refuses DEBUG unless enable-debug-command is set;
        # Tembo must answer OK.
        if "DEBUG command not allowed" in str(e) and is_reference_redis():
            pytest.skip("redis-server started without --enable-debug-command")
        raise


# --------------------------------------------------------------------------
# generic key commands
# --------------------------------------------------------------------------


def test_del_unlink_exists_type(r):
    r.set("s", "v")
    r.rpush("l", "a")
    r.sadd("set", "a")
    r.zadd("z", {"a": 1})
    r.hset("h", "f", "v")
    assert r.type("s") == "string"
    assert r.type("l") == "list"
    assert r.type("set") == "set"
    assert r.type("z") == "zset"
    assert r.type("h") == "hash"
    assert r.type("nope") == "none"
    assert r.exists("s") == 1
    assert r.exists("s", "s", "l", "nope") == 3
    assert r.exists("nope") == 0
    assert r.delete("s", "l", "nope") == 2
    assert r.exists("s", "l") == 0
    assert r.unlink("set", "z", "nope") == 2
    assert r.exists("set", "z") == 0
    assert r.delete("nope") == 0
    assert r.touch("h", "nope", "h") == 2
    assert r.dbsize() == 1


def test_keys_glob(r):
    names = ["hello", "hallo", "hxllo", "hllo", "heeeello", "hbllo", "a*b", "axb", "x?", "xy", "q[1]", "q1"]
    for n in names:
        r.set(n, 1)
    k = lambda p: sorted(r.keys(p))  # noqa: E731
    assert k("*") == sorted(names)
    assert k("h?llo") == ["hallo", "hbllo", "hello", "hxllo"]
    assert k("h*llo") == ["hallo", "hbllo", "heeeello", "hello", "hllo", "hxllo"]
    assert k("h[ae]llo") == ["hallo", "hello"]
    assert k("h[^e]llo") == ["hallo", "hbllo", "hxllo"]
    assert k("h[a-c]llo") == ["hallo", "hbllo"]
    assert k("a\\*b") == ["a*b"]
    assert k("a*b") == ["a*b", "axb"]
    assert k("x\\?") == ["x?"]
    assert k("x?") == ["x?", "xy"]
    assert k("q\\[1\\]") == ["q[1]"]
    assert k("nomatch*") == []
    assert k("hello") == ["hello"]


def test_scan(r):
    expected = set()
    for i in range(300):
        r.set("str:%d" % i, i)
        expected.add("str:%d" % i)
    for i in range(50):
        r.hset("hash:%d" % i, "f", i)
        r.rpush("list:%d" % i, i)
    seen = list(r.scan_iter(count=25))
    assert len(set(seen)) == 400
    seen_s = set(r.scan_iter(match="str:*", count=10))
    assert seen_s == expected
    assert set(r.scan_iter(match="hash:1*", count=7)) == {"hash:1"} | {"hash:1%d" % i for i in range(10)}
    assert set(r.scan_iter(_type="hash", count=50)) == {"hash:%d" % i for i in range(50)}
    assert set(r.scan_iter(_type="list", match="list:4*")) == {"list:4"} | {"list:4%d" % i for i in range(10)}
    assert set(r.scan_iter(_type="zset")) == set()
    # a single SCAN call: cursor is a string "0" when done; redis-py makes it int
    cur, keys = r.scan(0, count=1000)
    assert isinstance(cur, int)
    assert isinstance(keys, list)
    # every key is seen exactly once set-wise over a full iteration
    cursor, got = 0, []
    while True:
        cursor, batch = r.scan(cursor, count=37)
        got.extend(batch)
        if cursor == 0:
            break
    assert set(got) == set(seen)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SCAN", "notanumber")
    assert err(e) == "invalid cursor"


def test_rename(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    assert r.rename("h", "h2") is True
    assert r.exists("h") == 0
    assert r.hgetall("h2") == {"a": "1", "b": "2"}
    r.rpush("l", "x", "y", "z")
    r.expire("l", 1000)
    assert r.rename("l", "l2") is True
    assert r.lrange("l2", 0, -1) == ["x", "y", "z"]
    assert 990 <= r.ttl("l2") <= 1000  # TTL travels with the key
    # RENAME overwrites a destination of another type, and its TTL
    r.set("s", "str")
    r.zadd("dst", {"m": 1})
    r.expire("dst", 500)
    assert r.rename("s", "dst") is True
    assert r.type("dst") == "string" and r.get("dst") == "str"
    assert r.ttl("dst") == -1
    with pytest.raises(redis.ResponseError) as e:
        r.rename("nope", "x")
    assert err(e) == "no such key"
    # rename to itself
    assert r.rename("dst", "dst") is True
    assert r.get("dst") == "str"
    # RENAMENX
    r.set("a", "1")
    r.set("b", "2")
    assert r.renamenx("a", "b") is False
    assert r.get("a") == "1" and r.get("b") == "2"
    assert r.renamenx("a", "c") is True
    assert r.get("c") == "1" and r.exists("a") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.renamenx("nope", "x")
    assert err(e) == "no such key"


def test_expire_family(r):
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.pttl("k") == -1
    assert r.ttl("nope") == -2
    assert r.pttl("nope") == -2
    assert r.expire("nope", 100) is False
    # XX on a key without TTL fails, NX succeeds once
    assert r.expire("k", 100, xx=True) is False
    assert r.ttl("k") == -1
    assert r.expire("k", 100, nx=True) is True
    assert r.expire("k", 200, nx=True) is False
    assert 98 <= r.ttl("k") <= 100
    assert r.expire("k", 200, xx=True) is True
    assert 198 <= r.ttl("k") <= 200
    assert r.expire("k", 100, gt=True) is False
    assert r.expire("k", 300, gt=True) is True
    assert 298 <= r.ttl("k") <= 300
    assert r.expire("k", 400, lt=True) is False
    assert r.expire("k", 50, lt=True) is True
    assert 48 <= r.ttl("k") <= 50
    # no TTL counts as infinite: GT never applies, LT always does
    r.set("p", "v")
    assert r.expire("p", 100, gt=True) is False
    assert r.ttl("p") == -1
    assert r.expire("p", 100, lt=True) is True
    assert 98 <= r.ttl("p") <= 100
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("EXPIRE", "k", 10, "NX", "XX")
    assert err(e).startswith("NX and XX, GT or LT options at the same time are not compatible")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("EXPIRE", "k", 10, "GT", "LT")
    assert err(e) == "GT and LT options at the same time are not compatible"
    # PEXPIRE / PTTL
    assert r.pexpire("k", 100000) is True
    assert 98000 <= r.pttl("k") <= 100000
    assert 99 <= r.ttl("k") <= 100
    # EXPIREAT / PEXPIREAT
    now = int(time.time())
    assert r.expireat("k", now + 1000) is True
    assert 997 <= r.ttl("k") <= 1000
    assert r.expireat("k", now + 10, gt=True) is False
    assert r.pexpireat("k", (now + 2000) * 1000) is True
    assert 1997 <= r.ttl("k") <= 2000
    assert r.pexpireat("k", (now + 1500) * 1000, lt=True) is True
    assert 1497 <= r.ttl("k") <= 1500
    # PERSIST
    assert r.persist("k") is True
    assert r.ttl("k") == -1
    assert r.persist("k") is False
    assert r.persist("nope") is False
    # expire in the past / zero deletes the key
    assert r.expire("k", 0) is True
    assert r.exists("k") == 0
    r.set("k2", "v")
    assert r.expireat("k2", now - 10) is True
    assert r.get("k2") is None
    r.set("k3", "v")
    assert r.pexpire("k3", -5) is True
    assert r.exists("k3") == 0


def test_ttl_kept_and_cleared(r):
    r.set("n", 5, ex=100)
    assert r.incr("n") == 6
    assert 98 <= r.ttl("n") <= 100  # INCR keeps the TTL
    assert r.append("n", "0") == 2
    assert 98 <= r.ttl("n") <= 100  # APPEND keeps the TTL
    r.hset("h", "f", 1)
    r.expire("h", 100)
    r.hset("h", "g", 2)
    assert 98 <= r.ttl("h") <= 100  # writing into a hash keeps it
    r.set("n", 7)
    assert r.ttl("n") == -1  # plain SET clears it
    r.set("n", 8, ex=100)
    r.set("n", 9, keepttl=True)
    assert 98 <= r.ttl("n") <= 100 and r.get("n") == "9"
    r.getset("n", 10)
    assert r.ttl("n") == -1  # GETSET clears it


def test_expiry_expires(r):
    r.set("a", "1")
    r.hset("h", "f", "v")
    r.rpush("l", "x")
    assert r.pexpire("a", 50) is True
    assert r.pexpire("h", 50) is True
    assert r.set("b", "2", px=50) is True
    r.expire("l", 1000)
    time.sleep(0.12)
    assert r.get("a") is None
    assert r.get("b") is None
    assert r.exists("a", "b", "h") == 0
    assert r.hgetall("h") == {}
    assert r.ttl("a") == -2
    assert r.keys("*") == ["l"]
    assert list(r.scan_iter()) == ["l"]
    # an expired key does not block NX, and is a fresh empty key
    assert r.set("a", "new", nx=True) is True
    assert r.hset("h", "g", "w") == 1
    assert r.hgetall("h") == {"g": "w"}


def test_active_expire(r2):
    r = r2
    pipe = r.pipeline(transaction=False)
    for i in range(100):
        pipe.set("ae:%d" % i, i, px=50)
    pipe.set("keep", 1)
    pipe.execute()
    assert r.dbsize() == 101
    # Without touching the keys, the server's background expiry must remove
    # them: DBSIZE counts keys present, expired or not.
    deadline = time.time() + 1.5
    n = r.dbsize()
    while n != 1 and time.time() < deadline:
        time.sleep(0.1)
        n = r.dbsize()
    assert n == 1, "active expiry left %d keys after 1.5 s" % (n - 1)
    assert r.info("keyspace")["db0"]["keys"] == 1


def test_randomkey_object(r):
    assert r.randomkey() is None
    r.set("only", 1)
    assert r.randomkey() == "only"
    r.rpush("l", "a")
    assert {r.randomkey() for _ in range(50)} <= {"only", "l"}
    enc = r.object("encoding", "only")
    assert isinstance(enc, str) and enc
    assert isinstance(r.object("encoding", "l"), str)
    try:
        assert r.object("encoding", "nope") is None
    except redis.ResponseError:
        pass  # an error for a missing key is accepted too


# --------------------------------------------------------------------------
# strings
# --------------------------------------------------------------------------


def test_get_set_options(r):
    assert r.get("k") is None
    assert r.set("k", "v") is True
    assert r.get("k") == "v"
    assert r.set("k", "v2", nx=True) is None
    assert r.get("k") == "v"
    assert r.set("new", "x", xx=True) is None
    assert r.exists("new") == 0
    assert r.set("k", "v3", xx=True) is True
    assert r.get("k") == "v3"
    assert r.set("k", "v4", get=True) == "v3"
    assert r.set("fresh", "f", get=True) is None
    assert r.get("fresh") == "f"
    # NX + GET (Redis 7): returns the old value, does not set
    assert r.set("k", "zz", nx=True, get=True) == "v4"
    assert r.get("k") == "v4"
    assert r.set("k5", "zz", nx=True, get=True) is None
    assert r.get("k5") == "zz"
    assert r.set("e", "v", ex=100) is True
    assert 98 <= r.ttl("e") <= 100
    assert r.set("p", "v", px=100000) is True
    assert 98000 <= r.pttl("p") <= 100000
    now = int(time.time())
    assert r.set("ea", "v", exat=now + 100) is True
    assert 97 <= r.ttl("ea") <= 100
    assert r.set("pa", "v", pxat=(now + 100) * 1000) is True
    assert 97 <= r.ttl("pa") <= 100
    assert r.set("e", "w", keepttl=True) is True
    assert 98 <= r.ttl("e") <= 100 and r.get("e") == "w"
    for bad in (["EX", "0"], ["EX", "-1"], ["PX", "0"]):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("SET", "x", "y", *bad)
        assert err(e) == "invalid expire time in 'set' command"
    for bad in (["NX", "XX"], ["EX", "10", "PX", "100"], ["KEEPTTL", "EX", "10"], ["BOGUS"]):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("SET", "x", "y", *bad)
        assert err(e) == "syntax error"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SET", "x", "y", "EX", "abc")
    assert err(e) == "value is not an integer or out of range"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SET", "x")
    assert err(e) == "wrong number of arguments for 'set' command"
    r.rpush("list", "a")
    with pytest.raises(redis.ResponseError) as e:
        r.set("list", "v", get=True)
    assert err(e).startswith("WRONGTYPE")
    assert r.type("list") == "list"
    # plain SET overwrites any type
    assert r.set("list", "v") is True
    assert r.type("list") == "string"


def test_setnx_setex_psetex_getset_getdel_getex(r):
    assert r.setnx("a", "1") is True
    assert r.setnx("a", "2") is False
    assert r.get("a") == "1"
    assert r.setex("b", 100, "v") is True
    assert 98 <= r.ttl("b") <= 100 and r.get("b") == "v"
    assert r.psetex("c", 100000, "v") is True
    assert 98000 <= r.pttl("c") <= 100000
    for cmd, t in (("SETEX", "0"), ("SETEX", "-5"), ("PSETEX", "0")):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(cmd, "x", t, "v")
        assert err(e) == "invalid expire time in '%s' command" % cmd.lower()
    assert r.getset("a", "new") == "1"
    assert r.get("a") == "new"
    assert r.getset("missing", "x") is None
    assert r.get("missing") == "x"
    assert r.getdel("a") == "new"
    assert r.exists("a") == 0
    assert r.getdel("a") is None
    r.set("g", "v")
    assert r.getex("g") == "v"
    assert r.ttl("g") == -1
    assert r.getex("g", ex=100) == "v"
    assert 98 <= r.ttl("g") <= 100
    assert r.getex("g", px=200000) == "v"
    assert 198 <= r.ttl("g") <= 200
    assert r.getex("g", persist=True) == "v"
    assert r.ttl("g") == -1
    assert r.getex("g", exat=int(time.time()) + 50) == "v"
    assert 47 <= r.ttl("g") <= 50
    assert r.getex("nope", ex=10) is None
    assert r.exists("nope") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GETEX", "g", "EX", "0")
    assert err(e) == "invalid expire time in 'getex' command"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GETEX", "g", "PERSIST", "EX", "1")
    assert err(e) == "syntax error"
    r.rpush("l", "x")
    for fn in (lambda: r.getdel("l"), lambda: r.getex("l"), lambda: r.getset("l", "v")):
        with pytest.raises(redis.ResponseError) as e:
            fn()
        assert err(e).startswith("WRONGTYPE")


def test_mget_mset_msetnx(r):
    assert r.mset({"a": "1", "b": "2", "c": "3"}) is True
    r.rpush("l", "x")
    # MGET gives nil for missing keys AND for keys of another type
    assert r.mget("a", "nope", "b", "l", "c") == ["1", None, "2", None, "3"]
    assert r.msetnx({"d": "4", "a": "9"}) is False
    assert r.get("a") == "1" and r.exists("d") == 0
    assert r.msetnx({"d": "4", "e": "5"}) is True
    assert r.mget("d", "e") == ["4", "5"]
    # MSET with the same key twice: the last value wins
    assert r.execute_command("MSET", "z", "1", "z", "2") in (True, "OK")
    assert r.get("z") == "2"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MSET", "a", "1", "b")
    assert err(e) == "wrong number of arguments for 'mset' command"


def test_incr_decr(r):
    assert r.incr("n") == 1
    assert r.incr("n") == 2
    assert r.decr("n") == 1
    assert r.incrby("n", 10) == 11
    assert r.decrby("n", 20) == -9
    assert r.get("n") == "-9"
    assert r.decr("m") == -1
    assert r.incrby("x", -5) == -5
    r.set("max", str(2**63 - 1))
    with pytest.raises(redis.ResponseError) as e:
        r.incr("max")
    assert err(e) == "increment or decrement would overflow"
    assert r.get("max") == str(2**63 - 1)
    r.set("min", str(-(2**63)))
    with pytest.raises(redis.ResponseError) as e:
        r.decr("min")
    assert err(e) == "increment or decrement would overflow"
    with pytest.raises(redis.ResponseError) as e:
        r.incrby("min", -1)
    assert err(e) == "increment or decrement would overflow"
    for bad in ("abc", "1.5", " 1", "1 ", "", "99999999999999999999", "+1"):
        r.set("bad", bad)
        with pytest.raises(redis.ResponseError) as e:
            r.incr("bad")
        assert err(e) == "value is not an integer or out of range", bad
    with pytest.raises(redis.ResponseError) as e:
        r.incrby("n", "x")
    assert err(e) == "value is not an integer or out of range"
    r.set("lead", "007")
    with pytest.raises(redis.ResponseError):
        r.incr("lead")  # leading zeros are not a canonical integer
    r.hset("h", "f", 1)
    with pytest.raises(redis.ResponseError) as e:
        r.incr("h")
    assert err(e).startswith("WRONGTYPE")


def test_incrbyfloat(r):
    assert r.incrbyfloat("f", 10.5) == 10.5
    assert r.incrbyfloat("f", 0.1) == pytest.approx(10.6)
    assert r.get("f") == "10.6"
    assert r.incrbyfloat("f", -5) == pytest.approx(5.6)
    assert r.incrbyfloat("i", 3) == 3.0
    assert r.get("i") == "3"  # no trailing ".0"
    r.set("e", "5.0e3")
    assert r.incrbyfloat("e", 2.0e2) == 5200.0
    assert r.get("e") == "5200"
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError) as e:
        r.incrbyfloat("s", 1)
    assert err(e) == "value is not a valid float"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("INCRBYFLOAT", "f", "nan")
    assert err(e) == "value is not a valid float"
    # the raw reply is a bulk string in both protocols
    raw = Raw()
    try:
        assert raw.cmd("INCRBYFLOAT", "rf", "1.5") == ("$", b"1.5")
    finally:
        raw.close()


def test_append_strlen_getrange_setrange(r):
    assert r.append("s", "Hello") == 5
    assert r.append("s", " World") == 11
    assert r.get("s") == "Hello World"
    assert r.strlen("s") == 11
    assert r.strlen("nope") == 0
    r.set("t", "This is a string")
    assert r.getrange("t", 0, 3) == "This"
    assert r.getrange("t", -3, -1) == "ing"
    assert r.getrange("t", 0, -1) == "This is a string"
    assert r.getrange("t", 10, 100) == "string"
    assert r.getrange("t", 5, 3) == ""
    assert r.getrange("t", -100, 3) == "This"
    assert r.getrange("t", 100, 200) == ""
    assert r.getrange("nope", 0, -1) == ""
    assert r.setrange("t", 10, "STRING") == 16
    assert r.get("t") == "This is a STRING"
    assert r.setrange("t", 16, "!") == 17
    assert r.get("t") == "This is a STRING!"
    assert r.setrange("pad", 5, "x") == 6
    assert r.get("pad") == "\x00\x00\x00\x00\x00x"
    assert r.setrange("t", 0, "") == 17
    assert r.setrange("empty", 3, "") == 0
    assert r.exists("empty") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.setrange("t", -1, "x")
    assert err(e) == "offset is out of range"
    r.set("num", 12345)
    assert r.getrange("num", 1, 2) == "23"
    assert r.strlen("num") == 5


def test_wrongtype_errors(r):
    r.rpush("list", "a")
    r.set("str", "v")
    r.hset("hash", "f", "v")
    r.sadd("set", "m")
    r.zadd("zset", {"m": 1})
    calls = [
        lambda: r.get("list"),
        lambda: r.append("list", "x"),
        lambda: r.lpush("str", "x"),
        lambda: r.hget("str", "f"),
        lambda: r.sadd("hash", "x"),
        lambda: r.zadd("set", {"x": 1}),
        lambda: r.incr("hash"),
        lambda: r.smembers("zset"),
        lambda: r.lrange("set", 0, -1),
        lambda: r.zscore("hash", "f"),
        lambda: r.hgetall("list"),
        lambda: r.strlen("list"),
    ]
    for fn in calls:
        with pytest.raises(redis.ResponseError) as e:
            fn()
        assert err(e) == "WRONGTYPE Operation against a key holding the wrong kind of value"
    assert r.get("str") == "v" and r.llen("list") == 1


# --------------------------------------------------------------------------
# hashes
# --------------------------------------------------------------------------


def test_hash_basic(r):
    assert r.hset("h", "a", "1") == 1
    assert r.hset("h", mapping={"a": "10", "b": "2", "c": "3"}) == 2
    assert r.hmset("h", {"d": "4"}) is True
    assert r.hget("h", "a") == "10"
    assert r.hget("h", "zz") is None
    assert r.hget("nope", "a") is None
    assert r.hmget("h", ["a", "zz", "d"]) == ["10", None, "4"]
    assert r.hmget("nope", ["a", "b"]) == [None, None]
    assert r.hgetall("h") == {"a": "10", "b": "2", "c": "3", "d": "4"}
    assert r.hgetall("nope") == {}
    assert r.hlen("h") == 4
    assert r.hlen("nope") == 0
    assert r.hexists("h", "a") in (True, 1)
    assert r.hexists("h", "zz") in (False, 0)
    assert sorted(r.hkeys("h")) == ["a", "b", "c", "d"]
    assert sorted(r.hvals("h")) == ["10", "2", "3", "4"]
    assert r.hdel("h", "a", "zz", "b") == 2
    assert r.hlen("h") == 2
    assert r.hstrlen("h", "c") == 1
    assert r.hstrlen("h", "zz") == 0
    assert r.hdel("h", "c", "d") == 2
    assert r.exists("h") == 0  # an emptied hash is deleted
    assert r.hkeys("h") == []
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("HSET", "h", "f")
    assert err(e) == "wrong number of arguments for 'hset' command"


def test_hash_incr_setnx(r):
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrby("h", "n", -7) == -2
    assert r.hincrbyfloat("h", "f", 2.5) == 2.5
    assert r.hincrbyfloat("h", "f", 0.1) == pytest.approx(2.6)
    assert r.hget("h", "f") == "2.6"
    r.hset("h", "s", "abc")
    with pytest.raises(redis.ResponseError) as e:
        r.hincrby("h", "s", 1)
    assert err(e) == "hash value is not an integer"
    with pytest.raises(redis.ResponseError) as e:
        r.hincrbyfloat("h", "s", 1)
    assert err(e) == "hash value is not a float"
    r.hset("h", "max", str(2**63 - 1))
    with pytest.raises(redis.ResponseError) as e:
        r.hincrby("h", "max", 1)
    assert err(e) == "increment or decrement would overflow"
    assert r.hsetnx("h", "n", "9") in (False, 0)
    assert r.hget("h", "n") == "-2"
    assert r.hsetnx("h", "new", "9") in (True, 1)
    assert r.hget("h", "new") == "9"


def test_hscan_hrandfield(r):
    fields = {"f%d" % i: "v%d" % i for i in range(200)}
    r.hset("h", mapping=fields)
    got = dict(r.hscan_iter("h", count=20))
    assert got == fields
    got = dict(r.hscan_iter("h", match="f1?", count=5))
    assert got == {"f1%d" % i: "v1%d" % i for i in range(10)}
    cur, page = r.hscan("nope", 0)
    assert cur == 0 and page == {}
    # HRANDFIELD
    assert r.hrandfield("nope") is None
    assert r.hrandfield("nope", 3) == []
    one = r.hrandfield("h")
    assert one in fields
    pos = r.hrandfield("h", 10)
    assert len(pos) == 10 and len(set(pos)) == 10 and set(pos) <= set(fields)
    allf = r.hrandfield("h", 500)
    assert sorted(allf) == sorted(fields)
    neg = r.hrandfield("h", -300)
    assert len(neg) == 300 and set(neg) <= set(fields)
    wv = as_pairs(r, r.hrandfield("h", 5, withvalues=True))
    assert len(wv) == 5 and len({f for f, _ in wv}) == 5
    assert all(fields[f] == v for f, v in wv)
    wvn = as_pairs(r, r.hrandfield("h", -20, withvalues=True))
    assert len(wvn) == 20 and all(fields[f] == v for f, v in wvn)
    r.hset("small", "only", "x")
    assert r.hrandfield("small", -3) == ["only", "only", "only"]


# --------------------------------------------------------------------------
# lists
# --------------------------------------------------------------------------


def test_list_push_pop(r):
    assert r.lpush("l", "a", "b", "c") == 3
    assert r.lrange("l", 0, -1) == ["c", "b", "a"]
    assert r.rpush("l", "x", "y") == 5
    assert r.lrange("l", 0, -1) == ["c", "b", "a", "x", "y"]
    assert r.lpushx("nope", "a") == 0
    assert r.rpushx("nope", "a") == 0
    assert r.exists("nope") == 0
    assert r.lpushx("l", "first") == 6
    assert r.rpushx("l", "last") == 7
    assert r.llen("l") == 7
    assert r.llen("nope") == 0
    assert r.lpop("l") == "first"
    assert r.rpop("l") == "last"
    assert r.lpop("l", 2) == ["c", "b"]
    assert r.rpop("l", 2) == ["y", "x"]
    assert r.lpop("l", 10) == ["a"]
    assert r.exists("l") == 0  # popping the last element deletes the key
    assert r.lpop("l") is None
    assert r.rpop("l") is None
    assert r.lpop("l", 3) is None
    r.rpush("l", "a")
    assert r.lpop("l", 0) == []
    with pytest.raises(redis.ResponseError) as e:
        r.lpop("l", -1)
    assert err(e) == "value is out of range, must be positive"


def test_list_range_index_set(r):
    r.rpush("l", *[str(i) for i in range(10)])
    assert r.lrange("l", 0, 2) == ["0", "1", "2"]
    assert r.lrange("l", -3, -1) == ["7", "8", "9"]
    assert r.lrange("l", -100, 1) == ["0", "1"]
    assert r.lrange("l", 8, 100) == ["8", "9"]
    assert r.lrange("l", 5, 2) == []
    assert r.lrange("l", 20, 30) == []
    assert r.lrange("nope", 0, -1) == []
    assert r.lindex("l", 0) == "0"
    assert r.lindex("l", -1) == "9"
    assert r.lindex("l", -10) == "0"
    assert r.lindex("l", 10) is None
    assert r.lindex("l", -11) is None
    assert r.lindex("nope", 0) is None
    assert r.lset("l", 0, "zero") is True
    assert r.lset("l", -1, "nine") is True
    assert r.lindex("l", 0) == "zero" and r.lindex("l", 9) == "nine"
    with pytest.raises(redis.ResponseError) as e:
        r.lset("l", 10, "x")
    assert err(e) == "index out of range"
    with pytest.raises(redis.ResponseError) as e:
        r.lset("l", -11, "x")
    assert err(e) == "index out of range"
    with pytest.raises(redis.ResponseError) as e:
        r.lset("nope", 0, "x")
    assert err(e) == "no such key"


def test_lrem_ltrim(r):
    r.rpush("l", "a", "b", "a", "c", "a", "b", "a")
    assert r.lrem("l", 2, "a") == 2
    assert r.lrange("l", 0, -1) == ["b", "c", "a", "b", "a"]
    r.delete("l")
    r.rpush("l", "a", "b", "a", "c", "a", "b", "a")
    assert r.lrem("l", -2, "a") == 2
    assert r.lrange("l", 0, -1) == ["a", "b", "a", "c", "b"]
    assert r.lrem("l", 0, "a") == 2
    assert r.lrange("l", 0, -1) == ["b", "c", "b"]
    assert r.lrem("l", 0, "zz") == 0
    assert r.lrem("nope", 0, "a") == 0
    assert r.lrem("l", 0, "b") == 2
    assert r.lrem("l", 0, "c") == 1
    assert r.exists("l") == 0
    r.rpush("t", *[str(i) for i in range(10)])
    assert r.ltrim("t", 2, -3) is True
    assert r.lrange("t", 0, -1) == ["2", "3", "4", "5", "6", "7"]
    assert r.ltrim("t", -2, 100) is True
    assert r.lrange("t", 0, -1) == ["6", "7"]
    assert r.ltrim("t", 5, 1) is True
    assert r.exists("t") == 0  # trimmed to empty: gone
    assert r.ltrim("nope", 0, 1) is True


# --------------------------------------------------------------------------
# sets
# --------------------------------------------------------------------------


def test_set_basic(r):
    assert r.sadd("s", "a", "b", "c", "a") == 3
    assert r.sadd("s", "c", "d") == 1
    assert r.smembers("s") == {"a", "b", "c", "d"}
    assert r.smembers("nope") == set()
    assert r.scard("s") == 4
    assert r.scard("nope") == 0
    assert r.sismember("s", "a") == 1
    assert r.sismember("s", "z") == 0
    assert r.sismember("nope", "a") == 0
    assert list(r.smismember("s", ["a", "z", "d"])) == [1, 0, 1]
    assert r.srem("s", "a", "z") == 1
    assert r.smembers("s") == {"b", "c", "d"}
    assert r.srem("s", "b", "c", "d") == 3
    assert r.exists("s") == 0
    r.sadd("n", *[str(i) for i in range(100)])
    got = set(r.sscan_iter("n", count=10))
    assert got == {str(i) for i in range(100)}
    assert set(r.sscan_iter("n", match="9*")) == {"9"} | {"9%d" % i for i in range(10)}


def test_spop_srandmember(r):
    members = {"m%d" % i for i in range(20)}
    r.sadd("s", *members)
    one = r.spop("s")
    assert one in members and r.scard("s") == 19
    popped = r.spop("s", 5)
    assert len(popped) == 5 and len(set(popped)) == 5 and one not in popped
    assert r.scard("s") == 14
    rest = set(r.smembers("s"))
    assert rest | set(popped) | {one} == members
    assert r.spop("nope") is None
    assert list(r.spop("nope", 3)) == []  # (redis-py 5 makes it a set in RESP3)
    everything = r.spop("s", 100)
    assert set(everything) == rest
    assert r.exists("s") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.spop("s", -1)
    assert err(e) == "value is out of range, must be positive"
    r.sadd("t", *members)
    assert r.srandmember("t") in members
    pos = r.srandmember("t", 5)
    assert len(pos) == 5 and len(set(pos)) == 5 and set(pos) <= members
    assert sorted(r.srandmember("t", 100)) == sorted(members)
    neg = r.srandmember("t", -50)
    assert len(neg) == 50 and set(neg) <= members
    assert r.scard("t") == 20  # SRANDMEMBER does not remove
    assert r.srandmember("nope") is None
    assert r.srandmember("nope", 5) == []
    r.sadd("one", "x")
    assert r.srandmember("one", -3) == ["x", "x", "x"]


def test_set_algebra(r):
    r.sadd("a", "1", "2", "3", "4")
    r.sadd("b", "3", "4", "5")
    r.sadd("c", "4", "6")
    assert r.sinter("a", "b") == {"3", "4"}
    assert r.sinter("a", "b", "c") == {"4"}
    assert r.sinter("a", "nope") == set()
    assert r.sunion("a", "b") == {"1", "2", "3", "4", "5"}
    assert r.sunion("a", "nope") == {"1", "2", "3", "4"}
    assert r.sdiff("a", "b") == {"1", "2"}
    assert r.sdiff("a", "b", "c") == {"1", "2"}
    assert r.sdiff("nope", "a") == set()
    assert r.sdiff("a", "nope") == {"1", "2", "3", "4"}
    r.set("str", "x")
    with pytest.raises(redis.ResponseError) as e:
        r.sunion("a", "str")
    assert err(e).startswith("WRONGTYPE")


# --------------------------------------------------------------------------
# sorted sets
# --------------------------------------------------------------------------


def test_zadd_options(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd("z", {"a": 5, "d": 4}) == 1  # counts only new members
    assert r.zscore("z", "a") == 5.0
    assert r.zadd("z", {"a": 6, "e": 5}, ch=True) == 2  # added + changed
    assert r.zadd("z", {"a": 6}, ch=True) == 0  # unchanged score
    assert r.zadd("z", {"a": 100, "f": 1}, nx=True) == 1
    assert r.zscore("z", "a") == 6.0 and r.zscore("z", "f") == 1.0
    assert r.zadd("z", {"a": 7, "g": 1}, xx=True) == 0
    assert r.zscore("z", "a") == 7.0 and r.zscore("z", "g") is None
    assert r.zadd("z", {"a": 7.5, "g": 1}, xx=True, ch=True) == 1
    # GT/LT only update when the new score is greater/less; they still add
    assert r.zadd("z", {"a": 3}, gt=True, ch=True) == 0
    assert r.zscore("z", "a") == 7.5
    assert r.zadd("z", {"a": 9}, gt=True, ch=True) == 1
    assert r.zscore("z", "a") == 9.0
    assert r.zadd("z", {"a": 10}, lt=True, ch=True) == 0
    assert r.zadd("z", {"a": 2, "h": 8}, lt=True, ch=True) == 2
    assert r.zscore("z", "a") == 2.0 and r.zscore("z", "h") == 8.0
    # INCR: returns the new score
    assert r.zadd("z", {"a": 1.5}, incr=True) == 3.5
    assert r.zadd("z", {"new": 2}, incr=True) == 2.0
    assert r.zadd("z", {"a": 1}, incr=True, nx=True) is None
    assert r.zadd("z", {"nope": 1}, incr=True, xx=True) is None
    assert r.zscore("z", "nope") is None
    assert r.zadd("z", {"a": -10}, incr=True, gt=True) is None
    assert r.zscore("z", "a") == 3.5
    for opts, msg in (
        (["NX", "XX"], "XX and NX options at the same time are not compatible"),
        (["GT", "LT"], "GT, LT, and/or NX options at the same time are not compatible"),
        (["NX", "GT"], "GT, LT, and/or NX options at the same time are not compatible"),
    ):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("ZADD", "z", *opts, "1", "q")
        assert err(e) == msg
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ZADD", "z", "INCR", "1", "a", "2", "b")
    assert err(e) == "INCR option supports a single increment-element pair"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ZADD", "z", "notafloat", "a")
    assert err(e) == "value is not a valid float"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ZADD", "z", "nan", "a")
    assert err(e) == "value is not a valid float"
    assert r.zadd("inf", {"p": float("inf"), "n": float("-inf")}) == 2
    assert r.zscore("inf", "p") == float("inf")
    assert r.zscore("inf", "n") == float("-inf")


def test_zset_basic(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zcard("z") == 4
    assert r.zcard("nope") == 0
    assert r.zscore("z", "b") == 2.0
    assert r.zscore("z", "zz") is None
    assert r.zscore("nope", "a") is None
    assert r.zmscore("z", ["a", "zz", "d"]) == [1.0, None, 4.0]
    assert r.zmscore("nope", ["a"]) == [None]
    assert r.zrem("z", "a", "zz") == 1
    assert r.zcard("z") == 3
    assert r.zincrby("z", 2.5, "b") == 4.5
    assert r.zincrby("z", 1, "new") == 1.0
    assert r.zscore("z", "new") == 1.0
    r.zadd("f", {"x": 0.1})
    assert r.zincrby("f", 0.2, "x") == pytest.approx(0.3)
    assert r.zrem("z", "b", "c", "d", "new") == 4
    assert r.exists("z") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ZINCRBY", "z", "nan", "a")
    assert err(e) == "value is not a valid float"


def test_zcount_rank(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zcount("z", 2, 4) == 3
    assert r.zcount("z", "(2", 4) == 2
    assert r.zcount("z", 2, "(4") == 2
    assert r.zcount("z", "(2", "(4") == 1
    assert r.zcount("z", "-inf", "+inf") == 5
    assert r.zcount("z", "-inf", 2) == 2
    assert r.zcount("z", "(5", "+inf") == 0
    assert r.zcount("z", 4, 2) == 0
    assert r.zcount("nope", "-inf", "+inf") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.zcount("z", "x", 2)
    assert err(e) == "min or max is not a float"
    assert r.zrank("z", "a") == 0
    assert r.zrank("z", "e") == 4
    assert r.zrevrank("z", "a") == 4
    assert r.zrevrank("z", "e") == 0
    assert r.zrank("z", "zz") is None
    assert r.zrevrank("nope", "a") is None


def test_zrange_variants(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zrange("z", 0, -1) == ["a", "b", "c", "d", "e"]
    assert r.zrange("z", -2, -1) == ["d", "e"]
    assert r.zrange("z", 3, 100) == ["d", "e"]
    assert r.zrange("z", 4, 1) == []
    assert r.zrange("nope", 0, -1) == []
    assert as_pairs(r, r.zrange("z", 0, 1, withscores=True)) == [("a", 1.0), ("b", 2.0)]
    assert r.zrange("z", 0, -1, desc=True) == ["e", "d", "c", "b", "a"]
    assert r.zrevrange("z", 0, 1) == ["e", "d"]
    assert as_pairs(r, r.zrevrange("z", 0, 1, withscores=True)) == [("e", 5.0), ("d", 4.0)]
    # BYSCORE
    assert r.zrange("z", 2, 4, byscore=True) == ["b", "c", "d"]
    assert r.zrange("z", "(2", "+inf", byscore=True) == ["c", "d", "e"]
    assert r.zrange("z", "-inf", "(3", byscore=True) == ["a", "b"]
    assert r.zrange("z", 4, 2, byscore=True, desc=True) == ["d", "c", "b"]
    assert r.zrange("z", "-inf", "+inf", byscore=True, offset=1, num=2) == ["b", "c"]
    assert r.zrange("z", "+inf", "-inf", byscore=True, desc=True, offset=1, num=2) == ["d", "c"]
    assert r.zrange("z", "-inf", "+inf", byscore=True, offset=10, num=2) == []
    assert r.zrange("z", "-inf", "+inf", byscore=True, offset=3, num=-1) == ["d", "e"]
    assert as_pairs(r, r.zrange("z", 4, 5, byscore=True, withscores=True)) == [("d", 4.0), ("e", 5.0)]
    assert r.zrangebyscore("z", 2, 3) == ["b", "c"]
    assert r.zrangebyscore("z", "(1", "(3") == ["b"]
    assert r.zrangebyscore("z", "-inf", "+inf", start=2, num=2) == ["c", "d"]
    assert as_pairs(r, r.zrangebyscore("z", 1, 2, withscores=True)) == [("a", 1.0), ("b", 2.0)]
    assert r.zrevrangebyscore("z", 4, 2) == ["d", "c", "b"]
    assert r.zrevrangebyscore("z", "+inf", "-inf", start=0, num=2) == ["e", "d"]
    assert as_pairs(r, r.zrevrangebyscore("z", "(5", 3, withscores=True)) == [("d", 4.0), ("c", 3.0)]
    # BYLEX (all scores equal)
    r.zadd("lex", {m: 0 for m in ["a", "b", "c", "d", "e", "f", "g"]})
    assert r.zrange("lex", "-", "+", bylex=True) == ["a", "b", "c", "d", "e", "f", "g"]
    assert r.zrange("lex", "[b", "[d", bylex=True) == ["b", "c", "d"]
    assert r.zrange("lex", "(b", "(d", bylex=True) == ["c"]
    assert r.zrange("lex", "[e", "+", bylex=True) == ["e", "f", "g"]
    assert r.zrange("lex", "+", "[e", bylex=True, desc=True) == ["g", "f", "e"]
    assert r.zrange("lex", "-", "+", bylex=True, offset=2, num=3) == ["c", "d", "e"]
    assert r.zrangebylex("lex", "[aa", "(c") == ["b"]
    with pytest.raises(redis.ResponseError) as e:
        r.zrange("lex", "b", "d", bylex=True)
    assert err(e) == "min or max not valid string range item"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1")
    assert err(e).startswith("syntax error")
    with pytest.raises(redis.ResponseError) as e:
        r.zrangebyscore("z", "x", "y")
    assert err(e) == "min or max is not a float"


def test_zset_equal_score_order(r):
    r.zadd("z", {"delta": 1, "alpha": 1, "charlie": 1, "bravo": 1, "aaa": 0, "zzz": 2})
    assert r.zrange("z", 0, -1) == ["aaa", "alpha", "bravo", "charlie", "delta", "zzz"]
    assert r.zrevrange("z", 0, -1) == ["zzz", "delta", "charlie", "bravo", "alpha", "aaa"]
    assert r.zrangebyscore("z", 1, 1) == ["alpha", "bravo", "charlie", "delta"]
    assert r.zrank("z", "charlie") == 3
    assert r.zrevrank("z", "charlie") == 2
    # members compare as bytes (memcmp), so "B" < "a" and "a" < "ab"
    r.zadd("b", {"ab": 5, "a": 5, "B": 5, "b": 5})
    assert r.zrange("b", 0, -1) == ["B", "a", "ab", "b"]


def test_zremrange_zpop(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6})
    assert r.zremrangebyscore("z", "(1", 3) == 2
    assert r.zrange("z", 0, -1) == ["a", "d", "e", "f"]
    assert r.zremrangebyscore("z", 100, 200) == 0
    assert r.zremrangebyrank("z", 0, 1) == 2
    assert r.zrange("z", 0, -1) == ["e", "f"]
    assert r.zremrangebyrank("z", -1, -1) == 1
    assert r.zrange("z", 0, -1) == ["e"]
    assert r.zremrangebyrank("z", 0, -1) == 1
    assert r.exists("z") == 0
    r.zadd("p", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    one = r.zpopmin("p")
    # redis-py keeps RESP2's [(m, s)]; RESP3 without COUNT is a flat [m, s]
    if r.proto == 3:
        assert one == ["a", 1.0]
    else:
        assert one == [("a", 1.0)]
    assert as_pairs(r, r.zpopmin("p", 2)) == [("b", 2.0), ("c", 3.0)]
    top = r.zpopmax("p")
    assert top == (["e", 5.0] if r.proto == 3 else [("e", 5.0)])
    assert as_pairs(r, r.zpopmax("p", 10)) == [("d", 4.0)]
    assert r.exists("p") == 0
    assert r.zpopmin("p") == []
    assert r.zpopmax("p", 3) == []


def test_zscan(r):
    members = {"m%d" % i: float(i) for i in range(150)}
    r.zadd("z", members)
    got = dict(r.zscan_iter("z", count=10))
    assert got == members
    got = dict(r.zscan_iter("z", match="m1?"))
    assert got == {"m1%d" % i: float(10 + i) for i in range(10)}
    cur, page = r.zscan("nope", 0)
    assert cur == 0 and list(page) == []


def fscored(r, reply):
    """(member, float score) pairs of a WITHSCORES reply in either protocol."""
    return [(m, float(sc)) for m, sc in as_pairs(r, reply)]


def zmpopped(reply):
    """ZMPOP/BZMPOP's [key, [[member, score]...]] with float scores (redis-py
    leaves RESP2's score strings as they are)."""
    if reply is None:
        return None
    key, pairs = reply
    return [key, [(m, float(sc)) for m, sc in pairs]]


def test_zunion_zinter_zdiff(r):
    r.zadd("a", {"x": 1, "y": 2, "z": 3})
    r.zadd("b", {"y": 10, "w": 5})
    r.sadd("s", "x", "q")  # a plain set: every member scores 1
    assert r.zunion(["a", "b"]) == ["x", "z", "w", "y"]
    assert fscored(r, r.zunion(["a", "b"], withscores=True)) == [("x", 1), ("z", 3), ("w", 5), ("y", 12)]
    assert fscored(r, r.zunion({"a": 2, "b": -1}, withscores=True)) == [
        ("y", -6), ("w", -5), ("x", 2), ("z", 6)]
    assert fscored(r, r.zunion(["a", "b"], aggregate="MIN", withscores=True)) == [
        ("x", 1), ("y", 2), ("z", 3), ("w", 5)]
    assert fscored(r, r.zunion(["a", "s"], withscores=True)) == [("q", 1), ("x", 2), ("y", 2), ("z", 3)]
    assert fscored(r, r.zinter(["a", "b"], aggregate="MAX", withscores=True)) == [("y", 10)]
    assert fscored(r, r.zinter(["a", "s"], withscores=True)) == [("x", 2)]
    assert r.zinter(["a", "nope"]) == []
    assert fscored(r, r.zdiff(["a", "b", "s"], withscores=True)) == [("z", 3)]
    assert r.zdiff(["a", "a"]) == []
    assert r.zdiff(["s", "a"]) == ["q"]
    # inf + -inf sums to 0, not NaN
    r.zadd("i1", {"m": float("inf")})
    r.zadd("i2", {"m": float("-inf")})
    assert fscored(r, r.zunion(["i1", "i2"], withscores=True)) == [("m", 0.0)]
    assert r.zintercard(2, ["a", "b"]) == 1
    assert r.zintercard(2, ["a", "s"], limit=0) == 1
    r.zadd("c", {"x": 0, "y": 0, "z": 0})
    assert r.zintercard(2, ["a", "c"], limit=2) == 2


def test_zset_algebra_store(r):
    r.zadd("a", {"x": 1, "y": 2})
    r.zadd("b", {"y": 3, "z": 4})
    r.set("dst", "was a string")
    r.expire("dst", 100)
    assert r.zunionstore("dst", ["a", "b"]) == 3
    assert fscored(r, r.zrange("dst", 0, -1, withscores=True)) == [("x", 1.0), ("z", 4.0), ("y", 5.0)]
    assert r.ttl("dst") == -1  # replaced whole, TTL included
    assert r.zinterstore("dst", {"a": 10, "b": 1}) == 1
    assert fscored(r, r.zrange("dst", 0, -1, withscores=True)) == [("y", 23.0)]
    assert r.zdiffstore("dst", ["a", "b"]) == 1
    assert fscored(r, r.zrange("dst", 0, -1, withscores=True)) == [("x", 1.0)]
    # An empty result deletes the destination.
    assert r.zinterstore("dst", ["a", "nope"]) == 0
    assert r.exists("dst") == 0
    # The destination may be an input.
    assert r.zunionstore("a", ["a", "a"]) == 2
    assert fscored(r, r.zrange("a", 0, -1, withscores=True)) == [("x", 2.0), ("y", 4.0)]


def test_zset_algebra_errors(r):
    r.zadd("a", {"x": 1})
    r.rpush("l", "v")
    for args, msg in [
        (("ZUNION", "0", "a"), "at least 1 input key is needed for 'zunion' command"),
        (("ZINTERSTORE", "d", "0", "a"), "at least 1 input key is needed for 'zinterstore' command"),
        (("ZINTERCARD", "-1", "a"), "at least 1 input key is needed for 'zintercard' command"),
        (("ZUNION", "x", "a"), "value is not an integer or out of range"),
        (("ZUNION", "2", "a"), "syntax error"),
        (("ZUNION", "2", "a", "l"), "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (("ZUNION", "1", "a", "WEIGHTS", "nan"), "weight value is not a float"),
        (("ZUNION", "1", "a", "WEIGHTS"), "syntax error"),
        (("ZUNION", "1", "a", "AGGREGATE", "AVG"), "syntax error"),
        (("ZDIFF", "1", "a", "WEIGHTS", "1"), "syntax error"),
        (("ZDIFF", "1", "a", "AGGREGATE", "SUM"), "syntax error"),
        (("ZUNIONSTORE", "d", "1", "a", "WITHSCORES"), "syntax error"),
        (("ZINTERCARD", "1", "a", "LIMIT", "-1"), "LIMIT can't be negative"),
        (("ZINTERCARD", "1", "a", "LIMIT", "x"), "LIMIT can't be negative"),
        (("ZINTERCARD", "1", "a", "WITHSCORES"), "syntax error"),
        (("ZINTERCARD", "1", "a", "a"), "syntax error"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*args)
        assert err(e) == msg, args


def test_zrangestore(r):
    r.zadd("src", {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zrangestore("dst", "src", 1, 2) == 2
    assert fscored(r, r.zrange("dst", 0, -1, withscores=True)) == [("b", 2.0), ("c", 3.0)]
    assert r.zrangestore("dst", "src", "(1", "+inf", byscore=True, offset=1, num=2) == 2
    assert r.zrange("dst", 0, -1) == ["c", "d"]
    assert r.zrangestore("dst", "src", "+inf", "-inf", byscore=True, desc=True, offset=0, num=1) == 1
    assert fscored(r, r.zrange("dst", 0, -1, withscores=True)) == [("d", 4.0)]
    r.zadd("lex", {"a": 0, "b": 0, "c": 0})
    assert r.zrangestore("dst", "lex", "[b", "+", bylex=True) == 2
    assert r.zrange("dst", 0, -1) == ["b", "c"]
    assert r.zrangestore("dst", "src", 10, 20) == 0
    assert r.exists("dst") == 0
    r.zadd("dst", {"m": 1})
    assert r.zrangestore("dst", "missing", 0, -1) == 0
    assert r.exists("dst") == 0
    r.set("str", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.zrangestore("dst", "str", 0, -1)
    assert "WRONGTYPE" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ZRANGESTORE", "dst", "src", "0", "-1", "WITHSCORES")
    assert err(e) == "syntax error"


def test_zrandmember(r):
    scores = {"a": 1.0, "b": 2.5, "c": -3.0}
    r.zadd("z", scores)
    assert r.zrandmember("z") in scores
    assert r.zrandmember("missing") is None
    assert r.zrandmember("missing", 3) == []
    assert r.zrandmember("z", 0) == []
    got = r.zrandmember("z", 10)
    assert sorted(got) == ["a", "b", "c"]
    got = r.zrandmember("z", -7)
    assert len(got) == 7 and set(got) <= set(scores)
    pairs = fscored(r, r.zrandmember("z", 2, withscores=True))
    assert len(pairs) == 2 and len({m for m, _ in pairs}) == 2
    assert all(scores[m] == sc for m, sc in pairs)
    pairs = fscored(r, r.zrandmember("z", -5, withscores=True))
    assert len(pairs) == 5 and all(scores[m] == sc for m, sc in pairs)
    for args, msg in [
        (("ZRANDMEMBER", "z", "1", "FOO"), "syntax error"),
        (("ZRANDMEMBER", "z", "x"), "value is not an integer or out of range"),
        (("ZRANDMEMBER", "z", "-9223372036854770000", "WITHSCORES"), "value is out of range"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*args)
        assert err(e) == msg, args


def test_zrandmember_and_zunion_resp3_shapes():
    _flushall()
    c = Raw()
    try:
        assert c.cmd("HELLO", "3")[0] == "%"
        c.cmd("ZADD", "z", "1.5", "a", "2", "b")
        assert c.cmd("ZUNION", "1", "z", "WITHSCORES") == (
            "*", [("*", [("$", b"a"), (",", "1.5")]), ("*", [("$", b"b"), (",", "2")])])
        pairs = c.cmd("ZRANDMEMBER", "z", "-3", "WITHSCORES")
        assert pairs[0] == "*" and len(pairs[1]) == 3
        assert all(p[0] == "*" and p[1][1][0] == "," for p in pairs[1])
        assert c.cmd("ZMPOP", "1", "z", "MAX") == ("*", [("$", b"z"), ("*", [("*", [("$", b"b"), (",", "2")])])])
        assert c.cmd("ZMPOP", "1", "nope", "MAX") == ("_", None)
    finally:
        c.close()


def test_zmpop(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert zmpopped(r.zmpop(2, ["nope", "z"], min=True)) == ["z", [("a", 1.0)]]
    assert zmpopped(r.zmpop(1, ["z"], max=True, count=5)) == ["z", [("c", 3.0), ("b", 2.0)]]
    assert r.exists("z") == 0
    assert r.zmpop(1, ["z"], min=True) is None
    r.set("s", "v")
    for args, msg in [
        (("ZMPOP", "1", "s", "MIN"), "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (("ZMPOP", "0", "z", "MIN"), "numkeys should be greater than 0"),
        (("ZMPOP", "1", "z", "LEFT"), "syntax error"),
        (("ZMPOP", "2", "z", "MIN"), "syntax error"),
        (("ZMPOP", "1", "z", "MIN", "COUNT", "0"), "count should be greater than 0"),
        (("ZMPOP", "1", "z", "MIN", "COUNT", "1", "COUNT", "1"), "syntax error"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*args)
        assert err(e) == msg, args


# --------------------------------------------------------------------------
# transactions and pipelines
# --------------------------------------------------------------------------


def test_multi_exec(r):
    pipe = r.pipeline(transaction=True)
    pipe.set("a", "1").incr("a").rpush("l", "x", "y").lrange("l", 0, -1).get("nope")
    assert pipe.execute() == [True, 2, 2, ["x", "y"], None]
    assert r.get("a") == "2"
    # a runtime error inside EXEC does not roll back the other commands
    pipe = r.pipeline(transaction=True)
    pipe.set("b", "1").lpush("b", "x").incr("b")
    res = pipe.execute(raise_on_error=False)
    assert res[0] is True and res[2] == 2
    assert isinstance(res[1], redis.ResponseError) and str(res[1]).startswith("WRONGTYPE")
    assert r.get("b") == "2"


def test_multi_exec_raw():
    _flushall()
    c = Raw()
    try:
        assert c.cmd("MULTI") == ("+", "OK")
        assert c.cmd("SET", "a", "1") == ("+", "QUEUED")
        assert c.cmd("INCR", "a") == ("+", "QUEUED")
        t, v = c.cmd("MULTI")
        assert (t, v) == ("-", "ERR MULTI calls can not be nested")
        assert c.cmd("EXEC") == ("*", [("+", "OK"), (":", 2)])
        assert c.cmd("EXEC") == ("-", "ERR EXEC without MULTI")
        assert c.cmd("DISCARD") == ("-", "ERR DISCARD without MULTI")
        # DISCARD drops the queue
        assert c.cmd("MULTI") == ("+", "OK")
        assert c.cmd("SET", "d", "1") == ("+", "QUEUED")
        assert c.cmd("DISCARD") == ("+", "OK")
        assert c.cmd("GET", "d") == ("$", None)
        assert c.cmd("EXEC") == ("-", "ERR EXEC without MULTI")
        # an error while queueing aborts the whole transaction at EXEC
        assert c.cmd("MULTI") == ("+", "OK")
        assert c.cmd("SET", "e", "1") == ("+", "QUEUED")
        t, v = c.cmd("SET", "e")
        assert t == "-" and v == "ERR wrong number of arguments for 'set' command"
        t, v = c.cmd("NOSUCHCOMMAND", "x")
        assert t == "-" and v.startswith("ERR unknown command 'NOSUCHCOMMAND'")
        assert c.cmd("EXEC") == ("-", "EXECABORT Transaction discarded because of previous errors.")
        assert c.cmd("GET", "e") == ("$", None)
        # an empty transaction
        assert c.cmd("MULTI") == ("+", "OK")
        assert c.cmd("EXEC") == ("*", [])
    finally:
        c.close()


def test_execabort_pipeline(r):
    r.set("keep", "old")
    pipe = r.pipeline(transaction=True)
    pipe.set("keep", "new")
    pipe.execute_command("SET", "onlyonearg")
    pipe.set("other", "x")
    with pytest.raises(redis.ResponseError) as e:
        pipe.execute()
    assert "wrong number of arguments for 'set' command" in err(e)
    assert r.get("keep") == "old"
    assert r.exists("other") == 0


def test_watch(r):
    other = make_client(r.proto)
    try:
        r.set("w", "1")
        with r.pipeline() as pipe:
            pipe.watch("w")
            assert pipe.get("w") == "1"
            other.set("w", "2")  # concurrent modification
            pipe.multi()
            pipe.set("w", "3")
            pipe.set("side", "x")
            with pytest.raises(redis.WatchError):
                pipe.execute()
        assert r.get("w") == "2"
        assert r.exists("side") == 0
        # unmodified key: EXEC goes through
        with r.pipeline() as pipe:
            pipe.watch("w")
            pipe.multi()
            pipe.incr("w")
            assert pipe.execute() == [3]
        # UNWATCH forgets the watched keys
        with r.pipeline() as pipe:
            pipe.watch("w")
            pipe.unwatch()
            other.set("w", "10")
            pipe.multi()
            pipe.incr("w")
            assert pipe.execute() == [11]
        # deleting or expiring a watched key also aborts
        with r.pipeline() as pipe:
            pipe.watch("w")
            other.delete("w")
            pipe.multi()
            pipe.set("w", "x")
            with pytest.raises(redis.WatchError):
                pipe.execute()
        # watching a missing key that someone creates
        with r.pipeline() as pipe:
            pipe.watch("created")
            other.set("created", "1")
            pipe.multi()
            pipe.set("created", "2")
            with pytest.raises(redis.WatchError):
                pipe.execute()
        assert r.get("created") == "1"
        # FLUSHALL touches every watched key
        r.set("f", "1")
        with r.pipeline() as pipe:
            pipe.watch("f")
            other.flushall()
            pipe.multi()
            pipe.set("f", "2")
            with pytest.raises(redis.WatchError):
                pipe.execute()
    finally:
        other.close()


def test_watch_raw_nil_reply():
    _flushall()
    c = Raw()
    other = make_client()
    try:
        proto3 = c.cmd("HELLO", "3")[0] == "%"
        assert proto3
        assert c.cmd("WATCH", "k") == ("+", "OK")
        other.set("k", "x")
        assert c.cmd("MULTI") == ("+", "OK")
        assert c.cmd("SET", "k", "y") == ("+", "QUEUED")
        # aborted EXEC: RESP3 null (RESP2 would be *-1)
        assert c.cmd("EXEC") == ("_", None)
        c.cmd("HELLO", "2")
        assert c.cmd("WATCH", "k") == ("+", "OK")
        other.set("k", "z")
        assert c.cmd("MULTI") == ("+", "OK")
        assert c.cmd("SET", "k", "y") == ("+", "QUEUED")
        assert c.cmd("EXEC") == ("*", None)
        assert other.get("k") == "z"
        t, v = c.cmd("MULTI")
        t, v = c.cmd("WATCH", "k")
        assert t == "-" and v == "ERR WATCH inside MULTI is not allowed"
        c.cmd("DISCARD")
    finally:
        c.close()
        other.close()


def test_pipeline_1000(r):
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        if i % 4 == 0:
            pipe.set("k%d" % i, i)
        elif i % 4 == 1:
            pipe.incr("ctr")
        elif i % 4 == 2:
            pipe.rpush("list", i)
        else:
            pipe.get("k%d" % (i - 3))
    res = pipe.execute()
    assert len(res) == 1000
    for i, v in enumerate(res):
        if i % 4 == 0:
            assert v is True
        elif i % 4 == 1:
            assert v == i // 4 + 1
        elif i % 4 == 2:
            assert v == i // 4 + 1
        else:
            assert v == str(i - 3)
    assert r.get("ctr") == "250"
    assert r.llen("list") == 250
    assert r.dbsize() == 252


# --------------------------------------------------------------------------
# sizes and binary safety
# --------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1 << 20, 10 << 20], ids=["1MiB", "10MiB"])
def test_large_values(size):
    _flushall()
    c = make_client(2, decode=False)
    try:
        rnd = random.Random(size)
        val = rnd.randbytes(size)
        assert c.set(b"big", val) is True
        assert c.strlen(b"big") == size
        assert c.get(b"big") == val
        assert c.getrange(b"big", size - 10, -1) == val[-10:]
        assert c.hset(b"bh", b"f", val) == 1
        assert c.hget(b"bh", b"f") == val
        assert c.rpush(b"bl", val, b"small") == 2
        assert c.lindex(b"bl", 0) == val
        # Big values inside arrays and maps (spliced into the reply), both protocols.
        assert c.lrange(b"bl", 0, -1) == [val, b"small"]
        assert c.hgetall(b"bh") == {b"f": val}
        assert c.mget([b"big", b"nope", b"big"]) == [val, None, val]
        c3 = make_client(3, decode=False)
        try:
            assert c3.hgetall(b"bh") == {b"f": val}
            assert c3.lrange(b"bl", 0, -1) == [val, b"small"]
        finally:
            c3.close()
        assert c.append(b"big", b"tail") == size + 4
        assert c.get(b"big")[-4:] == b"tail"
    finally:
        c.close()


def test_big_arguments_in_pieces_with_requests_behind_them():
    """Arguments of 32 KiB and more that arrive in parts are read into a
    buffer of their own (the connection's big-argument path): sent in
    random pieces, with the next requests in the same pieces, every byte
    lands where it belongs."""
    _flushall()
    rnd = random.Random(48)
    c = Raw()
    try:
        vals = [rnd.randbytes(n) for n in (32 << 10, (32 << 10) - 1, 200_001, 3 << 20)]
        stream = b"".join(
            Raw.encode("SET", "k%d" % i, v) + Raw.encode("GET", "k%d" % i) + Raw.encode("PING")
            for i, v in enumerate(vals)
        )
        at = 0
        while at < len(stream):
            n = rnd.choice([1, 7, 1000, 40_000, 300_000])
            c.send(stream[at : at + n])
            at += n
        for v in vals:
            assert c.read() == ("+", "OK")
            assert c.read() == ("$", v)
            assert c.read() == ("+", "PONG")
        # A big argument's CRLF is checked like a small one's.
        c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$40000\r\n" + b"a" * 20000)
        time.sleep(0.05)
        c.send(b"a" * 20000 + b"XY")
        assert b"Protocol error" in c.read_until_close()
    finally:
        c.close()
    r = make_client(2, decode=False)
    try:
        assert r.exists(b"x") == 0
        assert r.get(b"k2") == vals[2]
    finally:
        r.close()


def test_header_commands_on_a_big_string(rb):
    """Commands that read only a key's type, expiry or existence, or
    replace it whole, work on a big string as on a small one (they skip
    its bytes)."""
    r = rb
    val = random.Random(3).randbytes(5 << 20)
    assert r.set(b"bs", val) is True
    assert r.exists(b"bs") == 1
    assert r.type(b"bs") == b"string"
    assert r.ttl(b"bs") == -1
    assert r.expire(b"bs", 100) is True
    assert 0 < r.pttl(b"bs") <= 100_000
    assert r.get(b"bs") == val
    assert r.strlen(b"bs") == len(val)
    for start, end in [(0, 9), (-10, -1), (1 << 20, (1 << 20) + 99_999), (len(val) - 3, len(val) + 50), (-1, -10), (7, 3)]:
        want = val[start : end + 1 if end != -1 else None] if not (start < 0 and end < 0 and start > end) else b""
        if start >= 0 and end >= 0 and start > end:
            want = b""
        assert r.getrange(b"bs", start, end) == want, (start, end)
    assert r.set(b"bs", b"small", keepttl=True) is True
    assert r.get(b"bs") == b"small" and r.ttl(b"bs") > 0
    assert r.set(b"bs", val, get=True) == b"small"
    assert r.set(b"bs", b"again", get=True) == val
    assert r.setnx(b"bs", b"no") is False
    assert r.setex(b"bs", 50, val) is True
    assert r.get(b"bs") == val and 0 < r.ttl(b"bs") <= 50
    assert r.mset({b"bs": b"m", b"bs2": val}) is True
    assert r.get(b"bs") == b"m" and r.ttl(b"bs") == -1
    assert r.msetnx({b"bs2": b"x", b"new": b"y"}) is False
    assert r.getdel(b"bs2") == val
    assert r.delete(b"bs", b"bs2", b"new") == 1
    assert r.exists(b"bs", b"bs2") == 0
    r.xadd(b"st", {b"f": b"v"})
    assert r.type(b"st") == b"stream"
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.strlen(b"st")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.getrange(b"st", 0, 1)
    assert r.strlen(b"nothing") == 0 and r.getrange(b"nothing", 0, 10) == b""
    assert r.set(b"st", val) is True
    assert r.type(b"st") == b"string" and r.get(b"st") == val
    assert r.delete(b"st") == 1


def test_edits_of_big_strings_match_a_model(rb):
    """APPEND, SETRANGE, SETBIT and BITFIELD change a string's record in
    place (read once, written once): on strings past the whole-read size,
    alone, pipelined into one commit and inside MULTI, they give what a
    model gives, keep the key's TTL, and check the type first."""
    r = rb
    rnd = random.Random(5)
    model = bytearray(rnd.randbytes(300_000))
    assert r.set(b"e", bytes(model)) is True
    assert r.expire(b"e", 1000) is True

    def setbit(m, off, on):
        byte = off >> 3
        if len(m) <= byte:
            m.extend(bytes(byte + 1 - len(m)))
        mask = 1 << (7 - (off & 7))
        was = int(m[byte] & mask != 0)
        m[byte] = (m[byte] | mask) if on else (m[byte] & ~mask)
        return was

    def setrange(m, off, part):
        if len(m) < off + len(part):
            m.extend(bytes(off + len(part) - len(m)))
        m[off : off + len(part)] = part
        return len(m)

    for i in range(40):
        op = i % 4
        if op == 0:
            add = rnd.randbytes(rnd.randrange(1, 5000))
            model += add
            assert r.append(b"e", add) == len(model)
        elif op == 1:
            off, part = rnd.randrange(len(model) + 20_000), rnd.randbytes(rnd.randrange(1, 3000))
            assert r.setrange(b"e", off, part) == setrange(model, off, part)
        elif op == 2:
            off, on = rnd.randrange(8 * len(model) + 50_000), rnd.randrange(2)
            assert r.setbit(b"e", off, on) == setbit(model, off, on)
            assert r.getbit(b"e", off) == on
        else:
            off = rnd.randrange(8 * len(model) - 16)
            old = int.from_bytes(model[off >> 3 : (off >> 3) + 3], "big") >> (24 - (off & 7) - 8) & 0xFF
            assert r.bitfield(b"e").set("u8", off, 0xA5).execute() == [old]
            for j in range(8):
                setbit(model, off + j, (0xA5 >> (7 - j)) & 1)
    assert r.get(b"e") == bytes(model)
    assert r.strlen(b"e") == len(model)
    assert 0 < r.ttl(b"e") <= 1000
    assert r.getbit(b"e", 8 * len(model) + 7) == 0

    # Pipelined into one commit: each edit sees the one before it.
    p = r.pipeline(transaction=False)
    for i in range(10):
        p.append(b"e", b"%d;" % i)
        model += b"%d;" % i
        p.setrange(b"e", 1000 * i, b"<%d>" % i)
        setrange(model, 1000 * i, b"<%d>" % i)
        p.setbit(b"e", 8 * 5000 + i, 1)
        setbit(model, 8 * 5000 + i, 1)
    p.execute()
    assert r.get(b"e") == bytes(model)
    # Inside MULTI, with a read after the edits.
    p = r.pipeline(transaction=True)
    p.append(b"e", b"tail")
    p.setrange(b"e", 0, b"head")
    p.get(b"e")
    out = p.execute()
    model += b"tail"
    setrange(model, 0, b"head")
    assert out[2] == bytes(model) and r.get(b"e") == bytes(model)
    assert 0 < r.ttl(b"e") <= 1000

    # New keys; the type is checked before the arguments' sizes.
    assert r.setrange(b"n1", 0, b"") == 0 and r.exists(b"n1") == 0
    assert r.setrange(b"n1", 40_000, b"x") == 40_001
    assert r.get(b"n1") == bytes(40_000) + b"x"
    assert r.append(b"n2", b"y" * 70_000) == 70_000
    assert r.setbit(b"n3", 200_000, 1) == 0 and r.strlen(b"n3") == 25_001
    r.rpush(b"l", b"a")
    for call in (lambda: r.setrange(b"l", 0, b""), lambda: r.setrange(b"l", 600 << 20, b"x"),
                 lambda: r.append(b"l", b"x"), lambda: r.setbit(b"l", 1, 1), lambda: r.getbit(b"l", 1),
                 lambda: r.bitfield(b"l").set("u8", 0, 1).execute()):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            call()
    with pytest.raises(redis.ResponseError, match="maximum allowed size"):
        r.setrange(b"e", 600 << 20, b"x")
    assert r.get(b"e") == bytes(model)


def test_strings_stored_in_chunks(rb):
    """A string over 256 KiB that an edit changes moves into 64 KiB chunks
    (SET and other whole writes keep a string in one record): every
    command that reads, moves, copies, expires or replaces a string sees
    the same bytes either way, a SETRANGE far past its end leaves zeros
    between, and deleting or replacing it gives the chunks to the
    reclaimer."""
    r = rb
    rnd = random.Random(8)
    val = rnd.randbytes(1_000_003)

    def reads_match(key, v):
        assert r.get(key) == v and r.strlen(key) == len(v)
        for start, end in [(0, 0), (65_535, 65_537), (131_000, 400_000), (-5, -1), (999_990, 2_000_000), (3, 2)]:
            want = v[start : (end + 1) if end != -1 else None] if start <= end or start < 0 else b""
            assert r.getrange(key, start, end) == want, (start, end)
        for off in (0, 8 * 65_536 - 1, 8 * 65_536, 8 * len(v) - 1, 8 * len(v) + 100):
            byte = off >> 3
            want = (v[byte] >> (7 - (off & 7))) & 1 if byte < len(v) else 0
            assert r.getbit(key, off) == want
        assert r.bitcount(key) == sum(bin(b).count("1") for b in v)

    assert r.set(b"c", val) is True
    reads_match(b"c", val)
    # An edit that changes nothing moves it into chunks.
    assert r.setrange(b"c", 70_000, val[70_000:70_010]) == len(val)
    reads_match(b"c", val)
    # Far past the end: zeros between, the string's old tail intact.
    assert r.setrange(b"c", 3_000_000, b"END") == 3_000_003
    model = val + bytes(3_000_000 - len(val)) + b"END"
    assert r.get(b"c") == model
    assert r.getrange(b"c", len(val) - 2, len(val) + 2) == val[-2:] + bytes(3)
    # Moves, copies, dumps, expiry.
    assert r.rename(b"c", b"c2") is True and r.exists(b"c") == 0
    assert r.copy(b"c2", b"c3") is True
    assert r.get(b"c2") == model and r.get(b"c3") == model
    assert r.move(b"c3", 2) is True
    r2 = make_client(r.proto, decode=False, db=2)
    try:
        assert r2.get(b"c3") == model
        assert r2.delete(b"c3") == 1
    finally:
        r2.close()
    dump = r.dump(b"c2")
    assert r.restore(b"c4", 0, dump) == b"OK"
    assert r.get(b"c4") == model
    assert r.expire(b"c4", 100) is True and r.get(b"c4") == model and 0 < r.ttl(b"c4") <= 100
    assert r.persist(b"c4") is True and r.ttl(b"c4") == -1
    assert r.getex(b"c4", ex=50) == model
    assert r.getdel(b"c4") == model and r.exists(b"c4") == 0
    # Replaced by a short string, by a collection, and back.
    assert r.set(b"c2", b"short") is True and r.get(b"c2") == b"short"
    assert r.set(b"c2", val, get=True) == b"short" and r.get(b"c2") == val
    r.delete(b"c2")
    r.rpush(b"c2", b"x")
    assert r.set(b"c2", val) is True and r.get(b"c2") == val
    # An APPEND that crosses into chunks, and edits on both sides of a chunk edge.
    small = rnd.randbytes(200_000)
    assert r.set(b"g", small) is True
    add = rnd.randbytes(100_000)
    assert r.append(b"g", add) == 300_000
    grown = bytearray(small + add)
    assert r.setrange(b"g", 65_530, b"0123456789abcdef") == len(grown)
    grown[65_530:65_546] = b"0123456789abcdef"
    assert r.setbit(b"g", 8 * 131_072, 1) == (grown[131_072] >> 7) & 1
    grown[131_072] |= 0x80
    assert r.get(b"g") == bytes(grown)
    assert r.mget([b"g", b"c2", b"none"]) == [bytes(grown), val, None]
    # Expiry changes of a chunked string rewrite only its head.
    assert r.expire(b"g", 100) is True and 0 < r.ttl(b"g") <= 100
    assert r.expire(b"g", 50, gt=True) is False
    assert r.persist(b"g") is True and r.ttl(b"g") == -1
    assert r.getex(b"g", px=80_000) == bytes(grown) and 0 < r.pttl(b"g") <= 80_000
    assert r.getex(b"g", persist=True) == bytes(grown) and r.ttl(b"g") == -1
    assert r.get(b"g") == bytes(grown) and r.strlen(b"g") == len(grown)
    # Inside MULTI with a WATCH that an edit of a chunk trips.
    w = make_client(r.proto, decode=False)
    try:
        p = w.pipeline(transaction=True)
        p.watch(b"g")
        r.setrange(b"g", 200_000, b"!")
        p.multi()
        p.set(b"g", b"lost")
        with pytest.raises(redis.WatchError):
            p.execute()
    finally:
        w.close()
    grown[200_000:200_001] = b"!"
    assert r.get(b"g") == bytes(grown)
    # Fields read past the end see zeros and do not grow the string.
    assert r.bitfield_ro(b"g", "u8", 8 * 5_000_000) == [0]
    assert r.bitfield(b"g").get("u8", 8 * 5_000_000).set("u8", 8, 7).execute() == [0, grown[1]]
    grown[1] = 7
    assert r.strlen(b"g") == len(grown) and r.get(b"g") == bytes(grown)
    r.config_set("proto-max-bulk-len", 1 << 20)
    try:
        with pytest.raises(redis.ResponseError, match="maximum allowed size"):
            r.append(b"g", b"x" * ((1 << 20) - len(grown) + 1))
    finally:
        r.config_set("proto-max-bulk-len", 512 << 20)
    assert r.get(b"g") == bytes(grown)
    assert r.delete(b"g", b"c2") == 2 and r.exists(b"g", b"c2") == 0


def test_binary_safe(rb):
    r = rb
    key = b"k\x00\r\n\xff\xfe key"
    val = b"\x00\r\n$5\r\n*1\r\n\xff\x00"
    assert r.set(key, val) is True
    assert r.get(key) == val
    assert r.strlen(key) == len(val)
    assert key in r.keys(b"k*")
    assert r.exists(key) == 1
    assert r.hset(b"h\x00", b"f\r\n", val) == 1
    assert r.hgetall(b"h\x00") == {b"f\r\n": val}
    assert r.rpush(b"l\n", val, b"\r\n") == 2
    assert r.lrange(b"l\n", 0, -1) == [val, b"\r\n"]
    assert r.sadd(b"s", val, b"\x00") == 2
    assert r.smembers(b"s") == {val, b"\x00"}
    assert r.zadd(b"z", {val: 1, b"\x00": 2}) == 2
    assert r.zrange(b"z", 0, -1) == [val, b"\x00"]
    assert r.zscore(b"z", val) == 1.0
    assert r.mget([key, b"nope"]) == [val, None]
    assert r.rename(key, b"\x00\x00") is True
    assert r.get(b"\x00\x00") == val
    assert r.set(b"", b"") is True  # the empty key and value are valid
    assert r.get(b"") == b""
    assert r.exists(b"") == 1
    all_bytes = bytes(range(256))
    r.set(all_bytes, all_bytes)
    assert r.get(all_bytes) == all_bytes


@pytest.mark.parametrize("how", ["del", "unlink", "flushall"])
def test_big_hash_lazy_delete(r2, how):
    r = r2
    n = 100_000
    pipe = r.pipeline(transaction=False)
    for start in range(0, n, 10_000):
        pipe.hset("big", mapping={"f%d" % i: i for i in range(start, start + 10_000)})
    assert sum(pipe.execute()) == n
    assert r.hlen("big") == n
    if how == "del":
        assert r.delete("big") == 1
    elif how == "unlink":
        assert r.unlink("big") == 1
    else:
        assert r.flushall() is True
    assert r.exists("big") == 0
    assert r.hlen("big") == 0
    assert r.hget("big", "f5") is None
    assert r.hset("big", "only", "1") == 1
    assert r.hlen("big") == 1
    assert r.hgetall("big") == {"only": "1"}
    assert r.dbsize() == 1
    # and as another type
    r.delete("big")
    assert r.rpush("big", "x") == 1
    assert r.lrange("big", 0, -1) == ["x"]


# --------------------------------------------------------------------------
# RESP3 / RESP2 wire shapes (what redis-py and other clients rely on)
# --------------------------------------------------------------------------


def test_resp3_shapes():
    _flushall()
    c = Raw()
    try:
        assert c.cmd("HELLO", "3")[0] == "%"
        c.cmd("HSET", "h", "f", "v", "g", "w")
        c.cmd("SADD", "s", "x", "y")
        c.cmd("ZADD", "z", "1", "a", "2.5", "b")
        t, v = c.cmd("HGETALL", "h")
        assert t == "%" and plain((t, v)) == {"f": "v", "g": "w"}
        assert c.cmd("HGETALL", "nope") == ("%", [])
        t, v = c.cmd("SMEMBERS", "s")
        assert t == "~" and sorted(plain((t, v))) == ["x", "y"]
        assert c.cmd("SMEMBERS", "nope") == ("~", [])
        t, v = c.cmd("ZSCORE", "z", "b")
        assert t == "," and float(v) == 2.5
        assert c.cmd("ZSCORE", "z", "nope") == ("_", None)
        assert c.cmd("GET", "nope") == ("_", None)
        t, v = c.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES")
        assert t == "*" and len(v) == 2
        for pair, (m, s) in zip(v, [(b"a", 1.0), (b"b", 2.5)]):
            assert pair[0] == "*" and len(pair[1]) == 2
            assert pair[1][0] == ("$", m)
            assert pair[1][1][0] == "," and float(pair[1][1][1]) == s
        t, v = c.cmd("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES")
        assert t == "*" and all(p[0] == "*" for p in v)
        t, v = c.cmd("ZMSCORE", "z", "a", "nope")
        assert t == "*" and v[0][0] == "," and v[1] == ("_", None)
        t, v = c.cmd("ZINCRBY", "z", "1", "a")
        assert t == "," and float(v) == 2.0
        t, v = c.cmd("ZADD", "z", "INCR", "1", "a")
        assert t == "," and float(v) == 3.0
        t, v = c.cmd("CONFIG", "GET", "maxclients")
        assert t == "%" and list(plain((t, v))) == ["maxclients"]
        t, v = c.cmd("HRANDFIELD", "h", "2", "WITHVALUES")
        assert t == "*" and all(p[0] == "*" and len(p[1]) == 2 for p in v)
        t, v = c.cmd("ZPOPMIN", "z")
        assert t == "*" and v[0] == ("$", b"b") and v[1][0] == ","
        t, v = c.cmd("ZPOPMIN", "z", "1")
        assert t == "*" and v[0][0] == "*" and v[0][1][0] == ("$", b"a")
        assert c.cmd("EXISTS", "h") == (":", 1)
        assert c.cmd("SISMEMBER", "s", "x") == (":", 1)
        assert c.cmd("TYPE", "h") == ("+", "hash")
        assert c.cmd("INCRBYFLOAT", "fl", "1.5") == ("$", b"1.5")
        t, v = c.cmd("SCAN", "0")
        assert t == "*" and v[0][0] == "$" and v[1][0] == "*"
        t, v = c.cmd("TIME")
        assert t == "*" and len(v) == 2 and all(e[0] == "$" for e in v)
        assert c.cmd("LPOP", "nolist", "2")[0] in ("_", "*")
        t, v = c.cmd("INFO", "server")
        assert t in ("=", "$")
        t, v = c.cmd("COMMAND", "DOCS", "get")
        assert t == "%"
        t, v = c.cmd("COMMAND", "INFO", "get")
        assert t == "*" and v[0][0] == "*"
        t, v = c.cmd("CLIENT", "INFO")
        assert t in ("=", "$")
    finally:
        c.close()


def test_resp2_shapes():
    _flushall()
    c = Raw()
    try:
        c.cmd("HSET", "h", "f", "v")
        c.cmd("ZADD", "z", "1", "a", "2.5", "b")
        assert c.cmd("HGETALL", "h") == ("*", [("$", b"f"), ("$", b"v")])
        assert c.cmd("HGETALL", "nope") == ("*", [])
        t, v = c.cmd("ZSCORE", "z", "b")
        assert t == "$" and float(v) == 2.5
        assert c.cmd("ZSCORE", "z", "nope") == ("$", None)
        t, v = c.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES")
        assert t == "*" and [e[0] for e in v] == ["$"] * 4
        assert v[0] == ("$", b"a") and float(v[1][1]) == 1.0
        assert c.cmd("CONFIG", "GET", "maxclients")[0] == "*"
        assert c.cmd("LPOP", "nolist", "2") == ("*", None)
        assert c.cmd("ZPOPMIN", "nope") == ("*", [])
        assert c.cmd("SMEMBERS", "nope") == ("*", [])
        assert c.cmd("GET", "nope") == ("$", None)
        assert c.cmd("INCRBYFLOAT", "fl", "2") == ("$", b"2")
    finally:
        c.close()


# --------------------------------------------------------------------------
# raw protocol handling
# --------------------------------------------------------------------------


def _raw_recv(c, n_replies):
    return [c.read() for _ in range(n_replies)]


def test_inline_commands():
    _flushall()
    c = Raw()
    try:
        c.send(b"PING\r\n")
        assert c.read() == ("+", "PONG")
        c.send(b"SET a b\r\n")
        assert c.read() == ("+", "OK")
        c.send(b"GET a\r\n")
        assert c.read() == ("$", b"b")
        # quoting and escapes in inline commands, and bare "\n" line ends
        c.send(b'SET "a key" "x\\x41\\n"\r\nGET "a key"\n')
        assert c.read() == ("+", "OK")
        assert c.read() == ("$", b"xA\n")
        # empty lines are ignored
        c.send(b"\r\n\r\nPING\r\n")
        assert c.read() == ("+", "PONG")
    finally:
        c.close()


def test_raw_pipelined_send():
    _flushall()
    c = Raw()
    try:
        c.send(
            Raw.encode("SET", "p", "1")
            + Raw.encode("INCR", "p")
            + Raw.encode("GET", "p")
        )
        assert _raw_recv(c, 3) == [("+", "OK"), (":", 2), ("$", b"2")]
        # a command split across many sends, byte by byte
        data = Raw.encode("ECHO", "split-across-packets")
        for i in range(len(data)):
            c.send(data[i : i + 1])
            time.sleep(0.001)
        assert c.read() == ("$", b"split-across-packets")
        # many commands in one send, mixing inline and multibulk
        c.send(b"PING\r\n" + Raw.encode("PING") + b"ECHO hi\r\n" * 50)
        assert _raw_recv(c, 52) == [("+", "PONG")] * 2 + [("$", b"hi")] * 50
    finally:
        c.close()


def test_protocol_error_closes_connection():
    _flushall()
    keeper = Raw()
    bad = Raw()
    try:
        assert keeper.cmd("SET", "still", "here") == ("+", "OK")
        bad.send(b"*1\r\n$abc\r\n")
        data = bad.read_until_close()
        assert data.startswith(b"-ERR Protocol error"), data
        # the other connection keeps working
        assert keeper.cmd("GET", "still") == ("$", b"here")
        assert keeper.cmd("PING") == ("+", "PONG")
    finally:
        keeper.close()
        bad.close()


def test_oversized_bulk_length():
    c = Raw()
    try:
        c.send(b"*1\r\n$600000000\r\n")
        data = c.read_until_close()
        assert data.startswith(b"-ERR Protocol error: invalid bulk length"), data
    finally:
        c.close()
    c = Raw()
    try:
        c.send(b"*x\r\n")
        data = c.read_until_close()
        assert data.startswith(b"-ERR Protocol error: invalid multibulk length"), data
    finally:
        c.close()


def test_unbalanced_quotes_inline():
    c = Raw()
    try:
        c.send(b'ECHO "unbalanced\r\n')
        data = c.read_until_close()
        assert data.startswith(b"-ERR Protocol error: unbalanced quotes"), data
    finally:
        c.close()


def test_unknown_command():
    c = Raw()
    try:
        t, v = c.cmd("FOO", "bar", "baz")
        assert t == "-"
        assert v.startswith("ERR unknown command 'FOO', with args beginning with: 'bar' 'baz'"), v
        c.send(b"FOO\r\n")
        t, v = c.read()
        assert t == "-" and v.startswith("ERR unknown command 'FOO'"), v
        t, v = c.cmd("GET")
        assert (t, v) == ("-", "ERR wrong number of arguments for 'get' command")
        # the connection stays usable after command errors
        assert c.cmd("PING") == ("+", "PONG")
    finally:
        c.close()


def test_many_connections():
    clients = [Raw() for _ in range(50)]
    try:
        for i, c in enumerate(clients):
            c.send(Raw.encode("SET", "conn:%d" % i, str(i)))
        for c in clients:
            assert c.read() == ("+", "OK")
        for i, c in enumerate(clients):
            assert c.cmd("GET", "conn:%d" % i) == ("$", str(i).encode())
    finally:
        for c in clients:
            c.close()


def test_concurrent_incr():
    _flushall()
    errors = []

    def worker():
        try:
            c = make_client()
            for _ in range(500):
                c.incr("shared")
            c.close()
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    c = make_client()
    try:
        assert c.get("shared") == "4000"
    finally:
        c.close()


# --------------------------------------------------------------------------
# regressions found by the differential test (tests/server/differential.py):
# exact replies, as redis-server 7.0.15 sends them
# --------------------------------------------------------------------------


def raw_cmds(*cmds):
    """The raw replies to `cmds`, on a fresh connection of an empty server."""
    _flushall()
    c = Raw()
    try:
        return [c.cmd(*cmd) for cmd in cmds]
    finally:
        c.close()


def test_diff_unknown_command_text():
    # Every argument is quoted and followed by a space; the list stops
    # growing at 128 bytes.
    assert raw_cmds(("FOO", "bar", "baz"), ("FOO",), ("FOO", "x" * 200, "y")) == [
        ("-", "ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' "),
        ("-", "ERR unknown command 'FOO', with args beginning with: "),
        ("-", "ERR unknown command 'FOO', with args beginning with: '%s' " % ("x" * 128)),
    ]


def test_diff_getrange_clamps_negative_end():
    # A negative end before the start of the string selects the first byte.
    assert raw_cmds(
        ("SET", "k", "hello"),
        ("GETRANGE", "k", "-10", "-6"),
        ("GETRANGE", "k", "-9223372036854775808", "-100"),
        ("GETRANGE", "k", "-1", "-5"),
        ("GETRANGE", "k", "3", "-10"),
        ("SET", "n", "-1"),
        ("GETRANGE", "n", "-10", "-6"),
    )[1:] == [("$", b"h"), ("$", b"h"), ("$", b""), ("$", b""), ("+", "OK"), ("$", b"-")]


def test_diff_set_getex_option_order():
    syntax = ("-", "ERR syntax error")
    replies = raw_cmds(
        ("SET", "k", "v", "EX", "PX", "100"),  # EX takes "PX" as its value: then "100" is a syntax error
        ("SET", "k", "v", "PXAT", "9223372036854775807", "PERSIST"),
        ("SET", "k", "v", "EX", "0", "KEEPTTL"),
        ("SET", "k", "v", "EXAT", "0", "EXAT", "99999999999"),  # the last one wins
        ("TTL", "k"),
        ("SET", "big", "v", "PXAT", "9223372036854775807"),
        ("SET", "k", "v", "EX", "0"),
        ("RPUSH", "l", "a"),
        ("SET", "l", "v", "EX", "100", "GET"),
        ("SET", "l", "v", "EX", "0", "GET"),  # the expiry is checked before the type
        ("GETEX", "nope", "PXAT", "-1"),  # a missing key: nil before the expiry is read
        ("GETEX", "l", "EX", "NX"),  # the type before the expiry
        ("GETEX", "k", "EX", "100", "PERSIST"),
    )
    assert replies[:3] == [syntax, syntax, syntax]
    assert replies[3] == ("+", "OK") and replies[4][0] == ":" and replies[4][1] > 10**9
    assert replies[5] == ("+", "OK")
    assert replies[6] == ("-", "ERR invalid expire time in 'set' command")
    assert replies[8] == ("-", "WRONGTYPE Operation against a key holding the wrong kind of value")
    assert replies[9] == ("-", "ERR invalid expire time in 'set' command")
    assert replies[10] == ("$", None)
    assert replies[11] == ("-", "WRONGTYPE Operation against a key holding the wrong kind of value")
    assert replies[12] == syntax


def test_diff_expire_options_before_time():
    assert raw_cmds(
        ("SET", "k", "v"),
        ("EXPIREAT", "k", "-9223372036854775809", "GT", "LT"),
        ("EXPIRE", "k", "abc", "FOO"),
        ("PEXPIRE", "k", "abc", "NX", "XX"),
        ("EXPIRE", "k", "abc"),
    )[1:] == [
        ("-", "ERR GT and LT options at the same time are not compatible"),
        ("-", "ERR Unsupported option FOO"),
        ("-", "ERR NX and XX, GT or LT options at the same time are not compatible"),
        ("-", "ERR value is not an integer or out of range"),
    ]


def test_diff_incrbyfloat_is_long_double():
    # Redis adds in x87 long double and prints "%.17Lf" minus trailing zeros.
    assert raw_cmds(
        ("SET", "a", "1000"),
        ("INCRBYFLOAT", "a", "0.1"),
        ("INCRBYFLOAT", "b", "0.1"),
        ("INCRBYFLOAT", "b", "0.2"),
        ("INCRBYFLOAT", "c", "1e-300"),
        ("SET", "d", "-9223372036854775808"),
        ("INCRBYFLOAT", "d", "-2"),
        ("INCRBYFLOAT", "e", "0x10"),
        ("RPUSH", "l", "x"),
        ("INCRBYFLOAT", "l", "0x10"),  # the type before the increment
        ("INCRBYFLOAT", "l", "abc"),
        ("INCRBYFLOAT", "f", "1e-5000"),
        ("INCRBYFLOAT", "f", "inf"),
        ("HINCRBYFLOAT", "h", "f", "1000"),
        ("HINCRBYFLOAT", "h", "f", "0.1"),
        ("HINCRBYFLOAT", "h", "g", "inf"),
        ("HINCRBYFLOAT", "l", "g", "abc"),  # the increment before the type
    )[1:] == [
        ("$", b"1000.09999999999999998"),
        ("$", b"0.1"),
        ("$", b"0.3"),
        ("$", b"0"),
        ("+", "OK"),
        ("$", b"-9223372036854775810"),
        ("$", b"16"),
        (":", 1),
        ("-", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("-", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("-", "ERR value is not a valid float"),
        ("-", "ERR increment would produce NaN or Infinity"),
        ("$", b"1000"),
        ("$", b"1000.09999999999999998"),
        ("-", "ERR value is NaN or Infinity"),
        ("-", "ERR value is not a valid float"),
    ]


def test_diff_exec_wrong_arity_aborts():
    execabort = ("-", "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command")
    assert raw_cmds(
        ("MULTI",),
        ("SET", "a", "1"),
        ("EXEC", "x"),
        ("EXEC",),
        ("GET", "a"),
        ("EXEC", "x"),
    ) == [("+", "OK"), ("+", "QUEUED"), execabort, ("-", "ERR EXEC without MULTI"), ("$", None), execabort]


def test_diff_zscan_small_set_score_text():
    # A small sorted set answers ZSCAN with its listpack's score text.
    replies = raw_cmds(("ZADD", "z", "1e17", "a", "1.5", "b", "3", "c"), ("ZSCAN", "z", "0"))
    cursor, items = replies[1][1]
    pairs = dict(zip([v for _, v in items[1][0::2]], [v for _, v in items[1][1::2]]))
    assert pairs == {b"a": b"100000000000000000", b"b": b"1.5", b"c": b"3"}
    assert raw_cmds(("ZADD", "z", "1e17", "a"), ("ZSCORE", "z", "a"))[1] == ("$", b"1e+17")


def test_diff_flush_invalidates_only_existing_watched_keys():
    # FLUSHALL/FLUSHDB abort the transaction of a WATCH only on a key that
    # existed (Redis's touchAllWatchedKeysInDb).
    _flushall()
    a, b = Raw(), Raw()
    try:
        assert a.cmd("WATCH", "missing") == ("+", "OK")
        assert b.cmd("FLUSHALL") == ("+", "OK")
        assert a.cmd("MULTI") == ("+", "OK")
        assert a.cmd("SET", "x", "1") == ("+", "QUEUED")
        assert a.cmd("EXEC") == ("*", [("+", "OK")])
        assert a.cmd("WATCH", "x") == ("+", "OK")
        assert b.cmd("FLUSHDB") == ("+", "OK")
        assert a.cmd("MULTI") == ("+", "OK")
        assert a.cmd("SET", "x", "2") == ("+", "QUEUED")
        assert a.cmd("EXEC") == ("*", None)
        assert a.cmd("WATCH", "missing") == ("+", "OK")
        assert a.cmd("FLUSHALL") == ("+", "OK")  # the watching client itself
        assert a.cmd("MULTI") == ("+", "OK")
        assert a.cmd("EXEC") == ("*", [])
    finally:
        a.close()
        b.close()

# more list and key commands: LPOS LINSERT LMOVE RPOPLPUSH LMPOP EXPIRETIME
# PEXPIRETIME COPY
# --------------------------------------------------------------------------


def test_lpos(r):
    r.rpush("l", "a", "b", "c", "b", "a", "b")
    assert r.lpos("l", "b") == 1
    assert r.lpos("l", "b", rank=2) == 3
    assert r.lpos("l", "b", rank=-1) == 5
    assert r.lpos("l", "b", rank=4) is None
    assert r.lpos("l", "b", count=0) == [1, 3, 5]
    assert r.lpos("l", "b", count=2) == [1, 3]
    assert r.lpos("l", "b", rank=-1, count=0) == [5, 3, 1]
    assert r.lpos("l", "b", count=0, maxlen=2) == [1]
    assert r.lpos("l", "b", rank=-2, count=5, maxlen=3) == [3]
    assert r.lpos("l", "z") is None
    assert r.lpos("l", "z", count=0) == []
    assert r.lpos("nope", "z") is None
    assert r.lpos("nope", "z", count=1) == []
    for args, msg in [
        (("RANK", "0"), "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"),
        (("COUNT", "-1"), "COUNT can't be negative"),
        (("MAXLEN", "-1"), "MAXLEN can't be negative"),
        (("RANK", "x"), "value is not an integer or out of range"),
        (("RANK",), "syntax error"),
        (("FOO", "1"), "syntax error"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("LPOS", "l", "b", *args)
        assert err(e) == msg
    r.set("s", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.lpos("s", "v")
    assert "WRONGTYPE" in err(e)


def test_linsert(r):
    r.rpush("l", "a", "b", "c")
    assert r.linsert("l", "BEFORE", "b", "X") == 4
    assert r.linsert("l", "AFTER", "c", "Y") == 5
    assert r.linsert("l", "after", "a", "Z") == 6
    assert r.linsert("l", "before", "a", "F") == 7
    assert r.lrange("l", 0, -1) == ["F", "a", "Z", "X", "b", "c", "Y"]
    assert r.linsert("l", "BEFORE", "zz", "X") == -1
    assert r.linsert("nope", "BEFORE", "a", "X") == 0
    assert r.exists("nope") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LINSERT", "l", "MIDDLE", "a", "X")
    assert err(e) == "syntax error"
    # Both shifting directions on a longer list keep every element in place.
    r.rpush("big", *[str(i) for i in range(200)])
    assert r.linsert("big", "BEFORE", "3", "x") == 201
    assert r.linsert("big", "AFTER", "190", "y") == 202
    want = [str(i) for i in range(200)]
    want.insert(3, "x")
    want.insert(want.index("190") + 1, "y")
    assert r.lrange("big", 0, -1) == want
    assert r.lindex("big", 3) == "x" and r.lpos("big", "y") == 192


def test_lmove_rpoplpush(r):
    r.rpush("a", "1", "2", "3")
    assert r.lmove("a", "b", "LEFT", "RIGHT") == "1"
    assert r.lmove("a", "b", "RIGHT", "LEFT") == "3"
    assert r.lrange("b", 0, -1) == ["3", "1"]
    assert r.lmove("a", "a", "LEFT", "RIGHT") == "2"  # rotation of one
    assert r.rpoplpush("b", "a") == "1"
    assert r.lrange("a", 0, -1) == ["1", "2"]
    assert r.rpoplpush("b", "b") == "3"
    assert r.rpoplpush("b", "x") == "3"
    assert r.exists("b") == 0
    assert r.lmove("nope", "a", "LEFT", "LEFT") is None
    assert r.rpoplpush("nope", "a") is None
    r.set("s", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.lmove("a", "s", "LEFT", "LEFT")
    assert "WRONGTYPE" in err(e)
    assert r.lrange("a", 0, -1) == ["1", "2"]  # nothing popped
    with pytest.raises(redis.ResponseError) as e:
        r.lmove("s", "a", "LEFT", "LEFT")
    assert "WRONGTYPE" in err(e)
    assert r.lmove("nope", "s", "LEFT", "LEFT") is None  # missing source wins
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LMOVE", "a", "b", "UP", "LEFT")
    assert err(e) == "syntax error"


def test_lmpop(r):
    r.rpush("b", "1", "2", "3")
    assert r.lmpop(2, "a", "b", direction="LEFT") == ["b", ["1"]]
    assert r.lmpop(2, "a", "b", direction="RIGHT", count=10) == ["b", ["3", "2"]]
    assert r.exists("b") == 0
    assert r.lmpop(1, "a", direction="LEFT") is None
    for args, msg in [
        (("0", "a", "LEFT"), "numkeys should be greater than 0"),
        (("x", "a", "LEFT"), "numkeys should be greater than 0"),
        (("3", "a", "LEFT"), "syntax error"),
        (("1", "a", "MIDDLE"), "syntax error"),
        (("1", "a", "LEFT", "COUNT", "0"), "count should be greater than 0"),
        (("1", "a", "LEFT", "COUNT"), "syntax error"),
        (("1", "a", "LEFT", "COUNT", "1", "COUNT", "2"), "syntax error"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("LMPOP", *args)
        assert err(e) == msg
    r.set("s", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.lmpop(2, "nope", "s", direction="LEFT")
    assert "WRONGTYPE" in err(e)


def test_expiretime(r):
    r.set("k", "v")
    assert r.expiretime("k") == -1
    assert r.pexpiretime("k") == -1
    assert r.expiretime("nope") == -2
    assert r.pexpiretime("nope") == -2
    r.pexpireat("k", 4102444800123)
    assert r.pexpiretime("k") == 4102444800123
    assert r.expiretime("k") == 4102444800  # rounded to the nearest second
    r.pexpireat("k", 4102444800600)
    assert r.expiretime("k") == 4102444801


def test_copy(r):
    r.rpush("l", "a", "b")
    r.expire("l", 100)
    assert r.copy("l", "l2") is True
    assert r.lrange("l2", 0, -1) == ["a", "b"]
    assert 90 < r.ttl("l2") <= 100
    assert r.copy("l", "l2") is False
    r.rpush("l", "c")
    assert r.copy("l", "l2", replace=True) is True
    assert r.lrange("l2", 0, -1) == ["a", "b", "c"]
    r.rpush("l2", "d")
    assert r.llen("l") == 3  # an independent copy
    r.hset("h", mapping={"f": "1", "g": "2"})
    r.zadd("z", {"m": 1, "n": 2})
    r.sadd("s", "x", "y")
    r.set("str", "v")
    for src in ["h", "z", "s", "str"]:
        assert r.copy(src, src + "2") is True
    assert r.hgetall("h2") == {"f": "1", "g": "2"}
    assert as_pairs(r, r.zrange("z2", 0, -1, withscores=True)) == [("m", 1.0), ("n", 2.0)]
    assert r.smembers("s2") == {"x", "y"}
    assert r.get("str2") == "v"
    assert r.copy("z", "str2", replace=True) is True
    assert r.type("str2") == "zset" and r.zscore("str2", "n") == 2.0
    # Into another database.
    assert r.copy("s", "s", destination_db=1) is True
    assert r.copy("s", "s", destination_db=1) is False
    other = make_client(r.proto, db=1)
    try:
        assert other.smembers("s") == {"x", "y"}
        assert other.dbsize() == 1
    finally:
        other.close()
    assert r.copy("nope", "x") is False
    for args, msg in [
        (("l", "l"), "source and destination objects are the same"),
        (("l", "l", "REPLACE"), "source and destination objects are the same"),
        (("l", "x", "DB", "99999"), "DB index is out of range"),
        (("l", "x", "DB", "-1"), "DB index is out of range"),
        (("l", "x", "DB", "x"), "value is not an integer or out of range"),
        (("l", "x", "DB"), "syntax error"),
        (("l", "x", "FOO"), "syntax error"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("COPY", *args)
        assert err(e) == msg


# --------------------------------------------------------------------------
# blocking list commands: BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP
# --------------------------------------------------------------------------


def blocked_clients(r):
    return int(r.info("clients")["blocked_clients"])


def wait_blocked(r, n, timeout=5.0):
    """Waits until exactly `n` clients are blocked."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if blocked_clients(r) == n:
            return
        time.sleep(0.005)
    raise AssertionError("expected %d blocked clients, have %d" % (n, blocked_clients(r)))


class Blocker:
    """Runs one blocking command on its own connection in a thread."""

    def __init__(self, proto, *args):
        self.c = make_client(proto)
        self.result = None
        self.error = None
        self.elapsed = None
        self.t = threading.Thread(target=self._run, args=args)
        self.t.start()

    def _run(self, *args):
        t0 = time.time()
        try:
            self.result = self.c.execute_command(*args)
        except Exception as e:  # checked by the test
            self.error = e
        self.elapsed = time.time() - t0

    def join(self, timeout=10):
        self.t.join(timeout)
        assert not self.t.is_alive(), "still blocked"
        self.c.close()
        return self.result


def pair(v):
    return None if v is None else tuple(v)


def test_blocking_pops_answer_at_once_when_data(r):
    r.rpush("a", "1", "2")
    r.rpush("b", "x")
    assert pair(r.blpop(["nope", "a", "b"], timeout=1)) == ("a", "1")
    assert pair(r.brpop(["b", "a"], timeout=1)) == ("b", "x")
    assert r.blmove("a", "c", 1, "LEFT", "RIGHT") == "2"
    assert r.brpoplpush("c", "d", 1) == "2"
    r.rpush("e", "1", "2", "3")
    assert r.blmpop(1, 2, "nope", "e", direction="RIGHT", count=2) == ["e", ["3", "2"]]
    r.set("s", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.blpop(["nope", "s"], timeout=1)
    assert "WRONGTYPE" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.blmove("s", "x", 1, "LEFT", "LEFT")
    assert "WRONGTYPE" in err(e)


def test_blocking_argument_errors(r):
    for args, msg in [
        (("BLPOP", "k", "-1"), "timeout is negative"),
        (("BLPOP", "k", "abc"), "timeout is not a float or out of range"),
        (("BLPOP", "k", "nan"), "timeout is not a float or out of range"),
        (("BRPOP", "k", "inf"), "timeout is negative"),
        (("BLMOVE", "a", "b", "LEFT", "UP", "1"), "syntax error"),
        (("BLMOVE", "a", "b", "LEFT", "RIGHT", "-1"), "timeout is negative"),
        (("BRPOPLPUSH", "a", "b", "-1"), "timeout is negative"),
        (("BLMPOP", "0.1", "0", "a", "LEFT"), "numkeys should be greater than 0"),
        (("BLMPOP", "-1", "1", "a", "LEFT"), "timeout is negative"),
        (("BLMPOP", "0.1", "2", "a", "LEFT"), "syntax error"),
        (("BLMPOP", "0.1", "1", "a", "LEFT", "COUNT", "0"), "count should be greater than 0"),
        (("BLPOP", "k"), "wrong number of arguments for 'blpop' command"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*args)
        assert err(e) == msg, args


def test_blocking_timeouts(r):
    for args in [
        ("BLPOP", "k1", "k2", "0.1"),
        ("BRPOP", "k1", "0.1"),
        ("BLMOVE", "k1", "k2", "LEFT", "RIGHT", "0.1"),
        ("BRPOPLPUSH", "k1", "k2", "0.1"),
        ("BLMPOP", "0.1", "1", "k1", "LEFT"),
    ]:
        t0 = time.time()
        assert r.execute_command(*args) is None
        dt = time.time() - t0
        assert 0.09 <= dt < 2.0, (args, dt)
    assert blocked_clients(r) == 0


def test_blpop_woken_by_push(r):
    b = Blocker(r.proto, "BLPOP", "q1", "q2", "0")
    wait_blocked(r, 1)
    # The key the push lands on is the one that serves.
    assert r.rpush("q2", "v") == 1
    assert pair(b.join()) == ("q2", "v")
    assert r.exists("q2") == 0
    b = Blocker(r.proto, "BRPOP", "q1", "5")
    wait_blocked(r, 1)
    r.rpush("q1", "a", "b")
    assert pair(b.join()) == ("q1", "b")
    assert r.lrange("q1", 0, -1) == ["a"]


def test_blocking_fifo_order(r):
    blockers = []
    for i in range(3):
        blockers.append(Blocker(r.proto, "BLPOP", "fifo", "0"))
        wait_blocked(r, i + 1)  # they block in this order
    assert r.rpush("fifo", "e1", "e2", "e3", "e4") == 4
    assert [pair(b.join()) for b in blockers] == [("fifo", "e1"), ("fifo", "e2"), ("fifo", "e3")]
    assert r.lrange("fifo", 0, -1) == ["e4"]


def test_blocked_client_served_atomically_with_the_push(r):
    b = Blocker(r.proto, "BLPOP", "atomic", "0")
    wait_blocked(r, 1)
    # The next command after the push already sees the list popped.
    p = r.pipeline(transaction=False)
    p.rpush("atomic", "v")
    p.llen("atomic")
    assert p.execute() == [1, 0]
    assert pair(b.join()) == ("atomic", "v")


def test_blocking_inside_multi_does_not_block(r):
    p = r.pipeline(transaction=True)
    p.blpop(["m1"], timeout=0)
    p.brpop(["m1"], timeout=0)
    p.blmove("m1", "m2", 0, "LEFT", "LEFT")
    p.brpoplpush("m1", "m2", 0)
    p.blmpop(0, 1, "m1", direction="LEFT")
    assert [pair(x) if isinstance(x, list) else x for x in p.execute()] == [None, None, None, None, None]


def test_push_and_pop_inside_multi_serves_nobody(r):
    b = Blocker(r.proto, "BLPOP", "mk", "0.5")
    wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.rpush("mk", "x")
    p.lpop("mk")
    assert p.execute() == [1, "x"]
    assert b.join() is None  # timed out: the list was empty again after EXEC
    b = Blocker(r.proto, "BLPOP", "mk", "0")
    wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.rpush("mk", "x", "y")
    p.lpop("mk")
    p.llen("mk")
    assert p.execute() == [2, "x", 1]
    assert pair(b.join()) == ("mk", "y")  # served after the whole EXEC


def test_blmove_woken_and_chained(r):
    mover = Blocker(r.proto, "BLMOVE", "src", "mid", "RIGHT", "LEFT", "0")
    wait_blocked(r, 1)
    popper = Blocker(r.proto, "BRPOPLPUSH", "mid", "dst", "0")
    wait_blocked(r, 2)
    r.lpush("src", "hop")
    assert mover.join() == "hop"
    assert popper.join() == "hop"
    assert r.lrange("dst", 0, -1) == ["hop"]
    assert r.exists("src", "mid") == 0


def test_blmpop_woken(r):
    b = Blocker(r.proto, "BLMPOP", "0", "2", "x1", "x2", "RIGHT", "COUNT", "2")
    wait_blocked(r, 1)
    r.rpush("x2", "1", "2", "3")
    assert b.join() == ["x2", ["3", "2"]]
    assert r.lrange("x2", 0, -1) == ["1"]


def test_blocked_on_key_of_other_type(r):
    b = Blocker(r.proto, "BLPOP", "w", "0")
    wait_blocked(r, 1)
    r.set("w", "string")
    time.sleep(0.1)
    assert blocked_clients(r) == 1  # still waiting (Redis 7.0)
    r.delete("w")
    r.rpush("w", "v")
    assert pair(b.join()) == ("w", "v")
    # BLMOVE onto a destination of another type fails when served.
    r.set("dst", "string")
    b = Blocker(r.proto, "BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")
    wait_blocked(r, 1)
    r.rpush("src", "e")
    b.join()
    assert "WRONGTYPE" in str(b.error)
    assert r.lrange("src", 0, -1) == ["e"]


# --------------------------------------------------------------------------
# blocking sorted-set commands: BZPOPMIN BZPOPMAX BZMPOP
# --------------------------------------------------------------------------


def test_bzpop_answers_at_once_when_data(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert pair(r.bzpopmin(["nope", "z"], timeout=1)) == ("z", "a", 1.0)
    assert pair(r.bzpopmax(["z"], timeout=1)) == ("z", "c", 3.0)
    assert zmpopped(r.bzmpop(1, 2, ["nope", "z"], min=True, count=5)) == ["z", [("b", 2.0)]]
    assert r.exists("z") == 0
    r.set("s", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.bzpopmin(["nope", "s"], timeout=1)
    assert "WRONGTYPE" in err(e)
    for args, msg in [
        (("BZPOPMIN", "k", "-1"), "timeout is negative"),
        (("BZPOPMAX", "k", "abc"), "timeout is not a float or out of range"),
        (("BZMPOP", "0.1", "0", "k", "MIN"), "numkeys should be greater than 0"),
        (("BZMPOP", "-1", "1", "k", "MIN"), "timeout is negative"),
        (("BZMPOP", "0.1", "1", "k", "LEFT"), "syntax error"),
        (("BZMPOP", "0.1", "1", "k", "MAX", "COUNT", "0"), "count should be greater than 0"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*args)
        assert err(e) == msg, args


def test_bzpop_timeouts(r):
    for args in [("BZPOPMIN", "k1", "k2", "0.1"), ("BZPOPMAX", "k1", "0.1"), ("BZMPOP", "0.1", "1", "k1", "MIN")]:
        t0 = time.time()
        assert r.execute_command(*args) is None
        dt = time.time() - t0
        assert 0.09 <= dt < 2.0, (args, dt)
    assert blocked_clients(r) == 0


def test_bzpopmin_woken_by_zadd(r):
    b = Blocker(r.proto, "BZPOPMIN", "z1", "z2", "0")
    wait_blocked(r, 1)
    assert r.zadd("z2", {"m": 5, "n": 1}) == 2
    assert pair(b.join()) == ("z2", "n", 1.0)
    assert r.zrange("z2", 0, -1) == ["m"]
    b = Blocker(r.proto, "BZPOPMAX", "z3", "5")
    wait_blocked(r, 1)
    r.zadd("z3", {"a": 1, "b": 2})
    assert pair(b.join()) == ("z3", "b", 2.0)
    b = Blocker(r.proto, "BZMPOP", "0", "1", "z4", "MAX", "COUNT", "2")
    wait_blocked(r, 1)
    r.zadd("z4", {"a": 1, "b": 2, "c": 3})
    assert zmpopped(b.join()) == ["z4", [("c", 3.0), ("b", 2.0)]]
    assert r.zrange("z4", 0, -1) == ["a"]


def test_bzpop_woken_by_store_and_fifo(r):
    blockers = []
    for i in range(2):
        blockers.append(Blocker(r.proto, "BZPOPMIN", "dst", "0"))
        wait_blocked(r, i + 1)
    r.zadd("src", {"a": 1, "b": 2, "c": 3})
    assert r.zunionstore("dst", ["src"]) == 3
    assert [pair(b.join()) for b in blockers] == [("dst", "a", 1.0), ("dst", "b", 2.0)]
    assert r.zrange("dst", 0, -1) == ["c"]


def test_bzpop_and_blpop_on_one_key(r):
    # A BLPOP client first in line does not keep a BZPOPMIN client after it
    # from a sorted set (and stays blocked itself).
    lister = Blocker(r.proto, "BLPOP", "k", "0")
    wait_blocked(r, 1)
    zpopper = Blocker(r.proto, "BZPOPMIN", "k", "0")
    wait_blocked(r, 2)
    r.zadd("k", {"m": 1})
    assert pair(zpopper.join()) == ("k", "m", 1.0)
    wait_blocked(r, 1)
    r.rpush("k", "v")
    assert pair(lister.join()) == ("k", "v")


def test_bzpop_timeout_returns_nil_and_keeps_waiting_on_other_type(r):
    b = Blocker(r.proto, "BZPOPMIN", "w", "0.3")
    wait_blocked(r, 1)
    r.set("w", "string")  # not a sorted set: the client waits on
    assert b.join() is None
    assert b.elapsed >= 0.25
    p = r.pipeline(transaction=True)
    p.bzpopmin(["w2"], timeout=0)
    p.bzmpop(0, 1, ["w2"], min=True)
    assert p.execute() == [None, None]  # inside MULTI: no blocking


def test_disconnect_while_blocked():
    _flushall()
    r = make_client()
    try:
        c = Raw()
        c.send(Raw.encode("BLPOP", "gone", "0"))
        wait_blocked(r, 1)
        c.close()
        wait_blocked(r, 0)
        r.rpush("gone", "v")
        assert r.lrange("gone", 0, -1) == ["v"]  # nobody took it
    finally:
        r.close()


def test_blocked_client_pipeline_runs_after_it_is_served():
    _flushall()
    r = make_client()
    c = Raw()
    try:
        c.send(Raw.encode("PING") + Raw.encode("BLPOP", "pp", "0") + Raw.encode("ECHO", "after"))
        assert c.read() == ("+", "PONG")  # answered before the block
        wait_blocked(r, 1)
        r.rpush("pp", "v")
        assert c.read() == ("*", [("$", b"pp"), ("$", b"v")])
        assert c.read() == ("$", b"after")
    finally:
        c.close()
        r.close()


def test_client_unblock(r):
    b = Blocker(r.proto, "BLPOP", "u", "0")
    wait_blocked(r, 1)
    cid = None
    for line in r.client_list():
        if "b" in line["flags"] and line["cmd"] == "blpop":
            cid = int(line["id"])
    assert cid is not None
    assert r.client_unblock(cid) is True
    assert b.join() is None
    b = Blocker(r.proto, "BLPOP", "u", "0")
    wait_blocked(r, 1)
    cid = [int(x["id"]) for x in r.client_list() if "b" in x["flags"]][0]
    assert r.client_unblock(cid, error=True) is True
    b.join()
    assert str(b.error) == "UNBLOCKED client unblocked via CLIENT UNBLOCK"
    assert r.client_unblock(cid) is False
    assert r.client_unblock(999999) is False
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "UNBLOCK", "1", "FOO")
    assert err(e) == "CLIENT UNBLOCK reason should be TIMEOUT or ERROR"


# --------------------------------------------------------------------------
# pub/sub
# --------------------------------------------------------------------------


def next_message(p, timeout=5.0):
    """The next pub/sub message (subscription confirmations included)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    raise AssertionError("no pub/sub message")


def test_pubsub_channels_and_patterns(r):
    p = r.pubsub()
    try:
        p.subscribe("news", "sport")
        assert next_message(p) == {"type": "subscribe", "pattern": None, "channel": "news", "data": 1}
        assert next_message(p) == {"type": "subscribe", "pattern": None, "channel": "sport", "data": 2}
        p.psubscribe("n?ws*")
        assert next_message(p) == {"type": "psubscribe", "pattern": None, "channel": "n?ws*", "data": 3}
        assert r.publish("news", "hello") == 2  # the channel and the pattern
        got = [next_message(p), next_message(p)]
        assert {"type": "message", "pattern": None, "channel": "news", "data": "hello"} in got
        assert {"type": "pmessage", "pattern": "n?ws*", "channel": "news", "data": "hello"} in got
        assert r.publish("newsroom", "x") == 1
        assert next_message(p) == {"type": "pmessage", "pattern": "n?ws*", "channel": "newsroom", "data": "x"}
        assert r.publish("nobody", "x") == 0
        assert sorted(r.pubsub_channels()) == ["news", "sport"]
        assert r.pubsub_channels("s*") == ["sport"]
        assert r.pubsub_numsub("news", "nobody") == [("news", 1), ("nobody", 0)]
        assert r.pubsub_numpat() == 1
        stats = r.info("stats")
        assert stats["pubsub_channels"] == 2 and stats["pubsub_patterns"] == 1
        p.unsubscribe("sport")
        assert next_message(p) == {"type": "unsubscribe", "pattern": None, "channel": "sport", "data": 2}
        p.punsubscribe()
        assert next_message(p) == {"type": "punsubscribe", "pattern": None, "channel": "n?ws*", "data": 1}
        assert r.pubsub_numpat() == 0
    finally:
        p.close()


def test_pubsub_message_order(r):
    p = r.pubsub()
    try:
        p.subscribe("seq")
        next_message(p)
        for i in range(200):
            r.publish("seq", str(i))
        assert [next_message(p)["data"] for _ in range(200)] == [str(i) for i in range(200)]
    finally:
        p.close()


def test_pubsub_binary_and_publish_in_multi(rb):
    p = rb.pubsub()
    try:
        p.subscribe(b"bin\x00ch")
        next_message(p)
        tx = rb.pipeline(transaction=True)
        tx.set("k", "v")
        tx.publish(b"bin\x00ch", b"\x00\xff\r\n")
        assert tx.execute() == [True, 1]
        m = next_message(p)
        assert m["channel"] == b"bin\x00ch" and m["data"] == b"\x00\xff\r\n"
    finally:
        p.close()


def test_subscribed_resp2_rules():
    _flushall()
    c = Raw()
    try:
        assert c.cmd("SUBSCRIBE", "a", "b") == (
            "*",
            [("$", b"subscribe"), ("$", b"a"), (":", 1)],
        )
        assert c.read() == ("*", [("$", b"subscribe"), ("$", b"b"), (":", 2)])
        assert c.cmd("GET", "x") == (
            "-",
            "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
        )
        assert c.cmd("PING") == ("*", [("$", b"pong"), ("$", b"")])
        assert c.cmd("PING", "hi") == ("*", [("$", b"pong"), ("$", b"hi")])
        assert c.cmd("PSUBSCRIBE", "p*") == ("*", [("$", b"psubscribe"), ("$", b"p*"), (":", 3)])
        assert c.cmd("PUNSUBSCRIBE", "zz") == ("*", [("$", b"punsubscribe"), ("$", b"zz"), (":", 3)])
        assert c.cmd("UNSUBSCRIBE", "a", "b") == ("*", [("$", b"unsubscribe"), ("$", b"a"), (":", 2)])
        assert c.read() == ("*", [("$", b"unsubscribe"), ("$", b"b"), (":", 1)])
        assert c.cmd("PUNSUBSCRIBE") == ("*", [("$", b"punsubscribe"), ("$", b"p*"), (":", 0)])
        # Out of subscribed mode: everything works again.
        assert c.cmd("PING") == ("+", "PONG")
        assert c.cmd("UNSUBSCRIBE") == ("*", [("$", b"unsubscribe"), ("$", None), (":", 0)])
        assert c.cmd("SUBSCRIBE", "a") == ("*", [("$", b"subscribe"), ("$", b"a"), (":", 1)])
        assert c.cmd("RESET") == ("+", "RESET")
        assert c.cmd("GET", "x") == ("$", None)
    finally:
        c.close()
    r = make_client()
    try:
        assert r.pubsub_numsub("a") == [("a", 0)]  # RESET dropped it
    finally:
        r.close()


def test_subscribed_resp3_push_frames():
    _flushall()
    c = Raw()
    pub = make_client()
    try:
        assert c.cmd("HELLO", "3")[0] == "%"
        assert c.cmd("SUBSCRIBE", "ch") == (">", [("$", b"subscribe"), ("$", b"ch"), (":", 1)])
        # Other commands stay allowed in RESP3.
        assert c.cmd("SET", "k", "v") == ("+", "OK")
        assert c.cmd("PING") == ("+", "PONG")
        assert pub.publish("ch", "m1") == 1
        assert c.read() == (">", [("$", b"message"), ("$", b"ch"), ("$", b"m1")])
        # Publishing to itself: the message comes before the reply.
        c.send(Raw.encode("PUBLISH", "ch", "self"))
        assert c.read() == (">", [("$", b"message"), ("$", b"ch"), ("$", b"self")])
        assert c.read() == (":", 1)
        assert c.cmd("UNSUBSCRIBE") == (">", [("$", b"unsubscribe"), ("$", b"ch"), (":", 0)])
    finally:
        c.close()
        pub.close()


def test_pubsub_errors(r):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("PUBSUB", "FOO")
    assert err(e) == "unknown subcommand 'FOO'. Try PUBSUB HELP."
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("PUBSUB", "NUMPAT", "x")
    assert err(e) == "wrong number of arguments for 'pubsub|numpat' command"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("PUBLISH", "a")
    assert err(e) == "wrong number of arguments for 'publish' command"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SUBSCRIBE")
    assert err(e) == "wrong number of arguments for 'subscribe' command"
    assert r.pubsub_channels() == []
    assert r.pubsub_numsub() == []


def test_pubsub_disconnect_cleans_up():
    _flushall()
    r = make_client()
    try:
        c = Raw()
        c.cmd("SUBSCRIBE", "gone")
        c.cmd("PSUBSCRIBE", "go*")
        assert r.pubsub_numsub("gone") == [("gone", 1)]
        c.close()
        deadline = time.time() + 5
        while r.pubsub_numsub("gone") != [("gone", 0)] and time.time() < deadline:
            time.sleep(0.01)
        assert r.pubsub_numsub("gone") == [("gone", 0)]
        assert r.pubsub_numpat() == 0
        assert r.publish("gone", "x") == 0
    finally:
        r.close()


def _subscriber_that_does_not_read(r, channel):
    """A raw connection subscribed to `channel` with a tiny receive buffer,
    which never reads what it is sent."""
    sub = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sub.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sub.connect((HOST, PORT))
    if PASSWORD:
        sub.sendall(Raw.encode("AUTH", PASSWORD))
    sub.sendall(Raw.encode("SUBSCRIBE", channel))
    deadline = time.time() + 5
    while r.pubsub_numsub(channel) != [(channel, 1)] and time.time() < deadline:
        time.sleep(0.01)
    return sub


def test_slow_subscriber_is_disconnected():
    """A subscriber that does not read is closed past the pub/sub output
    buffer hard limit (32 MB), as Redis's client-output-buffer-limit does."""
    _flushall()
    r = make_client()
    sub = _subscriber_that_does_not_read(r, "slow")
    try:
        msg = b"x" * (1 << 20)
        delivered = 0
        for _ in range(200):
            n = r.publish("slow", msg)
            if n == 0:
                break
            delivered += 1
        assert 8 <= delivered < 100, delivered
        assert r.pubsub_numsub("slow") == [("slow", 0)]
    finally:
        sub.close()
        r.close()


def test_pubsub_output_limit_follows_config():
    """CONFIG SET client-output-buffer-limit's pubsub class is the limit
    enforced: at 1 MB, a subscriber that does not read goes far sooner."""
    _flushall()
    r = make_client()
    before = r.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
    r.config_set("client-output-buffer-limit", "pubsub 1mb 0 0")
    sub = _subscriber_that_does_not_read(r, "slow1")
    try:
        assert r.config_get("client-output-buffer-limit")["client-output-buffer-limit"].endswith("pubsub 1048576 0 0")
        msg = b"x" * (64 << 10)
        delivered = 0
        for _ in range(2000):
            if r.publish("slow1", msg) == 0:
                break
            delivered += 1
        # The kernel's socket buffers hold some; past them, 1 MB more at most.
        assert delivered < 200, delivered
        assert r.pubsub_numsub("slow1") == [("slow1", 0)]
        with pytest.raises(redis.ResponseError) as e:
            r.config_set("client-output-buffer-limit", "pubsub 1mb 0")
        assert "Wrong number of arguments in buffer limit configuration" in str(e.value)
    finally:
        r.config_set("client-output-buffer-limit", before)
        sub.close()
        r.close()


def test_command_over_the_key_limit_applies_nothing_in_a_shared_commit_group():
    """A key of over 64 KiB (with its field) is refused by Tembo's engine
    (Redis accepts it: skipped there). The refused command must apply
    nothing even when it shares a commit group with other clients'
    pipelines: its first keys are not set, the counts stay exact, and the
    others' writes all land."""
    if is_reference_redis():
        pytest.skip("Redis has no 64 KiB key limit")
    _flushall()
    big = "k" * 70000
    a, b = make_client(), make_client()
    try:
        pa, pb = a.pipeline(transaction=False), b.pipeline(transaction=False)
        pa.set("a", "1").mset({"b": "2", big: "3"}).set("c", "4").hset("h", mapping={"f": "v", big: "w"}).incr("a")
        pb.set("x", "1").lpush("l", "1", "2").sadd("s", "m", big).get("x")
        out = {}
        ta = threading.Thread(target=lambda: out.__setitem__("a", pa.execute(raise_on_error=False)))
        ta.start()
        out["b"] = pb.execute(raise_on_error=False)
        ta.join()
        ra, rb_ = out["a"], out["b"]
        assert [ra[0], ra[2], ra[4]] == [True, True, 2]
        assert isinstance(ra[1], redis.ResponseError) and "key too large" in str(ra[1])
        assert isinstance(ra[3], redis.ResponseError)
        assert [rb_[0], rb_[1], rb_[3]] == [True, 2, "1"]
        assert isinstance(rb_[2], redis.ResponseError)
        assert sorted(a.keys("*")) == ["a", "c", "l", "x"]
        assert a.dbsize() == 4
        assert a.get("b") is None and a.exists("h", "s") == 0
        # Inside a transaction only the refused command fails.
        t = a.pipeline(transaction=True)
        t.set("m1", "x").set(big, "y").set("m2", "z")
        res = t.execute(raise_on_error=False)
        assert res[0] is True and res[2] is True and isinstance(res[1], redis.ResponseError)
        assert a.dbsize() == 6 and len(a.keys("*")) == 6
        # A blocked BLMOVE served by another client's push, its move refused:
        # the element stays where it was, and the next waiter gets it.
        got = {}

        def wait(name, dst):
            c = make_client()
            try:
                got[name] = c.blmove("q", dst, 10, "LEFT", "RIGHT")
            except redis.ResponseError as e:
                got[name] = e
            finally:
                c.close()

        first = threading.Thread(target=wait, args=("first", big))
        first.start()
        time.sleep(0.3)
        second = threading.Thread(target=wait, args=("second", "dst"))
        second.start()
        time.sleep(0.3)
        assert a.rpush("q", "e1", "e2") == 2
        first.join()
        second.join()
        assert isinstance(got["first"], redis.ResponseError) and "key too large" in str(got["first"])
        assert got["second"] == "e1"
        assert a.lrange("q", 0, -1) == ["e2"] and a.lrange("dst", 0, -1) == ["e1"]
        assert a.dbsize() == 8 and len(a.keys("*")) == 8
    finally:
        a.close()
        b.close()
