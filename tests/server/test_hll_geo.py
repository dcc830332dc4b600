"""Real-client tests for HyperLogLog (PFADD PFCOUNT PFMERGE PFDEBUG
PFSELFTEST) and GEO (GEOADD GEOPOS GEODIST GEOHASH GEOSEARCH
GEOSEARCHSTORE GEORADIUS GEORADIUSBYMEMBER and the _RO forms). Expected
values are Redis 7.0.15's.

The byte-exactness tests also start a real redis-server (when one is
installed) on a spare port and compare what both servers answer and store:
the HLL strings' bytes, PFCOUNT, GEO scores and search replies.

    TEMBO_PORT=6379 python3 -m pytest -q tests/server/test_hll_geo.py
"""

import random
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import redis

from test_commands import err, make_client, r  # noqa: F401  (r is a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# --------------------------------------------------------------------------
# a reference redis-server for byte comparisons
# --------------------------------------------------------------------------


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def ref():
    """A decoded=False client of a private redis-server, or skip."""
    exe = shutil.which("redis-server")
    if not exe:
        pytest.skip("redis-server is not installed")
    port = _free_port()
    work = tempfile.mkdtemp(prefix="hllgeo-ref-")
    proc = subprocess.Popen([exe, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", work],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=60)
    for _ in range(100):
        try:
            c.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.skip("redis-server did not start")
    if c.info("server")["redis_version"].split(".")[:2] != ["7", "0"]:
        c.shutdown(nosave=True)
        pytest.skip("the reference redis-server is not 7.0")
    yield c
    proc.kill()
    proc.wait()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def both(ref):
    """(tembo, reference) raw-bytes RESP2 clients, both flushed."""
    t = make_client(decode=False)
    t.flushall()
    ref.flushall()
    ref.config_set("hll-sparse-max-bytes", 3000)
    t.config_set("hll-sparse-max-bytes", 3000)
    yield t, ref
    t.config_set("hll-sparse-max-bytes", 3000)
    t.close()


# --------------------------------------------------------------------------
# HyperLogLog
# --------------------------------------------------------------------------


def test_pfadd_pfcount_basics(r):
    assert r.pfadd("h") == 1
    assert r.exists("h") == 1
    assert r.pfcount("h") == 0
    assert r.pfadd("h", "a", "b", "c") == 1
    assert r.pfadd("h", "a", "b") == 0
    assert r.pfcount("h") == 3
    assert r.pfadd("h", "") == 1
    assert r.pfcount("h") == 4
    assert r.pfcount("missing") == 0
    assert r.type("h") == "string"


def test_empty_hll_bytes(r):
    c = make_client(decode=False)
    c.pfadd("h")
    assert c.get("h") == b"HYLL\x01" + b"\x00" * 10 + b"\x80\x7f\xff"  # cache marked stale


def test_pfcount_cache_in_header(r):
    c = make_client(decode=False)
    c.pfadd("h", "a", "b", "c")
    assert c.getrange("h", 15, 15) == b"\x80"  # cache invalidated
    assert c.pfcount("h") == 3
    assert c.getrange("h", 15, 15) == b"\x00"
    assert c.getrange("h", 8, 8) == b"\x03"
    c.pfadd("h", "d")
    assert c.getrange("h", 15, 15) == b"\x80"


def test_pfmerge(r):
    r.pfadd("a", "x", "y", "z")
    r.pfadd("b", "z", "w")
    assert r.pfmerge("dst", "a", "b") is True
    assert r.pfcount("dst") == 4
    assert r.pfcount("a", "b") == 4
    assert r.pfcount("a", "b", "missing") == 4
    r.execute_command("PFMERGE", "only")
    assert r.pfcount("only") == 0
    r.pfmerge("a", "b")  # the destination is one of the sources
    assert r.pfcount("a") == 4


def test_hll_keeps_ttl(r):
    r.pfadd("h", "a")
    r.expire("h", 100)
    r.pfadd("h", "b")
    assert 0 < r.ttl("h") <= 100
    r.pfcount("h")
    assert 0 < r.ttl("h") <= 100
    r.pfmerge("h", "h")
    assert 0 < r.ttl("h") <= 100


def test_hll_type_errors(r):
    r.set("s", "not an hll")
    r.lpush("l", "x")
    for cmd in (["PFADD", "s", "a"], ["PFCOUNT", "s"], ["PFCOUNT", "s", "l"], ["PFMERGE", "d", "s"],
                ["PFDEBUG", "ENCODING", "s"]):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*cmd)
        assert err(e) == "WRONGTYPE Key is not a valid HyperLogLog string value."
    with pytest.raises(redis.ResponseError) as e:
        r.pfadd("l", "a")
    assert err(e) == "WRONGTYPE Operation against a key holding the wrong kind of value"


def test_corrupt_hll_is_invalidobj(r):
    c = make_client(decode=False)
    c.pfadd("h", "a", "b", "c")
    c.append("h", b"hello")  # garbage after the sparse opcodes
    with pytest.raises(redis.ResponseError) as e:
        c.pfcount("h")
    assert "INVALIDOBJ Corrupted HLL object detected" in str(e.value)
    c.set("d", b"HYLL\x00" + b"\x00" * 11 + b"\x00" * 100)  # dense, wrong length
    with pytest.raises(redis.ResponseError) as e:
        c.pfcount("d")
    assert "not a valid HyperLogLog" in str(e.value)
    # Random corruption never crashes the server.
    rng = random.Random(7)
    for _ in range(200):
        c.delete("f")
        c.pfadd("f", *[str(i) for i in range(rng.randint(0, 2000))])
        v = bytearray(c.get("f"))
        for _ in range(rng.randint(1, 10)):
            v[rng.randrange(16, len(v))] = rng.randrange(256)
        c.set("f", bytes(v))
        for cmd in (["PFCOUNT", "f"], ["PFADD", "f", "x", "y"], ["PFMERGE", "g", "f"], ["PFCOUNT", "f", "g"]):
            try:
                c.execute_command(*cmd)
            except redis.ResponseError as e:
                assert "INVALIDOBJ" in str(e) or "WRONGTYPE" in str(e)
    assert c.ping()


def test_pfdebug(r):
    r.pfadd("h", "a", "b")
    assert r.execute_command("PFDEBUG", "ENCODING", "h") == "sparse"
    assert r.execute_command("PFDEBUG", "DECODE", "h").startswith(("Z:", "z:", "v:"))
    regs = r.execute_command("PFDEBUG", "GETREG", "h")
    assert len(regs) == 16384 and sum(1 for x in regs if x) == 2
    assert r.execute_command("PFDEBUG", "ENCODING", "h") == "dense"  # GETREG converted it
    r.pfadd("h2", "a")
    assert r.execute_command("PFDEBUG", "TODENSE", "h2") == 1
    assert r.execute_command("PFDEBUG", "TODENSE", "h2") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("PFDEBUG", "DECODE", "h2")
    assert err(e) == "HLL encoding is not sparse"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("PFDEBUG", "GETREG", "nokey")
    assert err(e) == "The specified key does not exist"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("PFDEBUG", "FOO", "h2")
    assert err(e) == "Unknown PFDEBUG subcommand 'FOO'"


def test_sparse_to_dense_threshold(r):
    r.config_set("hll-sparse-max-bytes", 3000)
    try:
        r.pfadd("h")
        n = 0
        while r.execute_command("PFDEBUG", "ENCODING", "h") == "sparse":
            assert r.strlen("h") <= 3000
            r.pfadd("h", "e%d" % n)
            n += 1
        assert 1000 < n < 3000
        assert r.strlen("h") == 16 + 12288
        r.config_set("hll-sparse-max-bytes", 30)
        r.delete("h")
        r.pfadd("h", *["x%d" % i for i in range(20)])
        assert r.execute_command("PFDEBUG", "ENCODING", "h") == "dense"
    finally:
        r.config_set("hll-sparse-max-bytes", 3000)


def test_pfselftest(r):
    assert r.execute_command("PFSELFTEST") == "OK"


@pytest.mark.parametrize("n", [0, 1, 10, 100, 500, 1000, 2000, 5000, 50000])
def test_hll_bytes_match_redis(both, n):
    t, ref = both
    rng = random.Random(n)
    elements = [rng.randbytes(rng.randint(0, 12)) for _ in range(n)]
    for c in (t, ref):
        c.pfadd("h")
        for i in range(0, n, 113):
            c.pfadd("h", *elements[i:i + 113])
    assert t.get("h") == ref.get("h")
    assert t.pfcount("h") == ref.pfcount("h")
    assert t.get("h") == ref.get("h")  # the cached cardinality too


def test_hll_merge_and_union_match_redis(both):
    t, ref = both
    rng = random.Random(3)
    sets = [[b"%d" % rng.randrange(20000) for _ in range(rng.choice([5, 300, 4000]))] for _ in range(4)]
    for c in (t, ref):
        for i, s in enumerate(sets):
            c.pfadd("s%d" % i, *s)
        c.execute_command("PFDEBUG", "TODENSE", "s3")
        c.pfmerge("m1", "s0", "s1")
        c.pfmerge("m2", "s0", "s1", "s2", "s3")
    for k in ("m1", "m2", "s3"):
        assert t.get(k) == ref.get(k), k
    assert t.pfcount("s0", "s1", "s2") == ref.pfcount("s0", "s1", "s2")
    assert t.pfcount("m2") == ref.pfcount("m2")


def test_redis_written_hll_reads_the_same(both):
    t, ref = both
    for n in (3, 700, 30000):
        ref.delete("h")
        ref.pfadd("h", *[b"r%d" % i for i in range(n)])
        blob = ref.get("h")
        t.set("h", blob)
        assert t.pfcount("h") == ref.pfcount("h")
        t.pfadd("h", "extra")
        ref.pfadd("h", "extra")
        assert t.get("h") == ref.get("h")


def test_small_sparse_max_matches_redis(both):
    t, ref = both
    for c in (t, ref):
        c.config_set("hll-sparse-max-bytes", 200)
        c.pfadd("h", *[b"%d" % i for i in range(60)])
    assert t.get("h") == ref.get("h")


# --------------------------------------------------------------------------
# GEO
# --------------------------------------------------------------------------

SICILY = ["13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"]


def test_geoadd_is_a_zset(r):
    assert r.execute_command("GEOADD", "Sicily", *SICILY) == 2
    assert r.type("Sicily") == "zset"
    assert r.zscore("Sicily", "Palermo") == 3479099956230698
    assert r.zrange("Sicily", 0, -1) == ["Palermo", "Catania"]
    assert r.execute_command("GEOADD", "Sicily", "XX", "CH", "13.361389", "38.2", "Palermo") == 1
    assert r.execute_command("GEOADD", "Sicily", "NX", "13", "38", "Palermo") == 0
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GEOADD", "Sicily", "NX", "XX", "13", "38", "x")
    assert err(e) == "syntax error"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GEOADD", "Sicily", "200", "100", "x")
    assert err(e) == "invalid longitude,latitude pair 200.000000,100.000000"


def test_geopos_geodist_geohash(r):
    r.execute_command("GEOADD", "Sicily", *SICILY)
    pos = r.execute_command("GEOPOS", "Sicily", "Palermo", "nope")
    assert [float(x) for x in pos[0]] == [13.36138933897018433, 38.11555639549629859]
    assert pos[1] is None
    assert r.execute_command("GEODIST", "Sicily", "Palermo", "Catania") in ("166274.1516", 166274.1516)
    assert r.execute_command("GEODIST", "Sicily", "Palermo", "Catania", "km") in ("166.2742", 166.2742)
    assert r.execute_command("GEODIST", "Sicily", "Palermo", "nope") is None
    assert r.execute_command("GEOHASH", "Sicily", "Palermo", "Catania", "x") == ["sqc8b49rny0", "sqdtr74hyu0", None]
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GEODIST", "Sicily", "Palermo", "Catania", "yd")
    assert err(e) == "unsupported unit provided. please use M, KM, FT, MI"


def test_geosearch_and_store(r):
    r.execute_command("GEOADD", "Sicily", *SICILY)
    got = r.execute_command("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC",
                            "WITHDIST", "WITHHASH")
    assert [g[0] for g in got] == ["Catania", "Palermo"]
    assert got[0][2] == 3479447370796909
    assert r.execute_command("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km",
                             "DESC", "COUNT", "1") == ["Catania"]
    assert r.execute_command("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km",
                             "STOREDIST") == 2
    assert r.zrange("dst", 0, -1) == ["Catania", "Palermo"]
    assert r.execute_command("GEORADIUS", "Sicily", "15", "37", "100", "km", "STORE", "dst2") == 1
    assert r.zrange("dst2", 0, -1, withscores=True)[0][1] == 3479447370796909
    assert r.execute_command("GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "10", "km") == ["Palermo"]
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GEOSEARCH", "Sicily", "BYRADIUS", "1", "km", "ASC", "WITHDIST")
    assert err(e) == "exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GEORADIUS_RO", "Sicily", "15", "37", "1", "km", "STORE", "x")
    assert err(e) == "syntax error"
    assert r.execute_command("GEOSEARCH", "nokey", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km") == []


def test_geo_matches_redis(both):
    t, ref = both
    rng = random.Random(11)
    args = []
    for i in range(600):
        args += ["%.6f" % rng.uniform(-20, 40), "%.6f" % rng.uniform(20, 70), "p%d" % i]
    for c in (t, ref):
        c.execute_command("GEOADD", "g", *args)
    def scores(c):
        flat = c.execute_command("ZRANGE", "g", "0", "-1", "WITHSCORES")
        if flat and isinstance(flat[0], (list, tuple)):
            flat = [x for pair in flat for x in pair]
        return [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]

    assert scores(t) == scores(ref)
    for _ in range(60):
        lon, lat = "%.6f" % rng.uniform(-20, 40), "%.6f" % rng.uniform(20, 70)
        shape = (["BYRADIUS", str(rng.choice([10, 100, 500, 2000])), "km"] if rng.random() < 0.5
                 else ["BYBOX", str(rng.choice([50, 500, 3000])), str(rng.choice([50, 500, 3000])), "km"])
        opts = rng.choice([[], ["ASC"], ["DESC", "COUNT", "7"], ["COUNT", "3", "ANY"], ["COUNT", "5"]])
        cmd = ["GEOSEARCH", "g", "FROMLONLAT", lon, lat] + shape + opts + ["WITHDIST", "WITHCOORD", "WITHHASH"]
        assert t.execute_command(*cmd) == ref.execute_command(*cmd), cmd
        cmd = ["GEOPOS", "g"] + ["p%d" % rng.randrange(600) for _ in range(5)]
        assert t.execute_command(*cmd) == ref.execute_command(*cmd)
        cmd = ["GEOHASH", "g", "p%d" % rng.randrange(600)]
        assert t.execute_command(*cmd) == ref.execute_command(*cmd)
