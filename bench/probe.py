"""A request-reply client timing GETs in a thread while something else
happens on the server (bench/reclaim_speed.py, bench/expire_speed.py)."""
import threading
import time

import redis


class Probe:
    """Sends GET `key` back to back, one at a time, until stopped."""

    def __init__(self, port, key="probe"):
        self.port, self.key = port, key
        self.lat = []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self):
        c = redis.Redis(port=self.port)
        while not self.stop_flag.is_set():
            t0 = time.perf_counter()
            c.get(self.key)
            self.lat.append(time.perf_counter() - t0)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stop_flag.set()
        self.thread.join()

    def report(self, seconds):
        """Its rate over `seconds` and latency percentiles, as one line."""
        lat = sorted(self.lat)
        if not lat:
            return "probe: no request completed"

        def pct(q):
            return lat[min(len(lat) - 1, int(q * len(lat)))] * 1e6

        return (
            f"probe: {len(lat) / seconds:.0f} GETs/s; latency us p50 {pct(0.5):.0f} p99 {pct(0.99):.0f} "
            f"p99.9 {pct(0.999):.0f} max {lat[-1] * 1e6:.0f}"
        )
