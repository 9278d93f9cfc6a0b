"""benchmarks/anatomy/matmul (`python -m benchmarks anatomy matmul`)."""


def test_matmul_anatomy_times_each_part():
    """The matmul anatomy's cut-down copies of a tiled f32 kernel all compile and run (lavapipe has no
    subgroup matrices: the tensor-core variant is reported as not offered)."""
    from benchmarks.anatomy import matmul as matmul_anatomy

    rows = matmul_anatomy.run(128, f16="sgmat.w2x2.f4x4.k32",
                              f32="tile64x64.r4x4.k16.l4.v4,tile128x128.r8x8.k8.l4.pl.v4", reps=1)
    parts = ["full", "no staging", "no staging or barriers", "no multiplies", "global loads only",
             "tile stores only"]
    for variant in ("tile64x64.r4x4.k16.l4.v4", "tile128x128.r8x8.k8.l4.pl.v4"):   # plain and pipelined
        f32 = [r for r in rows if r["dtype"] == "f32" and r["variant"] == variant]
        assert sorted(r["part"] for r in f32) == sorted(parts)
        assert all(r["us"] > 0 and "error" not in r for r in f32)
