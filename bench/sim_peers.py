#!/usr/bin/env python3
"""Peers for the simulator benchmark: the same single-queue FIFO workload (Poisson arrivals,
c workers, deterministic or exponential service) in Ciw and in SimPy. Prints one JSON line per
peer with the simulated requests per second (wall clock) and the p99 response time, so that the
shell script can compare them with tailscope side by side.

Usage: sim_peers.py --peer ciw|simpy --service det|exp --workers C --load RHO --requests N --seed S
"""
import argparse
import json
import random
import time


def run_ciw(service, workers, load, n, seed):
    import ciw

    mean = 1.0  # service mean; time unit = one mean service time
    lam = load * workers / mean
    svc = ciw.dists.Deterministic(value=mean) if service == "det" else ciw.dists.Exponential(rate=1.0 / mean)
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=lam)],
        service_distributions=[svc],
        number_of_servers=[workers],
    )
    ciw.seed(seed)
    q = ciw.Simulation(net)
    t0 = time.perf_counter()
    q.simulate_until_max_customers(n, method="Finish")
    dt = time.perf_counter() - t0
    recs = q.get_all_records()
    resp = sorted(r.exit_date - r.arrival_date for r in recs)
    return len(recs), dt, resp


def run_simpy(service, workers, load, n, seed):
    import simpy

    rng = random.Random(seed)
    mean = 1.0
    lam = load * workers / mean
    env = simpy.Environment()
    res = simpy.Resource(env, capacity=workers)
    resp = []

    def customer(env):
        t = env.now
        with res.request() as req:
            yield req
            yield env.timeout(mean if service == "det" else rng.expovariate(1.0 / mean))
        resp.append(env.now - t)

    def source(env):
        for _ in range(n):
            yield env.timeout(rng.expovariate(lam))
            env.process(customer(env))

    env.process(source(env))
    t0 = time.perf_counter()
    env.run()
    dt = time.perf_counter() - t0
    resp.sort()
    return len(resp), dt, resp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", choices=["ciw", "simpy"], required=True)
    ap.add_argument("--service", choices=["det", "exp"], required=True)
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--load", type=float, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    fn = run_ciw if a.peer == "ciw" else run_simpy
    done, dt, resp = fn(a.service, a.workers, a.load, a.requests, a.seed)
    p99 = resp[int(0.99 * (len(resp) - 1))] if resp else float("nan")
    print(json.dumps({"peer": a.peer, "requests": done, "seconds": dt,
                      "requests_per_s": done / dt if dt > 0 else None,
                      "p99_in_service_times": p99}))


if __name__ == "__main__":
    main()
