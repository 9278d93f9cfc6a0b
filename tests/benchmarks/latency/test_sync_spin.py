"""benchmarks/latency/sync_spin (`python -m benchmarks latency sync-spin`)."""


def test_sync_spin_rows_per_setting():
    """The sync-spin mode times each spin setting of each case it is asked for (tiny MLP here)."""
    from benchmarks.latency import sync_spin

    rows = sync_spin.run([0, 500], rounds=2, reps=2, bundles=None, only="^MLP$")
    assert [(r["case"], r["backend"], r["spin_us"]) for r in rows] == [("MLP", "webgpu-eager", 0),
                                                                       ("MLP", "webgpu-eager", 500)]
    assert all(len(r["rounds"]) == 2 and r["ms_per_call"] > 0 for r in rows)
