package tembo.ycsb;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Reads the text output of several YCSB runs ({@code site.ycsb.Client} with the default text
 * exporter), prints a compact table, optionally writes the results as JSON, and exits non-zero
 * if any phase had a failed operation or did not complete.
 *
 * <p>Usage: {@code Summary [--label NAME] [--out FILE.json] [--meta KEY=VALUE]...
 * PHASE:WORKLOAD:EXPECTED_OPS:FILE...}; PHASE is e.g. {@code load} or {@code run}, WORKLOAD a
 * letter, EXPECTED_OPS the operation count YCSB was asked for.
 *
 * <p>A phase fails when its output has no {@code [OVERALL]} section (YCSB 0.17 exits 0 even when
 * a client thread died or the DB could not be initialised), when any operation returned something
 * other than {@code Return=OK} (or was measured in an {@code [OP-FAILED]} section), or when fewer
 * operations completed than were asked for.
 */
public final class Summary {

  /** YCSB sections that count DB calls, in the order they are printed. */
  private static final List<String> DB_OPS =
      Arrays.asList("INSERT", "READ", "UPDATE", "SCAN", "DELETE");
  private static final String RMW = "READ-MODIFY-WRITE";

  private Summary() {
  }

  /** Metrics of one operation type within a phase. */
  static final class OpStats {
    final String name;
    long operations;
    double avgUs = Double.NaN;
    double minUs = Double.NaN;
    double maxUs = Double.NaN;
    double p95Us = Double.NaN;
    double p99Us = Double.NaN;
    long failedOperations;
    final Map<String, Long> returns = new LinkedHashMap<String, Long>();

    OpStats(String name) {
      this.name = name;
    }

    long returned() {
      long n = 0;
      for (long v : returns.values()) {
        n += v;
      }
      return n;
    }

    long errors() {
      long notOk = 0;
      for (Map.Entry<String, Long> e : returns.entrySet()) {
        if (!e.getKey().equals("OK")) {
          notOk += e.getValue();
        }
      }
      return Math.max(notOk, failedOperations);
    }
  }

  /** One YCSB invocation. */
  static final class Phase {
    final String phase;
    final String workload;
    final long expected;
    final String file;
    boolean sawOverall;
    double runtimeMs = Double.NaN;
    double throughput = Double.NaN;
    final Map<String, OpStats> ops = new LinkedHashMap<String, OpStats>();
    final List<String> problems = new ArrayList<String>();

    Phase(String phase, String workload, long expected, String file) {
      this.phase = phase;
      this.workload = workload;
      this.expected = expected;
      this.file = file;
    }

    String name() {
      return phase + "-" + workload;
    }

    OpStats op(String name) {
      OpStats s = ops.get(name);
      if (s == null) {
        s = new OpStats(name);
        ops.put(name, s);
      }
      return s;
    }

    long errors() {
      long n = 0;
      for (OpStats s : ops.values()) {
        if (DB_OPS.contains(s.name) || s.name.equals(RMW)) {
          n += s.errors();
        }
      }
      return n;
    }

    /** Completed YCSB operations: DB calls, counting a read-modify-write (2 calls) once. */
    long completed() {
      long calls = 0;
      for (String op : DB_OPS) {
        OpStats s = ops.get(op);
        if (s != null) {
          calls += Math.max(s.returned(), s.operations + s.failedOperations);
        }
      }
      OpStats rmw = ops.get(RMW);
      if (rmw != null) {
        calls -= rmw.operations + rmw.failedOperations;
      }
      return calls;
    }

    boolean ok() {
      return problems.isEmpty();
    }
  }

  static Phase parse(String spec) throws IOException {
    String[] parts = spec.split(":", 4);
    if (parts.length != 4) {
      throw new IllegalArgumentException("bad phase spec (PHASE:WORKLOAD:EXPECTED:FILE): " + spec);
    }
    Phase p = new Phase(parts[0], parts[1], Long.parseLong(parts[2]), parts[3]);
    try (BufferedReader in = Files.newBufferedReader(Paths.get(p.file), StandardCharsets.UTF_8)) {
      String line;
      while ((line = in.readLine()) != null) {
        if (!line.startsWith("[")) {
          continue;
        }
        String[] f = line.split(",", 3);
        if (f.length != 3 || !f[0].endsWith("]")) {
          continue;
        }
        String section = f[0].substring(1, f[0].length() - 1);
        String metric = f[1].trim();
        String value = f[2].trim();
        if (section.equals("OVERALL")) {
          p.sawOverall = true;
          if (metric.equals("RunTime(ms)")) {
            p.runtimeMs = num(value);
          } else if (metric.startsWith("Throughput")) {
            p.throughput = num(value);
          }
          continue;
        }
        boolean failed = section.endsWith("-FAILED");
        String opName = failed ? section.substring(0, section.length() - "-FAILED".length())
            : section;
        if (!DB_OPS.contains(opName) && !opName.equals(RMW)) {
          continue; // GC statistics, CLEANUP, ...
        }
        OpStats s = p.op(opName);
        if (failed) {
          if (metric.equals("Operations")) {
            s.failedOperations += (long) num(value);
          }
          continue;
        }
        if (metric.equals("Operations")) {
          s.operations = (long) num(value);
        } else if (metric.equals("AverageLatency(us)")) {
          s.avgUs = num(value);
        } else if (metric.equals("MinLatency(us)")) {
          s.minUs = num(value);
        } else if (metric.equals("MaxLatency(us)")) {
          s.maxUs = num(value);
        } else if (metric.equals("95thPercentileLatency(us)")) {
          s.p95Us = num(value);
        } else if (metric.equals("99thPercentileLatency(us)")) {
          s.p99Us = num(value);
        } else if (metric.startsWith("Return=")) {
          s.returns.put(metric.substring("Return=".length()), (long) num(value));
        }
      }
    }
    if (!p.sawOverall) {
      p.problems.add("no [OVERALL] results (YCSB failed to start or a client thread died;"
          + " see the log)");
    } else {
      long errors = p.errors();
      if (errors > 0) {
        p.problems.add(errors + " operation(s) failed");
      }
      long done = p.completed();
      if (done != p.expected) {
        p.problems.add(done + " of " + p.expected + " operations completed");
      }
    }
    return p;
  }

  private static double num(String s) {
    try {
      return Double.parseDouble(s);
    } catch (NumberFormatException e) {
      return Double.NaN;
    }
  }

  private static String fmt(double v, int decimals) {
    if (Double.isNaN(v)) {
      return "-";
    }
    return String.format(Locale.ROOT, "%." + decimals + "f", v);
  }

  static void printTable(PrintStream out, String label, List<Phase> phases) {
    if (label != null) {
      out.println("YCSB results: " + label);
    }
    String header = String.format(Locale.ROOT, "%-8s %11s %9s  %-17s %9s %9s %9s %9s %7s",
        "phase", "ops/sec", "secs", "operation", "count", "avg_us", "p95_us", "p99_us", "errors");
    out.println(header);
    for (Phase p : phases) {
      String lead = String.format(Locale.ROOT, "%-8s %11s %9s", p.name(), fmt(p.throughput, 1),
          fmt(p.runtimeMs / 1000.0, 2));
      String blank = String.format(Locale.ROOT, "%-8s %11s %9s", "", "", "");
      boolean first = true;
      for (OpStats s : p.ops.values()) {
        out.println(String.format(Locale.ROOT, "%s  %-17s %9d %9s %9s %9s %7d",
            first ? lead : blank, s.name, s.operations + s.failedOperations,
            fmt(s.operations > 0 ? s.avgUs : Double.NaN, 1),
            fmt(s.operations > 0 ? s.p95Us : Double.NaN, 0),
            fmt(s.operations > 0 ? s.p99Us : Double.NaN, 0), s.errors()));
        first = false;
      }
      if (first) {
        out.println(lead);
      }
      for (String problem : p.problems) {
        out.println("  !! " + p.name() + ": " + problem + " [" + p.file + "]");
      }
    }
  }

  // ---- JSON -------------------------------------------------------------------------------

  private static String jsonString(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"':
          b.append("\\\"");
          break;
        case '\\':
          b.append("\\\\");
          break;
        case '\n':
          b.append("\\n");
          break;
        case '\r':
          b.append("\\r");
          break;
        case '\t':
          b.append("\\t");
          break;
        default:
          if (c < 0x20) {
            b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    return b.append('"').toString();
  }

  private static String jsonNumber(double v) {
    if (Double.isNaN(v) || Double.isInfinite(v)) {
      return "null";
    }
    if (v == Math.rint(v) && Math.abs(v) < 1e15) {
      return Long.toString((long) v);
    }
    return Double.toString(v);
  }

  /** A --meta value: a JSON number when it reads as one, else a string. */
  private static String jsonValue(String v) {
    if (v.matches("-?(0|[1-9][0-9]*)(\\.[0-9]+)?")) {
      return v;
    }
    return jsonString(v);
  }

  static String toJson(String label, Map<String, String> meta, List<Phase> phases) {
    StringBuilder b = new StringBuilder();
    boolean allOk = true;
    for (Phase p : phases) {
      allOk &= p.ok();
    }
    b.append("{\n");
    b.append("  \"label\": ").append(label == null ? "null" : jsonString(label)).append(",\n");
    for (Map.Entry<String, String> e : meta.entrySet()) {
      b.append("  ").append(jsonString(e.getKey())).append(": ").append(jsonValue(e.getValue()))
          .append(",\n");
    }
    b.append("  \"ok\": ").append(allOk).append(",\n");
    b.append("  \"phases\": [");
    for (int i = 0; i < phases.size(); i++) {
      Phase p = phases.get(i);
      b.append(i == 0 ? "\n" : ",\n");
      b.append("    {\n");
      b.append("      \"phase\": ").append(jsonString(p.phase)).append(",\n");
      b.append("      \"workload\": ").append(jsonString(p.workload)).append(",\n");
      b.append("      \"ok\": ").append(p.ok()).append(",\n");
      b.append("      \"runtime_ms\": ").append(jsonNumber(p.runtimeMs)).append(",\n");
      b.append("      \"throughput_ops_sec\": ").append(jsonNumber(p.throughput)).append(",\n");
      b.append("      \"expected_operations\": ").append(p.expected).append(",\n");
      b.append("      \"completed_operations\": ").append(p.completed()).append(",\n");
      b.append("      \"errors\": ").append(p.errors()).append(",\n");
      b.append("      \"problems\": [");
      for (int j = 0; j < p.problems.size(); j++) {
        b.append(j == 0 ? "" : ", ").append(jsonString(p.problems.get(j)));
      }
      b.append("],\n");
      b.append("      \"operations\": {");
      int k = 0;
      for (OpStats s : p.ops.values()) {
        b.append(k++ == 0 ? "\n" : ",\n");
        b.append("        ").append(jsonString(s.name)).append(": {");
        b.append("\"count\": ").append(s.operations + s.failedOperations);
        b.append(", \"errors\": ").append(s.errors());
        b.append(", \"avg_us\": ").append(jsonNumber(s.avgUs));
        b.append(", \"min_us\": ").append(jsonNumber(s.minUs));
        b.append(", \"max_us\": ").append(jsonNumber(s.maxUs));
        b.append(", \"p95_us\": ").append(jsonNumber(s.p95Us));
        b.append(", \"p99_us\": ").append(jsonNumber(s.p99Us));
        b.append(", \"returns\": {");
        int r = 0;
        for (Map.Entry<String, Long> e : s.returns.entrySet()) {
          b.append(r++ == 0 ? "" : ", ").append(jsonString(e.getKey())).append(": ")
              .append(e.getValue());
        }
        b.append("}}");
      }
      b.append(k == 0 ? "}\n" : "\n      }\n");
      b.append("    }");
    }
    b.append(phases.isEmpty() ? "]\n" : "\n  ]\n");
    b.append("}\n");
    return b.toString();
  }

  public static void main(String[] args) throws IOException {
    String label = null;
    String out = null;
    Map<String, String> meta = new LinkedHashMap<String, String>();
    List<Phase> phases = new ArrayList<Phase>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("--label")) {
        label = args[++i];
      } else if (a.equals("--out")) {
        out = args[++i];
      } else if (a.equals("--meta")) {
        String kv = args[++i];
        int eq = kv.indexOf('=');
        if (eq <= 0) {
          throw new IllegalArgumentException("--meta wants KEY=VALUE, got " + kv);
        }
        meta.put(kv.substring(0, eq), kv.substring(eq + 1));
      } else {
        phases.add(parse(a));
      }
    }
    printTable(System.out, label, phases);
    if (out != null) {
      try (Writer w = new OutputStreamWriter(Files.newOutputStream(Paths.get(out)),
          StandardCharsets.UTF_8)) {
        w.write(toJson(label, meta, phases));
      }
    }
    boolean ok = !phases.isEmpty();
    for (Phase p : phases) {
      ok &= p.ok();
    }
    System.out.println(ok ? "YCSB: all phases OK" : "YCSB: FAILED");
    System.exit(ok ? 0 : 1);
  }
}
