"""Many threads on one object: calls on one handle run one at a time, so no
sequence of calls from any threads can crash the interpreter (two threads on
one Allocation used to corrupt the heap). A real turnserver on 127.0.0.75
(udp and tcp 3603, relay ports 59200-59299) serves the allocation."""

import threading
import unittest

import turnfleet

import tfhelpers as h

ADDR, PORT, RANGE = "127.0.0.75", 3603, (59200, 59299)
THREADS, ROUNDS = 8, 40


def hammer(target, errors, allowed=(turnfleet.Error,)):
    """Run @p target(i) in THREADS threads; unexpected exceptions land in @p errors."""
    barrier = threading.Barrier(THREADS)

    def run(i):
        barrier.wait()
        for k in range(ROUNDS):
            try:
                target(i, k)
            except allowed:
                pass
            except Exception as e:  # noqa: BLE001 - the test reports it
                errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class AllocationThreadsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.relay = h.Relay(ADDR, PORT, *RANGE, name="pythreads")
        cls.addClassCleanup(cls.relay.stop)

    def test_refresh_release_and_close_from_many_threads(self):
        for transport in ("udp", "tcp"):
            with self.subTest(transport=transport):
                a = turnfleet.allocate(self.relay.uri(transport), h.SECRET, timeout=h.PROBE_TIMEOUT)
                errors = []

                def use(i, k):
                    if i == 0 and k == ROUNDS - 1:
                        a.close()
                    elif i == 1 and k == ROUNDS // 2:
                        a.release()
                    elif k % 3 == 0:
                        a.refresh()
                    else:
                        addr, port = a.relayed
                        self.assertEqual(addr, ADDR)
                        a.lifetime
                        repr(a)

                # after release a refresh fails (a turnfleet.Error); after close every use is
                # InvalidArgument (a ValueError): neither may crash or be anything else
                hammer(use, errors)
                self.assertEqual(errors, [])
                self.assertTrue(a.closed)


class PureHandleThreadsTest(unittest.TestCase):
    POOL = "metadata: {name: t}\nspec:\n  auth: {realm: r, secretRef: {name: s}}\n"

    def test_pool_renamed_while_read(self):
        pool = turnfleet.Pool.from_yaml(self.POOL)
        errors = []

        def use(i, k):
            if i % 2:
                pool.name = f"t{i}-{k}"
            else:
                self.assertTrue(pool.name.startswith("t"))
                self.assertIn('"name"', pool.to_json())
                pool.validate()

        hammer(use, errors)
        self.assertEqual(errors, [])

    def test_fleet_grown_from_many_threads(self):
        fleet = turnfleet.Existing()
        errors = []

        def use(i, k):
            fleet.add(f"192.0.2.{i + 1}/{50000 + 100 * k}-{50000 + 100 * k + 9}", pool="other")
            len(fleet)

        hammer(use, errors)
        self.assertEqual(errors, [])
        self.assertEqual(len(fleet), THREADS * ROUNDS)

    def test_close_while_planning(self):
        nodes = turnfleet.Nodes.from_json(h.one_node("192.0.2.1"))
        errors = []

        def use(i, k):
            pool = turnfleet.Pool.from_yaml(self.POOL)
            if i == 0:
                nodes.close() if k == ROUNDS - 1 else None
            with turnfleet.plan(pool, nodes) as p:
                self.assertEqual(len(p.relays), 1)

        hammer(use, errors)
        self.assertEqual(errors, [])


if __name__ == "__main__":
    unittest.main()
