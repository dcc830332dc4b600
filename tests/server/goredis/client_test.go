// Package goredis runs go-redis v9, unmodified, against a running
// `tembo serve`: the client every Go service uses, in its default RESP3
// mode (HELLO 3, CLIENT SETINFO at connect) and with Protocol 2, through
// its typed parsers (CLIENT INFO, COMMAND, XINFO, FUNCTION LIST, SLOWLOG,
// INFO), pipelines, transactions with WATCH, pub/sub and scripts.
//
//	TEMBO_ADDR=127.0.0.1:6379 go test ./...   (in this folder)
//
// TEMBO_PASSWORD is sent when set. Each test works in a database of its
// own, flushed before and after (databases 10 to 13).
package goredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func client(t *testing.T, protocol, db int) *redis.Client {
	t.Helper()
	addr := os.Getenv("TEMBO_ADDR")
	if addr == "" {
		t.Skip("TEMBO_ADDR is not set (host:port of a running tembo serve)")
	}
	c := redis.NewClient(&redis.Options{
		Addr:     addr,
		Password: os.Getenv("TEMBO_PASSWORD"),
		DB:       db,
		Protocol: protocol,
	})
	ctx := context.Background()
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("FLUSHDB on db %d: %v", db, err)
	}
	t.Cleanup(func() {
		c.FlushDB(ctx)
		c.Close()
	})
	return c
}

func check(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func same(t *testing.T, what string, got, want interface{}) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %#v, want %#v", what, got, want)
	}
}

// The data types through go-redis's typed replies, in both protocols.
func TestTypes(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			c := client(t, proto, 8+proto)
			ctx := context.Background()

			check(t, "SET EX", c.Set(ctx, "s", "v", time.Minute).Err())
			got, err := c.Get(ctx, "s").Result()
			check(t, "GET", err)
			same(t, "GET", got, "v")
			if _, err := c.Get(ctx, "missing").Result(); err != redis.Nil {
				t.Fatalf("GET of a missing key: want redis.Nil, got %v", err)
			}
			ttl, err := c.TTL(ctx, "s").Result()
			check(t, "TTL", err)
			if ttl <= 50*time.Second || ttl > time.Minute {
				t.Fatalf("TTL: %v", ttl)
			}
			prev, err := c.SetArgs(ctx, "s", "w", redis.SetArgs{KeepTTL: true, Get: true}).Result()
			check(t, "SET KEEPTTL GET", err)
			same(t, "SET GET", prev, "v")
			n, err := c.Incr(ctx, "n").Result()
			check(t, "INCR", err)
			same(t, "INCR", n, int64(1))
			f, err := c.IncrByFloat(ctx, "n", 2.5).Result()
			check(t, "INCRBYFLOAT", err)
			same(t, "INCRBYFLOAT", f, 3.5)
			check(t, "MSET", c.MSet(ctx, "a", "1", "b", "2").Err())
			mget, err := c.MGet(ctx, "a", "missing", "b").Result()
			check(t, "MGET", err)
			same(t, "MGET", mget, []interface{}{"1", nil, "2"})
			if err := c.LPush(ctx, "s", "x").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
				t.Fatalf("LPUSH on a string: want a WRONGTYPE error, got %v", err)
			}

			check(t, "HSET", c.HSet(ctx, "h", map[string]interface{}{"f1": "a", "f2": "b", "n": 1}).Err())
			all, err := c.HGetAll(ctx, "h").Result()
			check(t, "HGETALL", err)
			same(t, "HGETALL", all, map[string]string{"f1": "a", "f2": "b", "n": "1"})
			hn, err := c.HIncrBy(ctx, "h", "n", 41).Result()
			check(t, "HINCRBY", err)
			same(t, "HINCRBY", hn, int64(42))
			pairs, err := c.HRandFieldWithValues(ctx, "h", 5).Result()
			check(t, "HRANDFIELD WITHVALUES", err)
			same(t, "HRANDFIELD count", len(pairs), 3)
			var fields []string
			iter := c.HScan(ctx, "h", 0, "f*", 1).Iterator()
			for iter.Next(ctx) {
				fields = append(fields, iter.Val())
			}
			check(t, "HSCAN", iter.Err())
			sort.Strings(fields)
			same(t, "HSCAN fields and values", fields, []string{"a", "b", "f1", "f2"})

			check(t, "RPUSH", c.RPush(ctx, "l", "a", "b", "c", "b").Err())
			lr, err := c.LRange(ctx, "l", 0, -1).Result()
			check(t, "LRANGE", err)
			same(t, "LRANGE", lr, []string{"a", "b", "c", "b"})
			pos, err := c.LPosCount(ctx, "l", "b", 0, redis.LPosArgs{}).Result()
			check(t, "LPOS COUNT", err)
			same(t, "LPOS", pos, []int64{1, 3})
			key, popped, err := c.LMPop(ctx, "right", 2, "nolist", "l").Result()
			check(t, "LMPOP", err)
			same(t, "LMPOP", []interface{}{key, popped}, []interface{}{"l", []string{"b", "c"}})
			bl, err := c.BLPop(ctx, time.Second, "l").Result()
			check(t, "BLPOP", err)
			same(t, "BLPOP", bl, []string{"l", "a"})
			if _, err := c.BLPop(ctx, time.Second, "empty").Result(); err != redis.Nil {
				t.Fatalf("BLPOP timing out: want redis.Nil, got %v", err)
			}

			check(t, "SADD", c.SAdd(ctx, "s1", "a", "b", "c").Err())
			check(t, "SADD", c.SAdd(ctx, "s2", "b", "c", "d").Err())
			inter, err := c.SInter(ctx, "s1", "s2").Result()
			check(t, "SINTER", err)
			sort.Strings(inter)
			same(t, "SINTER", inter, []string{"b", "c"})
			ism, err := c.SMIsMember(ctx, "s1", "a", "d").Result()
			check(t, "SMISMEMBER", err)
			same(t, "SMISMEMBER", ism, []bool{true, false})

			check(t, "ZADD", c.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "a"}, redis.Z{Score: -2, Member: "b"},
				redis.Z{Score: 1e20, Member: "c"}).Err())
			zs, err := c.ZRangeWithScores(ctx, "z", 0, -1).Result()
			check(t, "ZRANGE WITHSCORES", err)
			same(t, "ZRANGE WITHSCORES", zs, []redis.Z{{Score: -2, Member: "b"}, {Score: 1.5, Member: "a"}, {Score: 1e20, Member: "c"}})
			byScore, err := c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: "z", Start: "(-2", Stop: "+inf", ByScore: true, Rev: false,
				Offset: 0, Count: 1}).Result()
			check(t, "ZRANGE BYSCORE LIMIT", err)
			same(t, "ZRANGE BYSCORE LIMIT", byScore, []string{"a"})
			sc, err := c.ZIncrBy(ctx, "z", 0.25, "a").Result()
			check(t, "ZINCRBY", err)
			same(t, "ZINCRBY", sc, 1.75)
			rank, err := c.ZRankWithScore(ctx, "z", "a").Result()
			if err == nil {
				same(t, "ZRANK WITHSCORE", rank, redis.RankScore{Rank: 1, Score: 1.75})
			} else if !strings.Contains(err.Error(), "wrong number of arguments") {
				// WITHSCORE is Redis 7.2's; 7.0 refuses the extra argument.
				t.Fatalf("ZRANK WITHSCORE: %v", err)
			}
			min, err := c.ZPopMin(ctx, "z").Result()
			check(t, "ZPOPMIN", err)
			same(t, "ZPOPMIN", min, []redis.Z{{Score: -2, Member: "b"}})
			union, err := c.ZUnionWithScores(ctx, redis.ZStore{Keys: []string{"z", "z"}, Aggregate: "SUM"}).Result()
			check(t, "ZUNION WITHSCORES", err)
			same(t, "ZUNION WITHSCORES", union, []redis.Z{{Score: 3.5, Member: "a"}, {Score: 2e20, Member: "c"}})

			check(t, "GEOADD", c.GeoAdd(ctx, "g", &redis.GeoLocation{Name: "Palermo", Longitude: 13.361389, Latitude: 38.115556},
				&redis.GeoLocation{Name: "Catania", Longitude: 15.087269, Latitude: 37.502669}).Err())
			near, err := c.GeoSearchLocation(ctx, "g", &redis.GeoSearchLocationQuery{
				GeoSearchQuery: redis.GeoSearchQuery{Longitude: 15, Latitude: 37, Radius: 200, RadiusUnit: "km", Sort: "ASC"},
				WithDist:       true,
			}).Result()
			check(t, "GEOSEARCH WITHDIST", err)
			if len(near) != 2 || near[0].Name != "Catania" || near[0].Dist < 56 || near[0].Dist > 57 {
				t.Fatalf("GEOSEARCH: %+v", near)
			}
			check(t, "PFADD", c.PFAdd(ctx, "hll", "a", "b", "c", "a").Err())
			card, err := c.PFCount(ctx, "hll").Result()
			check(t, "PFCOUNT", err)
			same(t, "PFCOUNT", card, int64(3))

			var keys []string
			it := c.Scan(ctx, 0, "s*", 2).Iterator()
			for it.Next(ctx) {
				keys = append(keys, it.Val())
			}
			check(t, "SCAN", it.Err())
			sort.Strings(keys)
			same(t, "SCAN MATCH s*", keys, []string{"s", "s1", "s2"})
			size, err := c.DBSize(ctx).Result()
			check(t, "DBSIZE", err)
			same(t, "DBSIZE", size, int64(11))
		})
	}
}

func TestStreams(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			c := client(t, proto, 8+proto)
			ctx := context.Background()
			for i := 0; i < 5; i++ {
				check(t, "XADD", c.XAdd(ctx, &redis.XAddArgs{Stream: "st", ID: fmt.Sprintf("1-%d", i+1),
					Values: map[string]interface{}{"i": i}}).Err())
			}
			msgs, err := c.XRange(ctx, "st", "1-2", "1-3").Result()
			check(t, "XRANGE", err)
			same(t, "XRANGE", msgs, []redis.XMessage{{ID: "1-2", Values: map[string]interface{}{"i": "1"}},
				{ID: "1-3", Values: map[string]interface{}{"i": "2"}}})
			check(t, "XGROUP CREATE", c.XGroupCreate(ctx, "st", "g", "0").Err())
			read, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "alice", Streams: []string{"st", ">"},
				Count: 3}).Result()
			check(t, "XREADGROUP", err)
			if len(read) != 1 || len(read[0].Messages) != 3 || read[0].Messages[2].ID != "1-3" {
				t.Fatalf("XREADGROUP: %+v", read)
			}
			acked, err := c.XAck(ctx, "st", "g", "1-1").Result()
			check(t, "XACK", err)
			same(t, "XACK", acked, int64(1))
			pending, err := c.XPending(ctx, "st", "g").Result()
			check(t, "XPENDING", err)
			same(t, "XPENDING", *pending, redis.XPending{Count: 2, Lower: "1-2", Higher: "1-3",
				Consumers: map[string]int64{"alice": 2}})
			claimed, _, err := c.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: "st", Group: "g", Consumer: "bob",
				Start: "0", Count: 10}).Result()
			check(t, "XAUTOCLAIM", err)
			same(t, "XAUTOCLAIM count", len(claimed), 2)
			info, err := c.XInfoStream(ctx, "st").Result()
			check(t, "XINFO STREAM", err)
			if info.Length != 5 || info.Groups != 1 || info.LastGeneratedID != "1-5" || info.FirstEntry.ID != "1-1" {
				t.Fatalf("XINFO STREAM: %+v", info)
			}
			groups, err := c.XInfoGroups(ctx, "st").Result()
			check(t, "XINFO GROUPS", err)
			if len(groups) != 1 || groups[0].Name != "g" || groups[0].Pending != 2 || groups[0].LastDeliveredID != "1-3" {
				t.Fatalf("XINFO GROUPS: %+v", groups)
			}
			full, err := c.XInfoStreamFull(ctx, "st", 10).Result()
			check(t, "XINFO STREAM FULL", err)
			if full.Length != 5 || len(full.Entries) != 5 || len(full.Groups) != 1 || len(full.Groups[0].Consumers) != 2 {
				t.Fatalf("XINFO STREAM FULL: %+v", full)
			}
		})
	}
}

// Pipelines, MULTI/EXEC and optimistic locking with WATCH.
func TestPipelinesAndTransactions(t *testing.T) {
	c := client(t, 3, 12)
	ctx := context.Background()
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 1000; i++ {
			p.Set(ctx, fmt.Sprintf("k%d", i), i, 0)
			p.Incr(ctx, "count")
		}
		p.Get(ctx, "k999")
		return nil
	})
	check(t, "pipeline", err)
	same(t, "pipeline's last reply", cmds[len(cmds)-1].(*redis.StringCmd).Val(), "999")
	same(t, "INCR count", c.Get(ctx, "count").Val(), "1000")

	out, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "count")
		p.Set(ctx, "tx", "done", 0)
		return nil
	})
	check(t, "MULTI/EXEC", err)
	same(t, "EXEC's INCR", out[0].(*redis.IntCmd).Val(), int64(1001))

	// A transaction whose watched key another client changes fails, and a
	// retry succeeds: the way go-redis users write check-and-set.
	other := client(t, 2, 12)
	tries := 0
	incr := func(tx *redis.Tx) error {
		tries++
		v, err := tx.Get(ctx, "watched").Int()
		if err != nil && err != redis.Nil {
			return err
		}
		if tries == 1 {
			check(t, "the other client's SET", other.Set(ctx, "watched", 100, 0).Err())
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "watched", v+1, 0)
			return nil
		})
		return err
	}
	err = c.Watch(ctx, incr, "watched")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("EXEC after a watched key changed: want redis.TxFailedErr, got %v", err)
	}
	check(t, "WATCH retry", c.Watch(ctx, incr, "watched"))
	same(t, "watched", c.Get(ctx, "watched").Val(), "101")

	// An error inside EXEC is that command's alone.
	out, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "str", "x", 0)
		p.LPush(ctx, "str", "y")
		p.Get(ctx, "str")
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("EXEC with a failing command: want its WRONGTYPE error, got %v", err)
	}
	same(t, "EXEC's GET after the error", out[2].(*redis.StringCmd).Val(), "x")
}

func TestPubSub(t *testing.T) {
	c := client(t, 3, 12)
	ctx := context.Background()
	sub := c.Subscribe(ctx, "news")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE: %v", err)
	}
	psub := c.PSubscribe(ctx, "ne*")
	defer psub.Close()
	if _, err := psub.Receive(ctx); err != nil {
		t.Fatalf("PSUBSCRIBE: %v", err)
	}
	n, err := c.Publish(ctx, "news", "hello").Result()
	check(t, "PUBLISH", err)
	same(t, "PUBLISH receivers", n, int64(2))
	for _, s := range []*redis.PubSub{sub, psub} {
		select {
		case m := <-s.Channel():
			same(t, "message", []string{m.Channel, m.Payload}, []string{"news", "hello"})
		case <-time.After(5 * time.Second):
			t.Fatal("no message within 5 s")
		}
	}
	chans, err := c.PubSubChannels(ctx, "*").Result()
	check(t, "PUBSUB CHANNELS", err)
	same(t, "PUBSUB CHANNELS", chans, []string{"news"})
}

func TestScriptsAndFunctions(t *testing.T) {
	c := client(t, 3, 13)
	ctx := context.Background()
	check(t, "SCRIPT FLUSH", c.ScriptFlush(ctx).Err())
	// Run tries EVALSHA and falls back to EVAL on NOSCRIPT.
	s := redis.NewScript(`redis.call('SET', KEYS[1], ARGV[1]); return {redis.call('GET', KEYS[1]), 3.7, {err=nil}, {ok='fine'}}`)
	v, err := s.Run(ctx, c, []string{"k"}, "val").Result()
	check(t, "EVALSHA/EVAL", err)
	// A float is cut to an integer, a table without items is an empty
	// array, a status table is a status.
	same(t, "script reply", v, []interface{}{"val", int64(3), []interface{}{}, "fine"})
	exists, err := c.ScriptExists(ctx, s.Hash()).Result()
	check(t, "SCRIPT EXISTS", err)
	same(t, "SCRIPT EXISTS", exists, []bool{true})
	if err := c.Eval(ctx, "return redis.error_reply('MYERR custom')", nil).Err(); err == nil || err.Error() != "MYERR custom" {
		t.Fatalf("error_reply: %v", err)
	}

	lib := "#!lua name=golib\nredis.register_function('inc', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)\n" +
		"redis.register_function{function_name='ro', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}"
	name, err := c.FunctionLoadReplace(ctx, lib).Result()
	check(t, "FUNCTION LOAD REPLACE", err)
	same(t, "FUNCTION LOAD", name, "golib")
	n, err := c.FCall(ctx, "inc", []string{"counter"}, 5).Int()
	check(t, "FCALL", err)
	same(t, "FCALL", n, 5)
	ro, err := c.FCallRO(ctx, "ro", []string{"counter"}).Text()
	check(t, "FCALL_RO", err)
	same(t, "FCALL_RO", ro, "5")
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "golib", WithCode: true}).Result()
	check(t, "FUNCTION LIST", err)
	if len(libs) != 1 || libs[0].Name != "golib" || libs[0].Engine != "LUA" || len(libs[0].Functions) != 2 || libs[0].Code != lib {
		t.Fatalf("FUNCTION LIST: %+v", libs)
	}
	check(t, "FUNCTION DELETE", c.FunctionDelete(ctx, "golib").Err())
}

// go-redis's parsers of the server's introspection replies.
func TestIntrospection(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			c := client(t, proto, 8+proto)
			ctx := context.Background()
			check(t, "CLIENT SETNAME", c.Do(ctx, "CLIENT", "SETNAME", "go-test").Err())
			info, err := c.ClientInfo(ctx).Result()
			check(t, "CLIENT INFO", err)
			// go-redis names itself with CLIENT SETINFO (Redis 7.2's; 7.0 has none).
			setinfo := c.Do(ctx, "CLIENT", "SETINFO", "LIB-VER", "9.7.3").Err() == nil
			if info.Name != "go-test" || info.DB != 8+proto || info.Resp != proto ||
				(setinfo && !strings.HasPrefix(info.LibName, "go-redis")) {
				t.Fatalf("CLIENT INFO: %+v", info)
			}
			all, err := c.Command(ctx).Result()
			check(t, "COMMAND", err)
			get, ok := all["get"]
			if !ok || get.Arity != 2 || get.FirstKeyPos != 1 || !get.ReadOnly {
				t.Fatalf("COMMAND's get: %+v", get)
			}
			if len(all) < 200 {
				t.Fatalf("COMMAND: only %d commands", len(all))
			}
			section, err := c.InfoMap(ctx, "server", "keyspace").Result()
			check(t, "INFO", err)
			if section["Server"]["redis_version"] == "" || section["Server"]["tcp_port"] == "" {
				t.Fatalf("INFO server: %+v", section["Server"])
			}
			check(t, "CONFIG SET", c.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err())
			check(t, "SET", c.Set(ctx, "x", "y", 0).Err())
			logs, err := c.SlowLogGet(ctx, 5).Result()
			check(t, "SLOWLOG GET", err)
			if len(logs) == 0 || logs[0].ClientName != "go-test" {
				t.Fatalf("SLOWLOG GET: %+v", logs)
			}
			check(t, "CONFIG SET", c.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err())
			cfg, err := c.ConfigGet(ctx, "maxmemory*").Result()
			check(t, "CONFIG GET", err)
			if _, ok := cfg["maxmemory-policy"]; !ok {
				t.Fatalf("CONFIG GET maxmemory*: %+v", cfg)
			}
			tm, err := c.Time(ctx).Result()
			check(t, "TIME", err)
			if d := time.Since(tm); d > time.Minute || d < -time.Minute {
				t.Fatalf("TIME: %v", tm)
			}
			enc, err := c.ObjectEncoding(ctx, "x").Result()
			check(t, "OBJECT ENCODING", err)
			same(t, "OBJECT ENCODING", enc, "embstr")
			mem, err := c.MemoryUsage(ctx, "x").Result()
			check(t, "MEMORY USAGE", err)
			if mem <= 0 {
				t.Fatalf("MEMORY USAGE: %d", mem)
			}
		})
	}
}
