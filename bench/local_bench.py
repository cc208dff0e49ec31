"""Embedded-model costs, as ratios against baselines measured in the same run.

1. Preparing the model: ``prepare_model`` (join and hash in one pass, fsync, atomic rename) against
   the two-pass baseline (copy the parts into one file, fsync, then read it again to hash it).
2. A later ``prepare_model`` (size + mtime marker) against re-hashing the cached file.
3. Time to a ready server: ``LocalModelServer.start`` (child process, /health polling) against
   loading the same model with ``xllamacpp.Server`` in this process.

Run: ``python bench/local_bench.py [--reps 5]`` (needs the ``local`` extra; about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio
import xllamacpp

from forge_rt.backends.local import (
    DEFAULT_MODEL,
    MODELS,
    LocalModelServer,
    locate_parts,
    prepare_model,
)


def _median_s(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _paired_medians(
    a: Callable[[], object], b: Callable[[], object], reps: int
) -> tuple[float, float]:
    """Medians of ``a`` and ``b`` run alternately, so load changes on a shared box hit both."""
    times_a, times_b = [], []
    for _ in range(reps):
        times_a.append(_median_s(a, 1))
        times_b.append(_median_s(b, 1))
    return statistics.median(times_a), statistics.median(times_b)


def _two_pass_join(target: Path) -> str:
    with target.open("wb") as out:
        for part in locate_parts(DEFAULT_MODEL):
            with part.open("rb") as src:
                shutil.copyfileobj(src, out, 4 * 1024 * 1024)
        out.flush()
        os.fsync(out.fileno())  # same durability as prepare_model
    return _hash_file(target)


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _fresh(fn: Callable[[Path], object]) -> Callable[[], object]:
    def run() -> object:
        with tempfile.TemporaryDirectory(prefix="forge-rt-bench-") as d:
            return fn(Path(d))

    return run


def _in_process_load(model_path: Path) -> None:
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = 4096
    params.n_parallel = 1
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    server = xllamacpp.Server(params)
    # Same guard as _serve: xllamacpp's destructor has been seen to hang; abort instead of waiting.
    faulthandler.dump_traceback_later(30, exit=True)
    del server
    faulthandler.cancel_dump_traceback_later()


async def _child_start(cache: Path, log_dir: Path) -> None:
    async with LocalModelServer.start(DEFAULT_MODEL, n_ctx=4096, cache_dir=cache, log_dir=log_dir):
        pass


def main() -> None:
    """Measure and print each figure with its baseline and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    reps = parser.parse_args().reps
    size_mb = MODELS[DEFAULT_MODEL].size / 1e6
    _fresh(lambda d: _two_pass_join(d / "warm.gguf"))()  # bring the parts into the page cache

    one_pass, two_pass = _paired_medians(
        _fresh(lambda d: prepare_model(DEFAULT_MODEL, d)),
        _fresh(lambda d: _two_pass_join(d / "m.gguf")),
        reps,
    )
    print(
        f"join {size_mb:.0f} MB: one pass (hash while writing, fsync) {one_pass:.2f} s, "
        f"two-pass baseline (copy, then hash) {two_pass:.2f} s, ratio {one_pass / two_pass:.2f}"
    )

    with tempfile.TemporaryDirectory(prefix="forge-rt-bench-") as d:
        cache = Path(d)
        path = prepare_model(DEFAULT_MODEL, cache)
        marker, rehash = _paired_medians(
            lambda: prepare_model(DEFAULT_MODEL, cache), lambda: _hash_file(path), reps
        )
        print(
            f"later prepare: marker check {marker * 1e3:.2f} ms, re-hash baseline {rehash:.2f} s, "
            f"ratio {marker / rehash:.5f}"
        )

        with tempfile.TemporaryDirectory(prefix="forge-rt-bench-logs-") as logs:
            child, in_process = _paired_medians(
                lambda: trio.run(_child_start, cache, Path(logs)),
                lambda: _in_process_load(path),
                reps,
            )
        print(
            f"ready server: child process + /health {child:.2f} s (start and stop), "
            f"in-process load baseline {in_process:.2f} s, ratio {child / in_process:.2f}"
        )


if __name__ == "__main__":
    main()
