"""The Vulkan physical devices this process sees, in Vulkan enumeration order — the order of
Unreal's ``-graphicsadapter`` — with each device's UUID (VkPhysicalDeviceIDProperties), read
through the Vulkan loader with ctypes. Standard library only; empty when there is no loader or
no ICD. On NVIDIA the deviceUUID is the GPU's UUID as NVML reports it ("GPU-…")."""

from __future__ import annotations

import ctypes
import ctypes.util
from ctypes import POINTER, byref, c_char, c_char_p, c_int, c_uint8, c_uint32, c_void_p

APPLICATION_INFO, INSTANCE_CREATE_INFO = 0, 1
PHYSICAL_DEVICE_PROPERTIES_2 = 1000059001
PHYSICAL_DEVICE_ID_PROPERTIES = 1000071004
API_1_1 = (1 << 22) | (1 << 12)
DEVICE_TYPES = {0: "OTHER", 1: "INTEGRATED_GPU", 2: "DISCRETE_GPU", 3: "VIRTUAL_GPU", 4: "CPU"}


class _AppInfo(ctypes.Structure):
    _fields_ = [("sType", c_int), ("pNext", c_void_p), ("pApplicationName", c_char_p),
                ("applicationVersion", c_uint32), ("pEngineName", c_char_p),
                ("engineVersion", c_uint32), ("apiVersion", c_uint32)]


class _InstanceInfo(ctypes.Structure):
    _fields_ = [("sType", c_int), ("pNext", c_void_p), ("flags", c_uint32),
                ("pApplicationInfo", POINTER(_AppInfo)), ("enabledLayerCount", c_uint32),
                ("ppEnabledLayerNames", c_void_p), ("enabledExtensionCount", c_uint32),
                ("ppEnabledExtensionNames", c_void_p)]


class _IdProps(ctypes.Structure):
    _fields_ = [("sType", c_int), ("pNext", c_void_p), ("deviceUUID", c_uint8 * 16),
                ("driverUUID", c_uint8 * 16), ("deviceLUID", c_uint8 * 8),
                ("deviceNodeMask", c_uint32), ("deviceLUIDValid", c_uint32)]


class _Props2(ctypes.Structure):
    # VkPhysicalDeviceProperties2 { sType, pNext, VkPhysicalDeviceProperties }: the fields
    # before the limits, then room for the limits and sparse properties
    _fields_ = [("sType", c_int), ("pNext", c_void_p), ("apiVersion", c_uint32),
                ("driverVersion", c_uint32), ("vendorID", c_uint32), ("deviceID", c_uint32),
                ("deviceType", c_int), ("deviceName", c_char * 256),
                ("pipelineCacheUUID", c_uint8 * 16), ("rest", c_uint8 * 2048)]


def format_uuid(b: bytes) -> str:
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def enumerate_devices(lib: str | None = None) -> list[dict]:
    """[{index, deviceName, deviceType, vendorID, deviceUUID}] or [] without Vulkan."""
    name = lib or ctypes.util.find_library("vulkan") or "libvulkan.so.1"
    try:
        vk = ctypes.CDLL(name)
    except OSError:
        return []
    vk.vkCreateInstance.argtypes = [POINTER(_InstanceInfo), c_void_p, POINTER(c_void_p)]
    vk.vkEnumeratePhysicalDevices.argtypes = [c_void_p, POINTER(c_uint32), POINTER(c_void_p)]
    vk.vkGetInstanceProcAddr.argtypes = [c_void_p, c_char_p]
    vk.vkGetInstanceProcAddr.restype = c_void_p
    vk.vkDestroyInstance.argtypes = [c_void_p, c_void_p]
    app = _AppInfo(APPLICATION_INFO, None, b"wmforge", 1, b"wmforge", 1, API_1_1)
    info = _InstanceInfo(INSTANCE_CREATE_INFO, None, 0, ctypes.pointer(app), 0, None, 0, None)
    inst = c_void_p()
    if vk.vkCreateInstance(byref(info), None, byref(inst)) != 0:
        return []
    try:
        n = c_uint32(0)
        if vk.vkEnumeratePhysicalDevices(inst, byref(n), None) != 0 or n.value == 0:
            return []
        devs = (c_void_p * n.value)()
        if vk.vkEnumeratePhysicalDevices(inst, byref(n), devs) not in (0, 5):  # 5: incomplete
            return []
        addr = vk.vkGetInstanceProcAddr(inst, b"vkGetPhysicalDeviceProperties2")
        if not addr:
            return []
        get_props = ctypes.CFUNCTYPE(None, c_void_p, POINTER(_Props2))(addr)
        out = []
        for i in range(n.value):
            ids = _IdProps(PHYSICAL_DEVICE_ID_PROPERTIES, None)
            props = _Props2(PHYSICAL_DEVICE_PROPERTIES_2, ctypes.cast(byref(ids), c_void_p))
            get_props(devs[i], byref(props))
            out.append({"index": i, "deviceName": props.deviceName.decode(errors="replace"),
                        "deviceType": DEVICE_TYPES.get(props.deviceType, str(props.deviceType)),
                        "vendorID": f"{props.vendorID:#06x}",
                        "deviceUUID": format_uuid(bytes(ids.deviceUUID))})
        return out
    finally:
        vk.vkDestroyInstance(inst, None)


if __name__ == "__main__":
    import json

    print(json.dumps(enumerate_devices(), indent=1))
