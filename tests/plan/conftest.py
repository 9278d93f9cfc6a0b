"""Plan runtime fixtures: the plans under test come from torch.compile and export, so these tests share
the compiler tests' environment (a private compile cache, no CPU fallback, the real runtime, tuning on
demand), and every plan runs on the native executor checked against the Python one."""

from tests.compiler.conftest import _compiler_env, rt, tuning_here  # noqa: F401  (fixtures)
from tests.executor_check import check_native_executor  # noqa: F401  (autouse fixture)
