"""Rooms: what a workshop room costs the database — the instructor's view (polled every 3 s) of a
full room, an attendee's answer, a run summary — on SQLite and, when ``--postgres-url`` is
given, on PostgreSQL, measured side by side in one run. Writes BENCHMARKS.md's "Rooms" section.

    python bench/bench_rooms.py [--attendees 50] [--repeats 30] [--postgres-url URL] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from benchmarks_md import write_section  # noqa: E402

from lab.lessons import QUESTIONS  # noqa: E402
from lab.teach import RoomSettings, RoomStore, RunSummary  # noqa: E402


def _ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(url: str, attendees: int, repeats: int) -> dict[str, float]:
    store = RoomStore.open(RoomSettings(database_url=url, room_ttl_s=3600.0))
    keys = store.open_room()
    members = [store.join(keys.code, f"seat {i}") for i in range(attendees)]
    run = RunSummary(workload="matmul_add", m=256, k=256, n=256, dtype="float32", device="cpu", tflops=0.05,
                     intensity_flops_per_byte=42.0)
    t0 = time.perf_counter()
    for m in members:  # every attendee answers every question and shares one run
        for q in QUESTIONS:
            store.record_answer(keys.code, m.member_key, q.key, q.choices[0])
        store.record_run(keys.code, m.member_key, run)
    writes = attendees * (len(QUESTIONS) + 1)
    write_ms = (time.perf_counter() - t0) * 1e3 / writes
    view = store.view(keys.code, keys.instructor_key)
    assert view.joined == attendees and len(view.runs) == attendees
    return {"view_ms": _ms(lambda: store.view(keys.code, keys.instructor_key), repeats), "write_ms": write_ms,
            "writes": float(writes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attendees", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--postgres-url", default="")
    parser.add_argument("--quick", action="store_true", help="5 attendees, 3 repeats, no BENCHMARKS.md")
    args = parser.parse_args()
    attendees, repeats = (5, 3) if args.quick else (args.attendees, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        rows = {"SQLite": measure(f"sqlite:///{tmp}/rooms.sqlite3", attendees, repeats)}
        if args.postgres_url:
            rows["PostgreSQL"] = measure(args.postgres_url, attendees, repeats)
    lines = ["## Rooms", "",
             f"A room of {attendees} attendees, each answering all {len(QUESTIONS)} questions and sharing one run "
             f"(`python bench/bench_rooms.py --attendees {attendees}`), on this 2-core box, both databases in "
             "one run. The instructor's view is polled every 3 s (ui/room.py LIVE_EVERY_S).", "",
             "| database | instructor's view of the full room, median ms | one answer or run summary, mean ms |",
             "| --- | --- | --- |"]
    lines += [f"| {name} | {r['view_ms']:.1f} | {r['write_ms']:.1f} |" for name, r in rows.items()]
    print("\n".join(lines))
    if not args.quick:
        write_section("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
