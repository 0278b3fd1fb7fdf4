"""bench pool without a cluster: its in-process figures and its arguments."""

from __future__ import annotations

import argparse

from omnivox.bench import pool


def test_pool_in_process_figures_for_a_small_queue():
    r = pool.in_process(20, 5)
    assert set(r) == {"enqueue_us", "dispatch_us", "snapshot_ms", "bytes_per_ticket"}
    assert r["enqueue_us"] > 0 and r["dispatch_us"] > 0 and r["snapshot_ms"] >= 0
    assert r["bytes_per_ticket"] > 0  # queued tickets take memory


def test_pool_defaults():
    parser = argparse.ArgumentParser()
    pool.add_arguments(parser)
    args = parser.parse_args(["--sizes", "1", "10"])
    assert args.sizes == [1, 10] and args.wire_sizes == [1, 100, 1000, 10000] and args.repeats == 20


def test_pool_in_process_of_an_empty_queue_or_no_repeats_reports_nan_not_a_crash():
    import math

    empty = pool.in_process(0, 3)  # --sizes 0: the dispatch of a queue holding nothing
    assert math.isnan(empty["enqueue_us"]) and math.isnan(empty["bytes_per_ticket"])
    none = pool.in_process(3, 0)  # --repeats 0: nothing timed
    assert math.isnan(none["dispatch_us"]) and math.isnan(none["snapshot_ms"])
    assert none["bytes_per_ticket"] > 0


def test_pool_stores_and_throughput_defaults():
    parser = argparse.ArgumentParser()
    pool.add_arguments(parser)
    args = parser.parse_args([])
    assert args.store == ["memory"] and args.sizes == [1, 100, 1000, 10000]
    assert (args.clients, args.workers, args.seconds) == (16, 4, 10.0)
