"""The CUDA driver calls of auto mode (ctypes into libcuda), below everything else in auto_mode/:
the binding, the graph switch and the staging all call it."""

from __future__ import annotations

import ctypes
import functools

from ..errors import DeviceError


def _cuda():
    from ..record.occupancy import _libcuda

    lib = _libcuda()
    if lib is None:
        raise DeviceError(
            "libcuda.so.1 (the NVIDIA driver's CUDA library) could not be loaded: auto mode "
            "needs a GPU and its driver; check that nvidia-smi lists the GPU and that "
            "libcuda.so.1 is on the loader's path (ldconfig -p | grep libcuda)"
        )
    return lib


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise DeviceError(
            f"{what} failed with CUDA error {rc}{_error_name(rc)}; check the GPU with "
            "nvidia-smi, and rerun with CUDA_LAUNCH_BLOCKING=1 to find the launch that failed"
        )


def _error_name(rc: int) -> str:
    """' (CUDA_ERROR_...)': the driver's name of error `rc`, or '' where it cannot say."""
    try:
        name = ctypes.c_char_p()
        if _cuda().cuGetErrorName(ctypes.c_int(rc), ctypes.byref(name)) == 0 and name.value:
            return f" ({name.value.decode()})"
    except (DeviceError, AttributeError, UnicodeDecodeError):
        pass
    return ""


def module_of(function: int) -> int:
    cuda = _cuda()
    mod = ctypes.c_void_p(0)
    _check(cuda.cuFuncGetModule(ctypes.byref(mod), ctypes.c_void_p(function)), "cuFuncGetModule")
    return mod.value or 0


@functools.cache
def _memcpy():
    """cuMemcpyDtoDAsync_v2 with its argument types, looked up once: a lookup costs more host
    time than the copy's own call, which counts in full on a step the host sets the pace of."""
    f = _cuda().cuMemcpyDtoDAsync_v2
    f.argtypes = (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p)
    f.restype = ctypes.c_int
    return f


def copy_device(dst: int, src: int, nbytes: int, stream: int) -> None:
    """An asynchronous device-to-device copy in `stream`'s order."""
    rc = _memcpy()(dst, src, nbytes, stream)
    if rc:
        _check(rc, "cuMemcpyDtoDAsync")


def _stream(device: int) -> int:
    """The device's current stream as a raw handle. torch's own raw getter where it has one:
    `torch.cuda.current_stream` builds a Stream object, ~15 us of host time a call."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


# -- on and off -------------------------------------------------------------------------------------
