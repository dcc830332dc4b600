"""Real-client tests of ACL users through redis-py's own ACL API: users
made with ACL SETUSER, clients that log in as them (AUTH user pass, and
HELLO 3 AUTH over RESP3), what they may run, which keys and channels they
may use, ACL GETUSER / LOG / DRYRUN as redis-py parses them, and — with
TEMBO_BIN set — users loaded at start from `--user` and from an ACL file
that ACL SAVE and ACL LOAD use. Expected replies are Redis 7.0's.

    TEMBO_PORT=6379 python3 -m pytest -q tests/server/test_acl.py
"""

import os
import socket
import subprocess
import tempfile
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from crash_kill9 import free_port
from test_commands import HOST, PASSWORD, PORT, err, is_reference_redis, make_client, r  # noqa: F401  (r is a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(autouse=True)
def drop_test_users():
    """Every test's users start with t_ and are deleted after it."""
    yield
    c = make_client()
    try:
        users = [u for u in c.acl_users() if u.startswith("t_")]
        if users:
            c.acl_deluser(*users)
        c.acl_log_reset()
    finally:
        c.close()


def login(user, password, protocol=2, port=None):
    """A redis-py client logged in as `user`; it does not retry (a refused
    login would otherwise be retried with back-off)."""
    return redis.Redis(host=HOST, port=port or PORT, username=user, password=password, protocol=protocol,
                       decode_responses=True, retry=Retry(NoBackoff(), 0))


def raw_login(user, password, port=None):
    """A plain socket authenticated as `user` (no client library reconnecting behind our back)."""
    s = socket.create_connection((HOST, port or PORT), timeout=5)
    s.sendall(f"AUTH {user} {password}\r\n".encode())
    assert s.recv(100) == b"+OK\r\n"
    return s


def closed_by_server(s):
    """True once the server has closed the socket (reads give EOF)."""
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, socket.timeout):
        return False
    finally:
        s.close()


def test_default_user_and_whoami(r):
    assert r.acl_whoami() == "default"
    assert "default" in r.acl_users()
    info = r.acl_getuser("default")
    assert info["enabled"] and "on" in info["flags"]
    assert info["categories"] == ["+@all"] and info["commands"] == []
    assert info["keys"] == ["~*"] and info["channels"] == ["&*"]
    assert any(line.startswith("user default on") and line.endswith("~* &* +@all") for line in r.acl_list())


def test_new_user_starts_off_without_permissions(r):
    assert r.acl_setuser("t_new")
    info = r.acl_getuser("t_new")
    assert not info["enabled"] and "off" in info["flags"]
    assert info["categories"] == ["-@all"] and info["keys"] == [] and info["channels"] == []
    r.acl_setuser("t_new", enabled=False, passwords=["+pw"])
    with pytest.raises(redis.AuthenticationError):
        login("t_new", "pw").ping()


@pytest.mark.parametrize("protocol", [2, 3])
def test_login_as_a_user_and_its_command_rules(r, protocol):
    r.acl_setuser("t_app", enabled=True, passwords=["+s3cret"], categories=["+@all", "-@dangerous"], keys=["app:*"],
                  channels=["news"])
    c = login("t_app", "s3cret", protocol)
    try:
        assert c.acl_whoami() == "t_app"
        assert c.set("app:1", "v")
        assert c.get("app:1") == "v"
        with pytest.raises(redis.exceptions.NoPermissionError) as e:
            c.set("other", "v")
        assert "keys" in str(e.value)
        with pytest.raises(redis.exceptions.NoPermissionError) as e:
            c.flushall()
        assert "flushall" in str(e.value)
        assert c.publish("news", "hi") == 0
        with pytest.raises(redis.exceptions.NoPermissionError):
            c.publish("sports", "hi")
    finally:
        c.close()
    with pytest.raises(redis.AuthenticationError):
        login("t_app", "wrong", protocol).ping()


def test_read_and_write_key_patterns(r):
    r.acl_setuser("t_rw", enabled=True, nopass=True, categories=["+@all"], keys=["%R~ro:*", "%W~wo:*"])
    r.set("ro:1", "x")
    assert r.acl_dryrun("t_rw", "GET", "ro:1") == "OK"
    assert "no permissions to access the 'ro:1' key" in r.acl_dryrun("t_rw", "SET", "ro:1", "y")
    assert r.acl_dryrun("t_rw", "SET", "wo:1", "y") == "OK"
    assert "'wo:1' key" in r.acl_dryrun("t_rw", "GET", "wo:1")
    assert "'wo:1' key" in r.acl_dryrun("t_rw", "INCR", "wo:1")  # INCR reads too
    assert r.acl_dryrun("t_rw", "EXISTS", "wo:1") == "OK"  # either kind will do
    assert r.acl_dryrun("t_rw", "SUNIONSTORE", "wo:d", "ro:a", "ro:b") == "OK"
    assert "'ro:d' key" in r.acl_dryrun("t_rw", "SUNIONSTORE", "ro:d", "ro:a")
    info = r.acl_getuser("t_rw")
    assert "%R~ro:*" in str(info["keys"]) and "%W~wo:*" in str(info["keys"])


def test_subcommand_and_first_arg_rules(r):
    r.acl_setuser("t_sub", enabled=True, nopass=True, commands=["+client|id", "+select|0", "+acl|whoami"])
    info = r.acl_getuser("t_sub")
    # Redis does not keep the order of the rules it lists.
    assert info["categories"] == ["-@all"] and sorted(info["commands"]) == ["+acl|whoami", "+client|id", "+select|0"]
    c = login("t_sub", "x")
    try:
        assert c.client_id() > 0
        assert c.execute_command("SELECT", 0) in (True, "OK")
        with pytest.raises(redis.exceptions.NoPermissionError):
            c.execute_command("SELECT", 1)
        with pytest.raises(redis.exceptions.NoPermissionError) as e:
            c.client_list()
        assert "client|list" in str(e.value)
    finally:
        c.close()


def test_selectors_allow_what_one_of_them_allows(r):
    r.execute_command("ACL", "SETUSER", "t_sel", "on", "nopass", "+get", "~a:*", "(+set ~b:*)")
    info = r.acl_getuser("t_sel")
    assert len(info["selectors"]) == 1
    assert r.acl_dryrun("t_sel", "GET", "a:1") == "OK"
    assert r.acl_dryrun("t_sel", "SET", "b:1", "v") == "OK"
    # Neither selector allows these; the refusal named is the one that got
    # furthest into the arguments (the key), as Redis reports it.
    assert r.acl_dryrun("t_sel", "GET", "b:1") == "This user has no permissions to access the 'b:1' key"
    assert r.acl_dryrun("t_sel", "SET", "a:1", "v") == "This user has no permissions to access the 'a:1' key"
    assert r.acl_dryrun("t_sel", "DEL", "a:1") == "This user has no permissions to run the 'del' command"


def test_acl_log_as_redis_py_reads_it(r):
    r.acl_log_reset()
    r.acl_setuser("t_log", enabled=True, passwords=["+pw"], commands=["+get"], keys=["ok"])
    c = login("t_log", "pw")
    try:
        for _ in range(3):
            with pytest.raises(redis.exceptions.NoPermissionError):
                c.set("ok", "v")
        with pytest.raises(redis.exceptions.NoPermissionError):
            c.get("secret")
    finally:
        c.close()
    with pytest.raises(redis.AuthenticationError):
        login("t_log", "bad").ping()
    entries = r.acl_log()
    assert [e["reason"] for e in entries[:3]] == ["auth", "key", "command"]
    assert entries[1]["object"] == "secret"
    assert entries[2]["object"] == "set" and entries[2]["count"] == 3
    assert entries[2]["username"] == "t_log" and entries[2]["context"] == "toplevel"
    assert isinstance(entries[2]["age-seconds"], float)
    assert len(r.acl_log(count=1)) == 1


def test_multi_exec_and_scripts_are_checked(r):
    r.acl_setuser("t_tx", enabled=True, nopass=True, commands=["+multi", "+exec", "+eval", "+get"], keys=["*"])
    c = login("t_tx", "x")
    try:
        p = c.pipeline(transaction=True)
        p.get("a").set("a", "1")
        with pytest.raises(redis.ResponseError) as e:  # the SET is refused when queued: EXEC aborts
            p.execute()
        assert "set" in err(e)
        assert r.get("a") is None
        with pytest.raises(redis.ResponseError) as e:
            c.eval("return redis.call('set', KEYS[1], 'v')", 1, "a")
        assert "The user executing the script can't run this command or subcommand" in err(e)
        assert c.eval("return redis.acl_check_cmd('get', 'a')", 0) == 1
        assert c.eval("return redis.acl_check_cmd('set', 'a', 'v')", 0) is None
    finally:
        c.close()
    contexts = {e["context"] for e in r.acl_log()}
    assert {"multi", "lua"} <= contexts


def test_deleting_a_user_disconnects_its_clients(r):
    r.acl_setuser("t_gone", enabled=True, nopass=True, categories=["+@all"], keys=["*"])
    r.acl_setuser("t_stays", enabled=True, nopass=True, categories=["+@all"], keys=["*"])
    gone, stays = raw_login("t_gone", "x"), raw_login("t_stays", "x")
    assert r.acl_deluser("t_gone", "t_nosuch") == 1
    assert closed_by_server(gone)
    stays.sendall(b"PING\r\n")
    assert stays.recv(100) == b"+PONG\r\n"
    stays.close()
    with pytest.raises(redis.ResponseError) as e:
        r.acl_deluser("default")
    assert "cannot be removed" in err(e)


def test_subscriber_loses_its_channel(r):
    r.acl_setuser("t_sub2", enabled=True, nopass=True, categories=["+@all"], channels=["ch", "other"])
    s = raw_login("t_sub2", "x")
    s.sendall(b"SUBSCRIBE ch\r\n")
    assert b"subscribe" in s.recv(100)
    r.execute_command("ACL", "SETUSER", "t_sub2", "resetchannels", "&ch")  # keeps ch: stays
    s.sendall(b"PING\r\n")
    assert b"pong" in s.recv(100)
    r.execute_command("ACL", "SETUSER", "t_sub2", "resetchannels", "&other")  # loses ch: closed
    assert closed_by_server(s)


def test_cat_genpass_and_errors(r):
    cats = r.acl_cat()
    assert "keyspace" in cats and "dangerous" in cats and len(cats) == 21
    assert "multi" in r.acl_cat("transaction")
    assert "get" not in r.acl_cat("keyspace")
    assert len(r.acl_genpass()) == 64
    assert len(r.acl_genpass(5)) == 2
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ACL", "GENPASS", 5000)
    assert "GENPASS" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ACL", "SETUSER", "t_bad", "+nosuchcommand")
    assert "Unknown command or category name in ACL" in err(e)
    assert r.acl_getuser("t_bad") is None
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("ACL", "SETUSER", "bad name")
    assert "spaces" in err(e)
    with pytest.raises(redis.ResponseError) as e:
        r.acl_dryrun("nobody", "GET", "x")
    assert "not found" in err(e)


# --- users from the command line and the ACL file (a server of its own) ----------------

@pytest.fixture
def own_server():
    """Starts `$TEMBO_BIN serve` with extra arguments; yields (start, dir)."""
    binary = os.environ.get("TEMBO_BIN")
    if not binary or PASSWORD:
        pytest.skip("needs TEMBO_BIN (a tembo binary) and no TEMBO_PASSWORD")
    d = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    procs = []

    def start(*args):
        port = free_port()
        p = subprocess.Popen([binary, "serve", "--port", str(port), "--pool", f"{d}/tembo.pool", "--loglevel", "warn",
                              *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        procs.append(p)
        for _ in range(100):
            if p.poll() is not None:
                return p, None
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return p, port
            except OSError:
                time.sleep(0.05)
        return p, None

    yield start, d
    for p in procs:
        if p.poll() is None:
            p.terminate()
            p.wait(10)
    subprocess.run(["rm", "-rf", d])


def test_users_from_the_command_line(own_server):
    start, _ = own_server
    _, port = start("--user", "admin on >adminpw ~* &* +@all", "--user", "default off")
    assert port
    anon = redis.Redis(port=port, decode_responses=True, retry=Retry(NoBackoff(), 0))
    with pytest.raises(redis.AuthenticationError):
        anon.ping()
    admin = login("admin", "adminpw", port=port)
    assert admin.acl_whoami() == "admin"
    assert admin.set("k", "v")
    admin.close()


def test_bad_user_line_refuses_to_start(own_server):
    start, _ = own_server
    p, port = start("--user", "broken on +nosuchcommand")
    assert port is None
    out = p.communicate(timeout=10)[0].decode()
    assert p.returncode != 0 and "nosuchcommand" in out


def test_acl_file_load_and_save(own_server):
    start, d = own_server
    path = f"{d}/users.acl"
    with open(path, "w") as f:
        f.write("user default on nopass ~* &* +@all\nuser alice on >pw1 ~a:* resetchannels -@all +get +set\n")
    _, port = start("--aclfile", path)
    assert port
    c = redis.Redis(port=port, decode_responses=True)
    assert sorted(c.acl_users()) == ["alice", "default"]
    alice = login("alice", "pw1", port=port)
    assert alice.set("a:1", "x")
    c.acl_setuser("bob", enabled=True, passwords=["+pw2"], commands=["+ping"])
    assert c.acl_save()
    text = open(path).read()
    assert "user bob on #" in text and "user alice on #" in text and "pw2" not in text
    with open(path, "w") as f:
        f.write("user default on nopass ~* &* +@all\nuser carol on nopass +@all ~*\n")
    assert c.acl_load()
    assert sorted(c.acl_users()) == ["carol", "default"]
    with pytest.raises(redis.ConnectionError):
        alice.ping()  # alice is gone: her connection was closed
    carol = raw_login("carol", "x", port=port)
    assert c.acl_load()  # as in Redis 7.0, every non-default login is closed; default's stay
    assert closed_by_server(carol)
    assert c.ping()
    with open(path, "w") as f:
        f.write("user default on nopass ~* &* +@all\nuser dave on +nosuchcommand\n")
    with pytest.raises(redis.ResponseError) as e:
        c.acl_load()
    assert "nosuchcommand" in err(e)
    assert sorted(c.acl_users()) == ["carol", "default"]  # all or nothing
    c.close()


def test_command_list_filters_and_denial_counters(r):
    names = r.command_list()
    assert "set" in names and "client|list" in names and "acl|setuser" in names
    scripting = r.command_list(category="scripting")
    assert "eval" in scripting and "script|kill" in scripting and "set" not in scripting
    assert r.command_list(category="nosuch") == []
    assert r.command_list(pattern="get") == ["get"]
    rewrite = r.command_list(pattern="config|*re*")
    assert "config|resetstat" in rewrite and "config|rewrite" in rewrite
    for bad in (["bad_arg"], ["FILTERBY", "bad_arg"], ["FILTERBY", "bad_arg", "x"]):
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("COMMAND", "LIST", *bad)
        assert "syntax error" in err(e)
    if is_reference_redis():
        return  # Redis 7.0 has no acl_access_denied_* counters (they came in 7.2)
    before = r.info("stats")
    r.acl_setuser("t_count", enabled=True, nopass=True, commands=["+get"])
    assert r.acl_dryrun("t_count", "SET", "k", "v") != "OK"  # a dry run counts nothing
    s = raw_login("t_count", "x")
    s.sendall(b"SET k v\r\nGET k\r\n")
    replies = b""
    while replies.count(b"\r\n") < 2:
        replies += s.recv(1000)
    assert replies.count(b"-NOPERM") == 2
    s.close()
    after = r.info("stats")
    assert after["acl_access_denied_cmd"] == before["acl_access_denied_cmd"] + 1
    assert after["acl_access_denied_key"] == before["acl_access_denied_key"] + 1


def test_monitor_hides_passwords(r):
    r.acl_setuser("t_mon", enabled=True, passwords=["+hunter2"], categories=["+@all"], keys=["*"])
    mon = socket.create_connection((HOST, PORT), timeout=5)
    if PASSWORD:
        mon.sendall(f"AUTH {PASSWORD}\r\n".encode())
        assert mon.recv(100) == b"+OK\r\n"
    mon.sendall(b"MONITOR\r\n")
    assert mon.recv(100) == b"+OK\r\n"
    s = socket.create_connection((HOST, PORT), timeout=5)
    s.sendall(b"AUTH t_mon hunter2\r\nHELLO 2 AUTH t_mon hunter2\r\nPING\r\n")
    seen = b""
    while b'"PING"' not in seen:
        seen += mon.recv(4096)
    s.close()
    mon.close()
    assert b"hunter2" not in seen
    assert b'"AUTH" "(redacted)" "(redacted)"' in seen
    assert b'"HELLO" "2" "AUTH" "(redacted)" "(redacted)"' in seen


def test_review_fixes(r):
    # The STREAMS keyword is found as XREADGROUP's parser finds it: a
    # consumer named "streams" does not hide the real keys.
    r.acl_setuser("t_x", enabled=True, nopass=True, categories=["+@all"], keys=["stream*"])
    assert "'secret' key" in r.acl_dryrun("t_x", "XREADGROUP", "GROUP", "g", "streams", "STREAMS", "streams", "secret",
                                          ">", ">")
    # Setting "everything" twice is no error; a pattern with a space is refused.
    assert r.execute_command("ACL", "SETUSER", "t_x", "allkeys", "~*", "allchannels", "&*")
    with pytest.raises(redis.ResponseError):
        r.execute_command("ACL", "SETUSER", "t_x", "resetkeys", "~app:* +@all")
    with pytest.raises(redis.ResponseError):
        r.execute_command("ACL", "SETUSER", "t_x y")
    # CLIENT KILL USER kills that user's connections only.
    r.acl_setuser("t_k", enabled=True, nopass=True, categories=["+@all"], keys=["*"])
    victim, bystander = raw_login("t_k", "x"), raw_login("t_x", "x")
    assert r.execute_command("CLIENT", "KILL", "USER", "t_k") == 1
    assert closed_by_server(victim)
    bystander.sendall(b"PING\r\n")
    assert bystander.recv(100) == b"+PONG\r\n"
    bystander.close()
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "KILL", "USER", "t_nosuch")
    assert "No such user" in err(e)
    # SORT ... GET needs one selector that both allows SORT and reads every key.
    r.rpush("l", "1")
    r.execute_command("ACL", "SETUSER", "t_s", "on", "nopass", "+sort", "~l", "(%R~*)")
    s = raw_login("t_s", "x")
    s.sendall(b"SORT l GET h_*\r\n")
    assert b"GET option of SORT denied" in s.recv(200)
    s.close()


def test_exec_after_permissions_changed(r):
    r.acl_setuser("t_e", enabled=True, nopass=True, commands=["+multi", "+exec", "+incr"], keys=["*"])
    s = raw_login("t_e", "x")
    s.sendall(b"MULTI\r\nINCR n\r\n")
    got = b""
    while got.count(b"\r\n") < 2:
        got += s.recv(100)
    assert got == b"+OK\r\n+QUEUED\r\n"
    r.acl_setuser("t_e", commands=["-incr"])
    s.sendall(b"EXEC\r\n")
    got = b""
    while b"reason" not in got or not got.endswith(b"\r\n"):
        got += s.recv(1000)
    s.close()
    assert b"-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call." in got
    assert r.get("n") is None


def test_slowlog_hides_secrets(r):
    r.config_set("slowlog-log-slower-than", 0)
    try:
        r.slowlog_reset()
        r.execute_command("ACL", "SETUSER", "t_slow", ">topsecret")
        entries = r.slowlog_get(10)
        assert not any(b"topsecret" in a or "topsecret" in str(a) for e in entries for a in e["command"].split())
    finally:
        r.config_set("slowlog-log-slower-than", 10000)


def test_acl_load_keeps_requirepass_for_default(own_server):
    start, d = own_server
    path = f"{d}/users.acl"
    with open(path, "w") as f:
        f.write("user alice on >pw ~* +@all\n")
    _, port = start("--requirepass", "sesame", "--aclfile", path)
    assert port
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=port, retry=Retry(NoBackoff(), 0)).ping()
    admin = login("default", "sesame", port=port)
    assert admin.acl_load()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=port, retry=Retry(NoBackoff(), 0)).ping()  # still needs the password
    assert login("default", "sesame", port=port).ping()
    admin.close()


def test_unauthenticated_requests_are_kept_small(own_server):
    """As Redis: before a client logs in, a request may have at most 10
    arguments of at most 16 KiB (nobody without the password can make the
    server buffer a big request); AUTH pipelined before a big write lifts
    the limits for what follows it."""
    start, _ = own_server
    _, port = start("--requirepass", "pw")
    assert port

    def send(payload):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(payload)
        data = b""
        s.settimeout(2)
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if data.count(b"\r\n") >= 3:
                    break
        except socket.timeout:
            pass
        s.close()
        return data

    def enc(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else a.encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    assert send(b"*100\r\n").startswith(b"-ERR Protocol error: unauthenticated multibulk length")
    assert send(b"*1\r\n$100000000\r\n").startswith(b"-ERR Protocol error: unauthenticated bulk length")
    got = send(enc("AUTH", "pw") + enc("SET", "big", "x" * 100000) + enc("STRLEN", "big"))
    assert got == b"+OK\r\n+OK\r\n:100000\r\n"


def test_unauthenticated_client_that_does_not_read_is_closed(own_server):
    """Debian's Redis (CVE-2025-21605): a client that has not logged in
    cannot make the server hold replies it does not read; flooding
    commands without reading ends with the connection closed."""
    start, _ = own_server
    _, port = start("--requirepass", "pw")
    assert port
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    batch = b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$1\r\n5\r\n" * 5000
    ended = None
    try:
        for _ in range(200):  # up to 1,000,000 commands, as Redis's test
            s.sendall(batch)
    except socket.timeout:
        ended = "blocked: the server stopped reading and kept the client"
    except OSError:
        ended = "closed"
    s.close()
    assert ended == "closed"
    # The server serves the next client.
    ok = redis.Redis(port=port, password="pw")
    assert ok.ping()
    ok.close()


def test_unknown_subcommands_are_refused_before_acl_checks(r):
    # redis-py 8 sends CLIENT MAINT_NOTIFICATIONS at connect: Redis's command
    # table refuses the unknown subcommand before any permission check, so it
    # is never an ACL LOG entry.
    r.acl_log_reset()
    r.acl_setuser("t_sub", enabled=True, passwords=["+pw"], commands=["+get"], keys=["*"])
    c = login("t_sub", "pw")
    try:
        with pytest.raises(redis.ResponseError) as e:
            c.execute_command("CLIENT", "MAINT_NOTIFICATIONS", "ON")
        assert err(e) == "unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP."
        with pytest.raises(redis.exceptions.NoPermissionError):
            c.execute_command("CLIENT", "ID")
    finally:
        c.close()
    objects = [e["object"] for e in r.acl_log() if e["username"] == "t_sub"]
    assert "client|id" in objects
    assert "client" not in objects
