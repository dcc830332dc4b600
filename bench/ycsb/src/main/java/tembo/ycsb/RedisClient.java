package tembo.ycsb;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.atomic.AtomicInteger;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.exceptions.JedisException;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * YCSB {@link DB} binding that drives a Redis-protocol server (Tembo's {@code tembo serve}, or a
 * real redis-server as the reference) through Jedis.
 *
 * <p>This class mirrors the command set of YCSB's official Redis binding
 * ({@code site.ycsb.db.RedisClient} in YCSB's {@code redis} module). That binding is not
 * published on Maven Central (only {@code site.ycsb:core} is), so instead of vendoring a YCSB
 * release tarball we re-implement it here against the same Jedis version it was built with
 * ({@code redis.clients:jedis:2.9.0}). Numbers measured with this class are therefore comparable
 * with numbers measured with the official binding: every YCSB operation sends exactly the same
 * Redis commands.
 *
 * <p>Data model (as in the official binding): each record is a hash at its key; every inserted key
 * is also added to one sorted set, {@value #INDEX_KEY}, with score {@code key.hashCode()}, which
 * scans walk.
 *
 * <table>
 *   <caption>Commands per operation</caption>
 *   <tr><td>insert</td><td>{@code HMSET key f1 v1 ... fn vn}; if the reply is {@code +OK}:
 *       {@code ZADD _indices <hash(key)> key}</td></tr>
 *   <tr><td>read</td><td>{@code HGETALL key} when all fields are wanted, else
 *       {@code HMGET key f1 ... fn}</td></tr>
 *   <tr><td>update</td><td>{@code HMSET key f1 v1 ...}</td></tr>
 *   <tr><td>delete</td><td>{@code DEL key}, {@code ZREM _indices key}</td></tr>
 *   <tr><td>scan</td><td>{@code ZRANGEBYSCORE _indices <hash(startkey)> +inf LIMIT 0 <count>},
 *       then one read (as above) per returned key</td></tr>
 * </table>
 *
 * <p>Properties: {@code redis.host} (default 127.0.0.1), {@code redis.port} (default 6379),
 * {@code redis.password} (optional; sends {@code AUTH} after connecting), {@code redis.timeout}
 * (socket connect/read timeout in ms; Jedis' default of 2000 ms when unset). The official
 * binding's {@code redis.cluster} mode is not supported.
 *
 * <p>Deliberate differences from the official binding, all in the <em>status</em> reported, never
 * in the commands sent (except for delete, see there):
 *
 * <ul>
 *   <li>read: a field that HMGET returns as nil is left out of the result, so a read of a missing
 *       key is an ERROR for HMGET as it already is for HGETALL (the official binding stores the
 *       nils, making such a read "OK").
 *   <li>delete: always sends both DEL and ZREM (the official binding skips ZREM when DEL deleted
 *       something, because of a short-circuit {@code &&}, which leaves stale entries in the index).
 *       The status is as there: ERROR only when both replied 0, i.e. there was nothing to delete.
 *       The standard workloads A-F never delete.
 *   <li>scan: ERROR if any per-key read inside the scan fails (the official binding ignores them).
 *       Inserts write the hash before the index entry, so a key seen in the index always has its
 *       hash unless something deleted it.
 *   <li>A runtime exception from Jedis (a {@code -ERR} reply, a reply of an unexpected type, a
 *       broken connection, a timeout) makes the operation return ERROR and is logged to stderr
 *       (first few per thread), instead of escaping into YCSB's client thread, where YCSB 0.17
 *       prints it and calls {@code System.exit(0)}, hiding the failure from scripts.
 * </ul>
 *
 * <p>YCSB creates one DB instance per client thread, so each thread has its own connection.
 */
public class RedisClient extends DB {

  public static final String HOST_PROPERTY = "redis.host";
  public static final String PORT_PROPERTY = "redis.port";
  public static final String PASSWORD_PROPERTY = "redis.password";
  public static final String TIMEOUT_PROPERTY = "redis.timeout";

  /** Sorted set holding every key, scored by {@link #hash(String)}; used by scans. */
  public static final String INDEX_KEY = "_indices";

  /** How many failures each thread describes on stderr before going quiet. */
  private static final int MAX_LOGGED_FAILURES = 5;

  /** Failures across all threads (numbers the log lines). */
  private static final AtomicInteger TOTAL_FAILURES = new AtomicInteger();

  private Jedis jedis;
  private int loggedFailures;

  @Override
  public void init() throws DBException {
    Properties props = getProperties();
    String host = props.getProperty(HOST_PROPERTY, "127.0.0.1");
    int port = Protocol.DEFAULT_PORT;
    String portString = props.getProperty(PORT_PROPERTY);
    if (portString != null) {
      port = Integer.parseInt(portString.trim());
    }
    String timeout = props.getProperty(TIMEOUT_PROPERTY);
    String password = props.getProperty(PASSWORD_PROPERTY);

    if (timeout != null) {
      jedis = new Jedis(host, port, Integer.parseInt(timeout.trim()));
    } else {
      jedis = new Jedis(host, port);
    }
    try {
      jedis.connect();
      if (password != null) {
        jedis.auth(password);
      }
    } catch (JedisException e) {
      throw new DBException("cannot connect to " + host + ":" + port + ": " + e.getMessage(), e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    try {
      jedis.close();
    } catch (JedisException e) {
      throw new DBException("closing the connection failed", e);
    }
  }

  /** Score of a key in {@value #INDEX_KEY}; the official binding uses {@code String.hashCode()}. */
  static double hash(String key) {
    return key.hashCode();
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      readInto(key, fields, result);
    } catch (RuntimeException e) {
      return failed("read", key, e);
    }
    return result.isEmpty() ? Status.ERROR : Status.OK;
  }

  private void readInto(String key, Set<String> fields, Map<String, ByteIterator> result) {
    if (fields == null) {
      StringByteIterator.putAllAsByteIterators(result, jedis.hgetAll(key));
      return;
    }
    String[] names = fields.toArray(new String[0]);
    List<String> values = jedis.hmget(key, names);
    for (int i = 0; i < names.length && i < values.size(); i++) {
      String value = values.get(i);
      if (value != null) {
        result.put(names[i], new StringByteIterator(value));
      }
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      if ("OK".equals(jedis.hmset(key, StringByteIterator.getStringMap(values)))) {
        jedis.zadd(INDEX_KEY, hash(key), key);
        return Status.OK;
      }
      return Status.ERROR;
    } catch (RuntimeException e) {
      return failed("insert", key, e);
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      long deleted = jedis.del(key);
      long unindexed = jedis.zrem(INDEX_KEY, key);
      return deleted == 0 && unindexed == 0 ? Status.ERROR : Status.OK;
    } catch (RuntimeException e) {
      return failed("delete", key, e);
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      return "OK".equals(jedis.hmset(key, StringByteIterator.getStringMap(values)))
          ? Status.OK : Status.ERROR;
    } catch (RuntimeException e) {
      return failed("update", key, e);
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    try {
      Set<String> keys =
          jedis.zrangeByScore(INDEX_KEY, hash(startkey), Double.POSITIVE_INFINITY, 0, recordcount);
      boolean allFound = true;
      for (String key : keys) {
        HashMap<String, ByteIterator> values = new HashMap<String, ByteIterator>();
        readInto(key, fields, values);
        allFound &= !values.isEmpty();
        result.add(values);
      }
      return allFound ? Status.OK : Status.ERROR;
    } catch (RuntimeException e) {
      return failed("scan", startkey, e);
    }
  }

  private Status failed(String op, String key, RuntimeException e) {
    int total = TOTAL_FAILURES.incrementAndGet();
    if (loggedFailures < MAX_LOGGED_FAILURES) {
      loggedFailures++;
      System.err.println("tembo.ycsb.RedisClient: " + op + " " + key + " failed (#" + total
          + "): " + e);
    }
    return Status.ERROR;
  }
}
