"""The few OpenGL and EGL entry points of the PBO read-back, bound with ctypes.

GL functions are resolved through ``eglGetProcAddress``, the loader Panda3D's ``p3headlessgl``
uses for its own GL functions, so each call goes to the driver of the context Panda3D made
current (libglvnd dispatches by context: Mesa on a CPU machine, NVIDIA on a GPU one). ctypes
rather than PyOpenGL: a dozen functions need no new dependency nor PyOpenGL's process-wide
platform choice (``PYOPENGL_PLATFORM``), each call releases the GIL (the encoder threads run
meanwhile) and no ``glGetError`` round trip follows every call.
"""

from __future__ import annotations

import ctypes
from ctypes import c_char_p, c_int, c_ssize_t, c_uint, c_uint64, c_void_p
from typing import Any

GL_NO_ERROR = 0
GL_UNSIGNED_BYTE = 0x1401
GL_RED = 0x1903
GL_RGBA = 0x1908
GL_PACK_ALIGNMENT = 0x0D05
GL_READ_BUFFER = 0x0C02
GL_COLOR_ATTACHMENT0 = 0x8CE0
GL_READ_FRAMEBUFFER_BINDING = 0x8CAA
GL_PIXEL_PACK_BUFFER = 0x88EB
GL_PIXEL_PACK_BUFFER_BINDING = 0x88ED
GL_STREAM_READ = 0x88E1
GL_MAP_READ_BIT = 0x0001
GL_SYNC_GPU_COMMANDS_COMPLETE = 0x9117
GL_SYNC_FLUSH_COMMANDS_BIT = 0x0001
GL_ALREADY_SIGNALED = 0x911A
GL_TIMEOUT_EXPIRED = 0x911B
GL_CONDITION_SATISFIED = 0x911C
GL_WAIT_FAILED = 0x911D

# name: (result, argument types); GL 3.2 core (map buffer range 3.0, sync objects 3.2)
_GL = {
    "glGetError": (c_uint, ()),
    "glGetIntegerv": (None, (c_uint, ctypes.POINTER(c_int))),
    "glPixelStorei": (None, (c_uint, c_int)),
    "glReadBuffer": (None, (c_uint,)),
    "glReadPixels": (None, (c_int, c_int, c_int, c_int, c_uint, c_uint, c_void_p)),
    "glGenBuffers": (None, (c_int, ctypes.POINTER(c_uint))),
    "glDeleteBuffers": (None, (c_int, ctypes.POINTER(c_uint))),
    "glBindBuffer": (None, (c_uint, c_uint)),
    "glBufferData": (None, (c_uint, c_ssize_t, c_void_p, c_uint)),
    "glMapBufferRange": (c_void_p, (c_uint, c_ssize_t, c_ssize_t, c_uint)),
    "glUnmapBuffer": (ctypes.c_ubyte, (c_uint,)),
    "glFenceSync": (c_void_p, (c_uint, c_uint)),
    "glClientWaitSync": (c_uint, (c_void_p, c_uint, c_uint64)),
    "glDeleteSync": (None, (c_void_p,)),
    "glFlush": (None, ()),
}


class GLCalls:
    """The GL functions above plus EGL's current-context calls (``libEGL.so.1``)."""

    def __init__(self, egl_library: str = "libEGL.so.1"):
        try:
            egl = ctypes.CDLL(egl_library)
        except OSError as exc:
            raise RuntimeError(f"render.readback=pbo: cannot load {egl_library} ({exc}); the "
                               "PBO read-back needs the EGL display p3headlessgl uses") from None
        get = egl.eglGetProcAddress
        get.restype, get.argtypes = c_void_p, [c_char_p]
        for name, (res, args) in _GL.items():
            addr = get(name.encode())
            if not addr:
                raise RuntimeError(f"render.readback=pbo: eglGetProcAddress has no {name} "
                                   "(needs OpenGL 3.2: pixel-pack buffers and sync objects)")
            setattr(self, name, ctypes.CFUNCTYPE(res, *args)(addr))
        for name, res, args in (("eglGetCurrentContext", c_void_p, ()),
                                ("eglGetCurrentDisplay", c_void_p, ()),
                                ("eglGetCurrentSurface", c_void_p, (c_int,)),
                                ("eglMakeCurrent", c_uint,
                                 (c_void_p, c_void_p, c_void_p, c_void_p))):
            fn = getattr(egl, name)
            fn.restype, fn.argtypes = res, list(args)
            setattr(self, name, fn)

    def __getattr__(self, name: str) -> Any:  # for type checkers: the functions set above
        raise AttributeError(name)

    def integer(self, pname: int) -> int:
        v = c_int(0)
        self.glGetIntegerv(pname, ctypes.byref(v))
        return int(v.value)

    def gen_buffers(self, n: int) -> list[int]:
        ids = (c_uint * n)()
        self.glGenBuffers(n, ids)
        return [int(x) for x in ids]

    def delete_buffers(self, ids: list[int]) -> None:
        arr = (c_uint * len(ids))(*ids)
        self.glDeleteBuffers(len(ids), arr)


EGL_DRAW, EGL_READ = 0x3059, 0x305A


class CurrentContext:
    """The EGL display, surfaces and context current at construction (inside a Panda3D draw
    callback), made current again by :meth:`ensure` when another one is (or none is)."""

    def __init__(self, gl: GLCalls):
        self.gl = gl
        self.display = gl.eglGetCurrentDisplay()
        self.draw = gl.eglGetCurrentSurface(EGL_DRAW)
        self.read = gl.eglGetCurrentSurface(EGL_READ)
        self.context = gl.eglGetCurrentContext()
        if not self.context:
            raise RuntimeError("render.readback=pbo: no EGL context is current in the draw "
                               "callback (is the display p3headlessgl?)")

    def ensure(self) -> None:
        if self.gl.eglGetCurrentContext() != self.context and not self.gl.eglMakeCurrent(
                self.display, self.draw, self.read, self.context):
            raise RuntimeError("render.readback=pbo: eglMakeCurrent failed for the renderer's "
                               "GL context")

