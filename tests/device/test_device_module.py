"""torch.webgpu, the generated methods, torch.accelerator, serialisation, printing, nn.Module.to."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import torch
from torch.testing import assert_close

import torch_webgpu


def test_device_module_api(webgpu):
    assert torch.webgpu.is_available() and torch.webgpu.device_count() == 1
    assert torch.webgpu.current_device() == 0
    torch.webgpu.set_device(0)
    torch.webgpu.set_device("webgpu:0")
    with pytest.raises(ValueError, match="one device"):
        torch.webgpu.set_device(1)
    with torch.webgpu.device(0):
        x = torch.ones(2, device="webgpu")
    torch.webgpu.synchronize()
    assert x.device == torch.device("webgpu:0")
    assert isinstance(torch.webgpu.get_device_name(), str) and torch.webgpu.get_device_name()
    props = torch.webgpu.get_device_properties()
    assert props.limits["max-storage-buffer-binding-size"] > 0
    torch.webgpu.manual_seed_all(11)
    assert torch.webgpu.initial_seed() == 11
    torch.webgpu.seed()
    assert torch.webgpu.is_initialized()


def test_accelerator_and_generated_methods(webgpu):
    assert torch.accelerator.current_accelerator().type == "webgpu"
    assert torch._C._get_privateuse1_backend_name() == "webgpu"
    x = torch.arange(3).webgpu()
    assert x.is_webgpu and not torch.arange(3).is_webgpu
    m = torch.nn.Linear(2, 2).webgpu()
    assert m.weight.is_webgpu
    assert torch.Generator(device="webgpu").device.type == "webgpu"


def test_printing_uses_one_host_copy(no_fallback):
    x = torch.tensor([[1.5, -2.0], [3.0, 4.0]], device="webgpu")
    text = repr(x)
    assert "device='webgpu:0'" in text and "1.5000" in text and "-2.0000" in text
    assert "dtype=torch.int8" in repr(torch.tensor([1, 2], dtype=torch.int8, device="webgpu"))
    assert "True" in str(torch.tensor([True, False], device="webgpu"))
    assert repr(torch.empty(0, device="webgpu")).startswith("tensor([]")


def test_save_and_load_state_dict(no_fallback):
    x = torch.arange(12, dtype=torch.float32, device="webgpu").view(3, 4)
    payload = {"x": x, "row": x[1], "ints": torch.tensor([1, 2], dtype=torch.int16, device="webgpu")}
    buf = io.BytesIO()
    torch.save(payload, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["x"].device.type == "webgpu"
    assert_close(loaded["x"].cpu(), torch.arange(12.0).view(3, 4))
    assert_close(loaded["row"].cpu(), torch.tensor([4.0, 5.0, 6.0, 7.0]))
    assert loaded["row"].untyped_storage().data_ptr() == loaded["x"].untyped_storage().data_ptr()
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert_close(on_cpu["ints"], torch.tensor([1, 2], dtype=torch.int16))


def test_module_to_webgpu_and_state_dict_roundtrip(webgpu):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    reference = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("webgpu")
    assert all(p.device.type == "webgpu" for p in model.parameters())
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    restored = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    restored.load_state_dict(torch.load(buf, map_location="cpu"))
    for key, value in restored.state_dict().items():
        assert_close(value, reference[key])


def test_import_without_torch_offers_the_runtime():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import torch_webgpu\n"
            "assert hasattr(torch_webgpu, 'runtime') and not hasattr(torch_webgpu, 'fallback_stats')\n"
            "assert 'torch_webgpu.device' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_fallback_stats_is_public(webgpu):
    torch_webgpu.reset_fallback_stats()
    assert torch_webgpu.fallback_stats() == {}


def test_pinned_host_memory(no_fallback):
    host = torch.arange(6.0).pin_memory()
    assert host.is_pinned() and not torch.arange(3.0).is_pinned()
    device = host.to("webgpu", non_blocking=True)
    assert_close(device.cpu(), torch.arange(6.0))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(8.0)), batch_size=4,
                                         pin_memory=True)
    batches = [batch.to("webgpu", non_blocking=True) for (batch,) in loader]
    assert_close(batches[1].cpu(), torch.tensor([4.0, 5.0, 6.0, 7.0]))
