// ioredis 5, unmodified, against a running `tembo serve`: the client most
// Node.js services use. It checks readiness with INFO at connect (and waits
// while `loading:1`), speaks RESP2, and has its own reply transformers
// (HGETALL to an object), pipelines, MULTI, auto-pipelining, pub/sub,
// defineCommand (EVALSHA falling back to EVAL) and scanStream.
//
//   TEMBO_ADDR=127.0.0.1:6379 node --test      (in this folder)
//
// TEMBO_PASSWORD is sent when set. The tests use database 14, flushed
// before and after.
"use strict";

const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");

const addr = process.env.TEMBO_ADDR;
const [host, port] = (addr || "127.0.0.1:0").split(":");
const options = { host, port: Number(port), db: 14, password: process.env.TEMBO_PASSWORD || undefined, lazyConnect: true };
const skip = addr ? false : "TEMBO_ADDR is not set (host:port of a running tembo serve)";

let r;
before(async () => {
  if (skip) return;
  r = new Redis(options);
  await r.connect();
  await r.flushdb();
});
after(async () => {
  if (skip) return;
  await r.flushdb();
  r.disconnect();
});

test("strings, counters and expiry", { skip }, async () => {
  assert.equal(await r.set("s", "v", "EX", 60), "OK");
  assert.equal(await r.get("s"), "v");
  assert.equal(await r.get("missing"), null);
  const ttl = await r.ttl("s");
  assert.ok(ttl > 50 && ttl <= 60, `TTL ${ttl}`);
  assert.equal(await r.set("s", "w", "KEEPTTL", "GET"), "v");
  assert.equal(await r.incr("n"), 1);
  assert.equal(await r.incrbyfloat("n", "2.5"), "3.5");
  assert.equal(await r.mset({ a: "1", b: "2" }), "OK");
  assert.deepEqual(await r.mget("a", "missing", "b"), ["1", null, "2"]);
  assert.equal(await r.setrange("a", 3, "x"), 4);
  assert.deepEqual(await r.getBuffer("a"), Buffer.from([0x31, 0, 0, 0x78]));
  await assert.rejects(r.lpush("s", "x"), (e) => e.message.startsWith("WRONGTYPE "));
  await assert.rejects(r.incr("s"), /^ReplyError: ERR value is not an integer or out of range/);
});

test("hashes, lists, sets and sorted sets", { skip }, async () => {
  assert.equal(await r.hset("h", { f1: "a", f2: "b", n: 1 }), 3);
  assert.deepEqual(await r.hgetall("h"), { f1: "a", f2: "b", n: "1" });
  assert.equal(await r.hincrby("h", "n", 41), 42);
  assert.deepEqual(await r.hmget("h", "f1", "nope"), ["a", null]);

  assert.equal(await r.rpush("l", "a", "b", "c", "b"), 4);
  assert.deepEqual(await r.lrange("l", 0, -1), ["a", "b", "c", "b"]);
  assert.deepEqual(await r.lpos("l", "b", "COUNT", 0), [1, 3]);
  assert.deepEqual(await r.lmpop(2, "nolist", "l", "RIGHT", "COUNT", 2), ["l", ["b", "c"]]);
  assert.deepEqual(await r.blpop("l", 1), ["l", "a"]);
  assert.equal(await r.blpop("empty", 0.1), null);

  await r.sadd("s1", "a", "b", "c");
  await r.sadd("s2", "b", "c", "d");
  assert.deepEqual((await r.sinter("s1", "s2")).sort(), ["b", "c"]);
  assert.deepEqual(await r.smismember("s1", "a", "d"), [1, 0]);

  assert.equal(await r.zadd("z", 1.5, "a", -2, "b", 1e20, "c"), 3);
  assert.deepEqual(await r.zrange("z", 0, -1, "WITHSCORES"), ["b", "-2", "a", "1.5", "c", "1e+20"]);
  assert.deepEqual(await r.zrange("z", "(-2", "+inf", "BYSCORE", "LIMIT", 0, 1), ["a"]);
  assert.equal(await r.zincrby("z", 0.25, "a"), "1.75");
  assert.deepEqual(await r.zpopmin("z"), ["b", "-2"]);
  assert.deepEqual(await r.zunion(2, "z", "z", "WITHSCORES"), ["a", "3.5", "c", "2e+20"]);
  assert.equal(await r.pfadd("hll", "a", "b", "c", "a"), 1);
  assert.equal(await r.pfcount("hll"), 3);
});

test("pipelines, MULTI/EXEC, WATCH and auto-pipelining", { skip }, async () => {
  const p = r.pipeline();
  for (let i = 0; i < 1000; i++) p.set(`k${i}`, i).incr("count");
  p.get("k999");
  const replies = await p.exec();
  assert.equal(replies.length, 2001);
  assert.deepEqual(replies[2000], [null, "999"]);
  assert.equal(await r.get("count"), "1000");

  assert.deepEqual(await r.multi().incr("count").set("tx", "done").exec(), [
    [null, 1001],
    [null, "OK"],
  ]);
  // An error inside EXEC is that command's alone.
  const mixed = await r.multi().set("str", "x").lpush("str", "y").get("str").exec();
  assert.equal(mixed[0][1], "OK");
  assert.match(String(mixed[1][0]), /WRONGTYPE/);
  assert.equal(mixed[2][1], "x");

  // A watched key changed by another client: EXEC answers null.
  const other = new Redis(options);
  await r.watch("watched");
  await other.set("watched", 100);
  assert.equal(await r.multi().set("watched", 1).exec(), null);
  other.disconnect();
  assert.equal(await r.get("watched"), "100");

  // Commands issued in the same tick go out as one pipeline.
  const auto = new Redis({ ...options, enableAutoPipelining: true });
  const got = await Promise.all(Array.from({ length: 500 }, (_, i) => auto.incrby("auto", i)));
  assert.equal(got[499], (499 * 500) / 2);
  auto.disconnect();
});

test("pub/sub", { skip }, async () => {
  const sub = new Redis(options);
  const received = new Promise((resolve) => sub.on("message", (ch, msg) => resolve([ch, msg])));
  const preceived = new Promise((resolve) => sub.on("pmessage", (pat, ch, msg) => resolve([pat, ch, msg])));
  await sub.subscribe("news");
  await sub.psubscribe("ne*");
  assert.equal(await r.publish("news", "hello"), 2);
  assert.deepEqual(await received, ["news", "hello"]);
  assert.deepEqual(await preceived, ["ne*", "news", "hello"]);
  assert.deepEqual(await r.pubsub("CHANNELS", "*"), ["news"]);
  sub.disconnect();
});

test("scripts and scanStream", { skip }, async () => {
  await r.script("FLUSH");
  // defineCommand sends EVALSHA and, on NOSCRIPT, EVAL.
  r.defineCommand("setget", {
    numberOfKeys: 1,
    lua: "redis.call('SET', KEYS[1], ARGV[1]); return {redis.call('GET', KEYS[1]), 3.7, {ok='fine'}}",
  });
  assert.deepEqual(await r.setget("k", "val"), ["val", 3, "fine"]);
  assert.deepEqual(await r.setget("k", "again"), ["again", 3, "fine"]);
  await assert.rejects(r.eval("return redis.error_reply('MYERR custom')", 0), /MYERR custom/);

  for (let i = 0; i < 300; i++) await r.set(`scan:${i}`, i);
  const seen = new Set();
  await new Promise((resolve, reject) => {
    const s = r.scanStream({ match: "scan:*", count: 50 });
    s.on("data", (keys) => keys.forEach((k) => seen.add(k)));
    s.on("end", resolve);
    s.on("error", reject);
  });
  assert.equal(seen.size, 300);
});

test("connection commands ioredis relies on", { skip }, async () => {
  // The ready check parses INFO's persistence section.
  const info = await r.info("persistence");
  assert.match(info, /^loading:0\r$/m);
  await r.client("SETNAME", "node-test");
  const line = await r.client("INFO");
  assert.match(line, /name=node-test /);
  assert.match(line, / db=14 /);
  const reconnecting = new Redis({ ...options, connectionName: "named", db: 3 });
  await reconnecting.connect();
  assert.equal(await reconnecting.client("GETNAME"), "named");
  assert.match(await reconnecting.client("INFO"), / db=3 /);
  reconnecting.disconnect();
  const [secs] = await r.time();
  assert.ok(Math.abs(Number(secs) - Date.now() / 1000) < 60);
});
