"""Which GPU an engine process renders on: the EGL device whose CUDA id is the slot's GPU.

EGL does not enumerate devices in CUDA order (FACTS: engine), so a slot bound to GPU ``g``
(``CUDA_VISIBLE_DEVICES=g`` and ``WMFORGE_GPU=g`` from the node runner) finds the EGL device
with ``EGL_CUDA_DEVICE_NV == g`` and tells Panda3D to open it (``egl-device-index``). After the
graphics context is open the worker checks what it got (:func:`check_device`): a GPU slot that
ends up on a software renderer, on another GPU, or on a device it did not ask for fails with an
error naming both — never silently device 0.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import asdict, dataclass

EGL_CUDA_DEVICE_NV = 0x323A
EGL_EXTENSIONS = 0x3055
SOFTWARE_RENDERERS = ("llvmpipe", "softpipe", "swrast", "software", "lavapipe")


class DeviceBindingError(RuntimeError):
    """The slot's GPU cannot be opened, or the context opened on another device."""


@dataclass(frozen=True)
class SlotDevice:
    """What the node runner asked of this process (from its environment)."""

    gpu: int | None  # physical GPU id (NVML / CUDA PCI order); None: a CPU slot
    uuid: str = ""
    name: str = ""  # NVML name, e.g. "NVIDIA H200"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> SlotDevice:
        env = dict(os.environ if env is None else env)
        g = env.get("WMFORGE_GPU", "")
        return cls(int(g) if g.strip() else None, env.get("WMFORGE_GPU_UUID", ""),
                   env.get("WMFORGE_GPU_NAME", ""))


def egl_index_for_gpu(gpu: int, egl_cuda_ids: list[int | None],
                      cuda_visible: list[int] | None = None) -> int:
    """Index of the EGL device that is physical GPU ``gpu``.

    ``egl_cuda_ids[i]`` is EGL device i's EGL_CUDA_DEVICE_NV (None for devices without one, such
    as Mesa's software device). Drivers that honour ``CUDA_VISIBLE_DEVICES`` report a device's
    position in that list and nothing for the hidden ones; others report every device's own id.
    Which view this is shows in the count of readable ids."""
    readable = [c for c in egl_cuda_ids if c is not None]
    if cuda_visible and gpu in cuda_visible and len(readable) == len(cuda_visible):
        return egl_index_for_cuda(cuda_visible.index(gpu), egl_cuda_ids)
    return egl_index_for_cuda(gpu, egl_cuda_ids)


def egl_index_for_cuda(cuda_id: int, egl_cuda_ids: list[int | None]) -> int:
    """Index of the EGL device whose CUDA id is ``cuda_id``."""
    hits = [i for i, c in enumerate(egl_cuda_ids) if c == cuda_id]
    if not hits:
        raise DeviceBindingError(
            f"GPU {cuda_id}: no EGL device reports EGL_CUDA_DEVICE_NV={cuda_id} (EGL devices' "
            f"CUDA ids: {egl_cuda_ids}); is the NVIDIA EGL driver installed "
            "(libEGL_nvidia, 10_nvidia.json)?")
    if len(hits) > 1:
        raise DeviceBindingError(f"GPU {cuda_id}: EGL devices {hits} all report that CUDA id")
    return hits[0]


def egl_devices() -> list[int | None]:
    """EGL_CUDA_DEVICE_NV of every EGL device (EGL_EXT_device_enumeration), None where a device
    has no CUDA id. Empty when libEGL or the extension is missing."""
    try:
        egl = ctypes.CDLL("libEGL.so.1")
    except OSError:
        return []
    gpa = egl.eglGetProcAddress
    gpa.restype = ctypes.c_void_p
    gpa.argtypes = [ctypes.c_char_p]
    q_devs = gpa(b"eglQueryDevicesEXT")
    q_attr = gpa(b"eglQueryDeviceAttribEXT")
    q_str = gpa(b"eglQueryDeviceStringEXT")
    if not q_devs:
        return []
    query_devices = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_int,
                                     ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.POINTER(ctypes.c_int))(q_devs)
    n = ctypes.c_int(0)
    if not query_devices(0, None, ctypes.byref(n)) or n.value <= 0:
        return []
    devs = (ctypes.c_void_p * n.value)()
    if not query_devices(n.value, devs, ctypes.byref(n)):
        return []
    out: list[int | None] = []
    for i in range(n.value):
        cuda: int | None = None
        if q_attr and q_str:
            query_string = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p,
                                            ctypes.c_int)(q_str)
            ext = (query_string(devs[i], EGL_EXTENSIONS) or b"").decode(errors="replace")
            if "EGL_NV_device_cuda" in ext:
                query_attr = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_ssize_t))(q_attr)
                val = ctypes.c_ssize_t(-1)
                if query_attr(devs[i], EGL_CUDA_DEVICE_NV, ctypes.byref(val)):
                    cuda = int(val.value)
        out.append(cuda)
    return out


def bind_display(dev: SlotDevice, egl_cuda_ids: list[int | None] | None = None) -> int:
    """Point Panda3D's headless EGL pipe at the slot's GPU before any graphics object exists.
    Returns the EGL device index chosen (-1: EGL's default device, for a CPU slot)."""
    if dev.gpu is None:
        return -1
    ids = egl_devices() if egl_cuda_ids is None else egl_cuda_ids
    vis = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    visible = [int(v) for v in vis.split(",") if v.strip().isdigit()]
    idx = egl_index_for_gpu(dev.gpu, ids, visible)
    from panda3d.core import loadPrcFileData

    loadPrcFileData("wmforge-device", f"egl-device-index {idx}")
    return idx


GL_NUM_DEVICE_UUIDS_EXT = 0x9596
GL_DEVICE_UUID_EXT = 0x9597


def gl_device_uuid() -> str | None:
    """UUID of the device behind the current GL context (GL_EXT_memory_object), in NVML's
    ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` form; None without a current context or the
    extension. This is what tells two GPUs of the same model apart."""
    try:
        egl = ctypes.CDLL("libEGL.so.1")
    except OSError:
        return None
    egl.eglGetCurrentContext.restype = ctypes.c_void_p
    if not egl.eglGetCurrentContext():
        return None
    gpa = egl.eglGetProcAddress
    gpa.restype = ctypes.c_void_p
    gpa.argtypes = [ctypes.c_char_p]
    p_int, p_uuid = gpa(b"glGetIntegerv"), gpa(b"glGetUnsignedBytei_vEXT")
    if not p_int or not p_uuid:
        return None
    get_int = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.POINTER(ctypes.c_int))(p_int)
    n = ctypes.c_int(0)
    get_int(GL_NUM_DEVICE_UUIDS_EXT, ctypes.byref(n))
    if n.value < 1:
        return None
    buf = (ctypes.c_ubyte * 16)()
    ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.c_uint,
                     ctypes.POINTER(ctypes.c_ubyte))(p_uuid)(GL_DEVICE_UUID_EXT, 0, buf)
    h = bytes(buf).hex()
    if h == "0" * 32:
        return None
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def check_device(dev: SlotDevice, egl_index: int, renderer: str, vendor: str,
                 nvml_gpu_of_pid: int | None = None, gl_uuid: str | None = None) -> dict:
    """Fail unless the opened context is the one asked for; return the record for the log.

    ``renderer``/``vendor`` are the GL strings of the context; ``gl_uuid`` the UUID of its
    device (GL_EXT_memory_object), compared with the slot's NVML UUID; ``nvml_gpu_of_pid`` the
    GPU on which NVML lists this process (None where NVML lists none, as in containers)."""
    rec = {"requested": asdict(dev), "egl_device_index": egl_index, "gl_renderer": renderer,
           "gl_vendor": vendor, "gl_device_uuid": gl_uuid, "nvml_gpu_of_pid": nvml_gpu_of_pid}
    low = renderer.lower()
    if dev.gpu is None:
        return rec
    if any(s in low for s in SOFTWARE_RENDERERS) or "nvidia" not in (low + vendor.lower()):
        raise DeviceBindingError(
            f"slot bound to GPU {dev.gpu} ({dev.name or '?'}) opened {renderer!r} from "
            f"{vendor!r} on EGL device {egl_index}: not the NVIDIA GPU asked for")
    model = dev.name.replace("NVIDIA", "").strip()
    if model and model.split()[0].lower() not in low:
        raise DeviceBindingError(f"slot bound to GPU {dev.gpu} ({dev.name}) opened "
                                 f"{renderer!r}: another device")
    if gl_uuid and dev.uuid and gl_uuid.lower() != dev.uuid.lower():
        raise DeviceBindingError(f"slot bound to GPU {dev.gpu} ({dev.uuid}) opened a context on "
                                 f"device {gl_uuid}")
    if nvml_gpu_of_pid is not None and nvml_gpu_of_pid != dev.gpu:
        raise DeviceBindingError(f"slot bound to GPU {dev.gpu}: NVML lists this process on "
                                 f"GPU {nvml_gpu_of_pid}")
    return rec


def check_compute_device(dev: SlotDevice, torch_device: str, name: str,
                         uuid: str | None) -> dict:
    """The compute backend's counterpart of :func:`check_device` (no GL context is opened):
    fail unless torch's device is the slot's GPU — CUDA for a GPU slot, its model in the
    name, its UUID the slot's where both are known; return the record for the log."""
    rec = {"requested": asdict(dev), "backend": "compute", "torch_device": torch_device,
           "cuda_name": name, "cuda_uuid": uuid}
    if dev.gpu is None:
        return rec
    if not torch_device.startswith("cuda"):
        raise DeviceBindingError(f"slot bound to GPU {dev.gpu} ({dev.name or '?'}) but the "
                                 f"compute backend runs on {torch_device!r}: torch sees no "
                                 "CUDA device (CUDA_VISIBLE_DEVICES, driver?)")
    model = dev.name.replace("NVIDIA", "").strip()
    if model and model.split()[0].lower() not in name.lower():
        raise DeviceBindingError(f"slot bound to GPU {dev.gpu} ({dev.name}) but torch's CUDA "
                                 f"device is {name!r}: another device")
    if uuid and dev.uuid and uuid.lower() != dev.uuid.lower():
        raise DeviceBindingError(f"slot bound to GPU {dev.gpu} ({dev.uuid}) but torch's CUDA "
                                 f"device is {uuid}")
    return rec


def nvml_gpu_of_pid(pid: int | None = None) -> int | None:
    """The GPU on which NVML lists ``pid`` as a graphics or compute process, if any."""
    pid = os.getpid() if pid is None else pid
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: nothing to say
        return None
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            procs = []
            for fn in ("nvmlDeviceGetGraphicsRunningProcesses",
                       "nvmlDeviceGetComputeRunningProcesses"):
                try:
                    procs += list(getattr(pynvml, fn)(h))
                except Exception:  # noqa: BLE001, S112 - not supported in this container
                    continue
            if any(int(p.pid) == pid for p in procs):
                return i
        return None
    finally:
        pynvml.nvmlShutdown()
