"""The session fixture the compiler, plan and bundle tests share: plans run on the native executor, checked
against the Python one."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def check_native_executor():
    """Every plan these tests run goes through the native executor, and the first call of each native
    program is compared bit for bit with the Python executor (TORCH_WEBGPU_EXECUTOR=check), unless the
    run chose an executor itself."""
    chosen = os.environ.get("TORCH_WEBGPU_EXECUTOR")
    if chosen is None:
        os.environ["TORCH_WEBGPU_EXECUTOR"] = "check"
    yield
    if chosen is None:
        os.environ.pop("TORCH_WEBGPU_EXECUTOR", None)
