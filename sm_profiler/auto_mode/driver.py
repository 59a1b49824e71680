"""The CUDA driver calls of auto mode (ctypes into libcuda), below everything else in auto_mode/:
the binding, the graph switch and the staging all call it."""

from __future__ import annotations

import ctypes
import functools

from ..errors import DeviceError


def libcuda():
    from ..record.occupancy import load_libcuda

    lib = load_libcuda()
    if lib is None:
        raise DeviceError(
            "libcuda.so.1 (the NVIDIA driver's CUDA library) could not be loaded: auto mode "
            "needs a GPU and its driver; check that nvidia-smi lists the GPU and that "
            "libcuda.so.1 is on the loader's path (ldconfig -p | grep libcuda)"
        )
    return lib


def check_rc(rc: int, what: str) -> None:
    if rc != 0:
        raise DeviceError(
            f"{what} failed with CUDA error {rc}{_error_name(rc)}; check the GPU with "
            "nvidia-smi, and rerun with CUDA_LAUNCH_BLOCKING=1 to find the launch that failed"
        )


def _error_name(rc: int) -> str:
    """' (CUDA_ERROR_...)': the driver's name of error `rc`, or '' where it cannot say."""
    try:
        name = ctypes.c_char_p()
        if libcuda().cuGetErrorName(ctypes.c_int(rc), ctypes.byref(name)) == 0 and name.value:
            return f" ({name.value.decode()})"
    except (DeviceError, AttributeError, UnicodeDecodeError):
        pass
    return ""


def module_of(function: int) -> int:
    cuda = libcuda()
    mod = ctypes.c_void_p(0)
    check_rc(cuda.cuFuncGetModule(ctypes.byref(mod), ctypes.c_void_p(function)), "cuFuncGetModule")
    return mod.value or 0


@functools.cache
def _memcpy():
    """cuMemcpyDtoDAsync_v2 with its argument types, looked up once: a lookup costs more host
    time than the copy's own call, which counts in full on a step the host sets the pace of."""
    f = libcuda().cuMemcpyDtoDAsync_v2
    f.argtypes = (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p)
    f.restype = ctypes.c_int
    return f


def copy_device(dst: int, src: int, nbytes: int, stream: int) -> None:
    """An asynchronous device-to-device copy in `stream`'s order."""
    rc = _memcpy()(dst, src, nbytes, stream)
    if rc:
        check_rc(rc, "cuMemcpyDtoDAsync")


def current_stream(device: int) -> int:
    """The device's current stream as a raw handle. torch's own raw getter where it has one:
    `torch.cuda.current_stream` builds a Stream object, ~15 us of host time a call."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


_NOT_READY = 600  # CUDA_ERROR_NOT_READY
_STREAM_CAPTURE_NONE = 0  # CU_STREAM_CAPTURE_STATUS_NONE


@functools.cache
def _event_calls():
    """cuEventRecord, cuEventQuery, cuStreamIsCapturing and cuEventElapsedTime with their
    argument types, looked up once (as _memcpy: the flight recorder calls them every step)."""
    cuda = libcuda()
    record, query, capturing = cuda.cuEventRecord, cuda.cuEventQuery, cuda.cuStreamIsCapturing
    elapsed = cuda.cuEventElapsedTime
    record.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    query.argtypes = (ctypes.c_void_p,)
    capturing.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))
    elapsed.argtypes = (ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p)
    for f in (record, query, capturing, elapsed):
        f.restype = ctypes.c_int
    return record, query, capturing, elapsed


def current_device() -> int:
    import torch

    return torch._C._cuda_getDevice()


def capturing(stream: int) -> bool:
    """Whether `stream` is being captured into a CUDA graph."""
    status = ctypes.c_int(0)
    check_rc(
        _event_calls()[2](ctypes.c_void_p(stream), ctypes.byref(status)), "cuStreamIsCapturing"
    )
    return status.value != _STREAM_CAPTURE_NONE


class TimingEvent:
    """A CUDA timing event made and recorded through the driver, with torch.cuda.Event's
    record() / query() / elapsed_time(other) (ms). torch's record() builds a Stream object for
    the current stream (`current_stream`): on an H200 the flight recorder's event a step cost
    35 us of host time that way, a step's +6 % on a 1 ms CUDA-graph step the host sets the pace
    of. Made in the current CUDA context (the program's); destroy() gives it back."""

    __slots__ = ("handle",)

    def __init__(self):
        handle = ctypes.c_void_p(0)
        check_rc(libcuda().cuEventCreate(ctypes.byref(handle), 0), "cuEventCreate")
        self.handle = handle

    def record(self, stream: int | None = None) -> None:
        if stream is None:
            stream = current_stream(current_device())
        rc = _event_calls()[0](self.handle, ctypes.c_void_p(stream))
        if rc:
            check_rc(rc, "cuEventRecord")

    def query(self) -> bool:
        rc = _event_calls()[1](self.handle)
        if rc == _NOT_READY:
            return False
        check_rc(rc, "cuEventQuery")
        return True

    def elapsed_time(self, end: TimingEvent) -> float:
        ms = ctypes.c_float(0.0)
        rc = _event_calls()[3](ctypes.byref(ms), self.handle, end.handle)
        check_rc(rc, "cuEventElapsedTime")
        return ms.value

    def destroy(self) -> None:
        if self.handle.value:
            libcuda().cuEventDestroy_v2(self.handle)
            self.handle = ctypes.c_void_p(0)


# -- on and off -------------------------------------------------------------------------------------


# -- the rescue's copy ------------------------------------------------------------------------------

_NON_BLOCKING = 0x1  # CU_STREAM_NON_BLOCKING: no implicit order with the legacy default stream
_NO_TIMING = 0x2  # CU_EVENT_DISABLE_TIMING
_NOT_READY = 600  # CUDA_ERROR_NOT_READY


class HostCopier:
    """Copies of one device buffer, a chunk at a time, into pinned host memory on a stream of
    its own (the rescue's read, rescue.py). Made with the buffer, while nothing is stuck: at the
    signal it creates nothing, allocates nothing, takes no lock of PyTorch's and waits on
    nothing else of the device; each driver function is looked up now too (ctypes releases the
    GIL in each call)."""

    _NAMES = (
        "cuCtxGetCurrent",
        "cuCtxSetCurrent",
        "cuStreamCreate",
        "cuStreamDestroy_v2",
        "cuEventCreate",
        "cuEventDestroy_v2",
        "cuEventRecord",
        "cuEventQuery",
        "cuMemHostAlloc",
        "cuMemFreeHost",
        "cuMemcpyDtoHAsync_v2",
    )

    def __init__(self, address: int, chunk_bytes: int):
        import numpy as np

        cuda = libcuda()
        self._f = {name: getattr(cuda, name) for name in self._NAMES}
        self._f["cuMemcpyDtoHAsync_v2"].argtypes = (
            ctypes.c_void_p,
            ctypes.c_uint64,
            ctypes.c_size_t,
            ctypes.c_void_p,
        )
        self.address = address
        self.ctx, self.stream, self.event, self.host = (ctypes.c_void_p(0) for _ in range(4))
        try:
            self._call("cuCtxGetCurrent", ctypes.byref(self.ctx))
            self._call("cuStreamCreate", ctypes.byref(self.stream), _NON_BLOCKING)
            self._call("cuEventCreate", ctypes.byref(self.event), _NO_TIMING)
            self._call("cuMemHostAlloc", ctypes.byref(self.host), ctypes.c_size_t(chunk_bytes), 0)
        except RuntimeError:
            self.close()
            raise
        pinned = (ctypes.c_uint8 * chunk_bytes).from_address(self.host.value)
        self.chunk = np.ctypeslib.as_array(pinned)

    def _call(self, name: str, *args) -> int:
        rc = self._f[name](*args)
        if rc not in (0, _NOT_READY):
            check_rc(rc, name)
        return rc

    def bind(self) -> None:
        """The buffer's context, current in the calling thread."""
        self._call("cuCtxSetCurrent", self.ctx)

    def copy(self, offset: int, nbytes: int) -> None:
        """Queue the copy of the buffer's bytes [offset, offset + nbytes) into `chunk`."""
        self._call("cuMemcpyDtoHAsync_v2", self.host, self.address + offset, nbytes, self.stream)
        self._call("cuEventRecord", self.event, self.stream)

    def done(self) -> bool:
        """Whether the copy queued last has arrived in `chunk` (never waits)."""
        return self._call("cuEventQuery", self.event) == 0

    def close(self) -> None:
        """Free what __init__ made (freeing pinned memory waits for the device: not at the
        signal, when the region ends)."""
        for name, handle in (
            ("cuMemFreeHost", self.host),
            ("cuEventDestroy_v2", self.event),
            ("cuStreamDestroy_v2", self.stream),
        ):
            if handle.value:
                self._f[name](handle)
                handle.value = None
        self.chunk = None
