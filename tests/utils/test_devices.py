"""The hardware behind precision="auto": bfloat16 from the CPU's flags."""

import pytest
import torch

from torch_wge.utils import devices
from torch_wge.utils.devices import auto_matmul_dtype, cpu_flags, has_native_bf16

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu sse2 avx2 {extra} avx512f
bogomips\t: 4792.79

processor\t: 1
flags\t\t: fpu sse2 avx2 avx512f
"""


@pytest.mark.parametrize(
    "extra, native",
    [("avx512_bf16", True), ("amx_bf16 amx_tile", True), ("avx512_vnni", False), ("avx512_bf16x", False)],
)
def test_bf16_is_read_from_the_first_cpus_flags(extra, native, tmp_path, monkeypatch):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO.format(extra=extra))
    assert ("avx512f" in cpu_flags(str(path))) and (extra.split()[0] in cpu_flags(str(path)))
    monkeypatch.setattr(devices, "cpu_flags", lambda: cpu_flags(str(path)))
    assert has_native_bf16("cpu") is native
    assert auto_matmul_dtype(torch.device("cpu")) == (torch.bfloat16 if native else None)


def test_an_unreadable_cpuinfo_assumes_nothing(tmp_path):
    assert cpu_flags(str(tmp_path / "absent")) == frozenset()
    (tmp_path / "no-flags").write_text("processor\t: 0\n")
    assert cpu_flags(str(tmp_path / "no-flags")) == frozenset()


def test_other_devices_are_not_native(monkeypatch):
    monkeypatch.setattr(devices, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert not has_native_bf16("meta")
    if not torch.cuda.is_available():
        assert not has_native_bf16("cuda")


def test_auto_keeps_a_float64_model_in_float64(monkeypatch):
    monkeypatch.setattr(devices, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert auto_matmul_dtype("cpu", torch.float32) == torch.bfloat16
    assert auto_matmul_dtype("cpu", torch.float64) is None
