"""benchmarks/library/matmul (`python -m benchmarks library matmul`)."""


def test_matmul_library_top_times_the_first_variants_of_each_case():
    """The matmul family's `top` (the harness's LIBRARY_TOP): only the first N variants of each case in the
    library's order are checked and timed."""
    import torch_webgpu  # noqa: F401
    from benchmarks.library import matmul as matmul_library
    from torch_webgpu.kernels import DeviceCaps
    from torch_webgpu.kernels.matmul import Layout, MatmulProblem, variants
    from torch_webgpu.runtime import get_runtime

    # the CI-sized cases (smoke: the first two variants of each), cut to one by `top`
    rows = matmul_library.figures(smoke=True, reps=1, dtypes=("f32",), verbose=False, cases="^64", top=1)
    timed = [r["variant"] for r in rows if "tflops" in r and r["variant"] != "torch-cuda"]
    caps = DeviceCaps.from_runtime(get_runtime())
    square = Layout(0, 0, 64, 1)
    p = MatmulProblem(1, 64, 64, 64, square, square, square, dtype="f32")
    assert timed == variants(p, caps)[:1]
