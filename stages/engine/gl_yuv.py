"""The GL backend's frames leave the GPU as the encoders' yuv420p planes (``render.yuv``,
issue #30 item 2, the GL half of what ``compute/yuv.py`` does for the compute backend).

One more pass after the resolve: a buffer of RGBA8 texels whose bytes, read in order (GL's
rows bottom-up, as ``glReadPixels`` packs them), are each view's Y, U and V planes in turn and
then the preview's (the labelled 3 x 2 grid of ``media.video.tile_preview``, tiled here too).
Each fragment writes four consecutive bytes of that stream: it finds the picture, plane and
pixel of each, reads the resolve strip's 8-bit sRGB (``texelFetch``) and converts as
``compute.yuv.rgb_to_yuv420`` does — BT.601 limited range, each horizontal pair of chroma
averaged, then a [1, 3, 3, 1] / 8 vertical filter with the edge rows repeated — which is
swscale's rgb24 → yuv420p within ±1 (``tests/engine/test_gl_yuv.py``). The read-back then
carries 1.5 bytes a pixel instead of 4, and the encoding thread gets planes with nothing to
convert; the CPU is left with x264 (and no preview tiling).

``RenderTargets(yuv=True)`` needs ``render.readback: pbo`` (``gl_readback`` reads this
buffer instead of the colour strip). While metering (``set_meter``), the pass is switched off
and the colour strip is read as before: the meter wants its log-luminance codes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from ..media.video import Yuv420, label_bitmap

MAX_TEXELS_WIDE = 4096  # the packed buffer's width; its height follows from the byte count

YUV_FRAG = """#version 330
uniform sampler2D strip;    // the resolve's five views side by side, RGBA8, rows bottom-up
uniform sampler2D labels;   // the preview's label bitmaps side by side, RGB8, rows bottom-up
uniform ivec2 view_size;    // one view's width, height (even)
uniform ivec3 label_box[5]; // each view's label: x in the labels texture, width, height
uniform int label_rows;     // the labels texture's height
uniform int tex_width;      // this buffer's width in texels (4 bytes each)
out vec4 color;

const vec3 KY = vec3(65.481, 128.553, 24.966);
const vec3 KU = vec3(-37.797, -74.203, 112.0);
const vec3 KV = vec3(112.0, -93.786, -18.214);

vec3 view_rgb(int v, int x, int y) {  // view v's 8-bit codes at (x, y), rows top-down
    vec3 c = texelFetch(strip, ivec2(v * view_size.x + x, view_size.y - 1 - y), 0).rgb;
    return floor(c * 255.0 + 0.5);
}

vec3 pic_rgb(int pic, int x, int y) {  // picture 0-4: a view; 5: the preview
    if (pic < 5) return view_rgb(pic, x, y);
    int hh = view_size.y / 4 * 2, hw = view_size.x / 4 * 2;
    int r = y / hh, c = x / hw;
    int i = r * 3 + c;
    if (i >= 5) return vec3(0.0);  // the sixth cell stays dark
    int lx = x - c * hw, ly = y - r * hh;
    ivec3 lb = label_box[i];
    if (lx < lb.y && ly < lb.z) {
        return floor(texelFetch(labels, ivec2(lb.x + lx, label_rows - 1 - ly), 0).rgb * 255.0
                     + 0.5);
    }
    vec3 s = view_rgb(i, 2 * lx, 2 * ly) + view_rgb(i, 2 * lx + 1, 2 * ly)
           + view_rgb(i, 2 * lx, 2 * ly + 1) + view_rgb(i, 2 * lx + 1, 2 * ly + 1);
    return floor((s + 2.0) / 4.0);  // Pillow's reduce(2): (sum + 2) >> 2
}

float full_chroma(vec3 c, vec3 k) { return 128.0 + (k.x * c.r + k.y * c.g + k.z * c.b) / 255.0; }

float pair(int pic, int cx, int row, vec3 k) {
    return (full_chroma(pic_rgb(pic, 2 * cx, row), k)
            + full_chroma(pic_rgb(pic, 2 * cx + 1, row), k)) * 0.5;
}

float as_byte(float x) { return clamp(floor(x + 0.5), 0.0, 255.0); }

float byte_at(int i) {
    int w = view_size.x, h = view_size.y;
    int per_view = w * h * 3 / 2;
    int pic = i / per_view, o = i - pic * per_view;
    int pw = w, ph = h;
    if (pic >= 5) {
        pic = 5;
        o = i - 5 * per_view;
        pw = 3 * (w / 4 * 2);
        ph = 2 * (h / 4 * 2);
        if (o >= pw * ph * 3 / 2) return 0.0;  // padding after the last plane
    }
    if (o < pw * ph) {
        vec3 c = pic_rgb(pic, o % pw, o / pw);
        return as_byte(16.0 + (KY.x * c.r + KY.y * c.g + KY.z * c.b) / 255.0);
    }
    o -= pw * ph;
    int cw = pw / 2, ch = ph / 2;
    int plane = o / (cw * ch);
    int q = o - plane * cw * ch;
    int cx = q % cw, cy = q / cw;
    vec3 k = plane == 0 ? KU : KV;
    float top = pair(pic, cx, max(2 * cy - 1, 0), k);
    float c0 = pair(pic, cx, 2 * cy, k);
    float c1 = pair(pic, cx, 2 * cy + 1, k);
    float bot = pair(pic, cx, min(2 * cy + 2, ph - 1), k);
    return as_byte((top + 3.0 * c0 + 3.0 * c1 + bot) * 0.125);
}

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    int base = (p.y * tex_width + p.x) * 4;
    color = vec4(byte_at(base), byte_at(base + 1), byte_at(base + 2), byte_at(base + 3))
          / 255.0;
}
"""


def preview_size(width: int, height: int) -> tuple[int, int]:
    """The preview's (width, height) for views of ``width`` x ``height``, as
    ``media.video.tile_preview`` makes it."""
    return 3 * (width // 2 // 2 * 2), 2 * (height // 2 // 2 * 2)


def stream_bytes(width: int, height: int) -> int:
    """Bytes of the five views' planes and then the preview's."""
    pw, ph = preview_size(width, height)
    return len(VIEWS) * width * height * 3 // 2 + pw * ph * 3 // 2


def buffer_size(width: int, height: int) -> tuple[int, int]:
    """The packed buffer's (width, height) in RGBA8 texels."""
    texels = -(-stream_bytes(width, height) // 4)
    tw = min(MAX_TEXELS_WIDE, texels)
    return tw, -(-texels // tw)


def unpack(flat: np.ndarray, width: int, height: int, with_preview: bool = True
           ) -> dict[str, Yuv420]:
    """The views' (and the preview's) :class:`~stages.media.video.Yuv420` pictures from the
    read-back bytes (views into ``flat``, no copy)."""
    flat = flat.reshape(-1)
    need = stream_bytes(width, height)
    if flat.size < need:
        raise ValueError(f"render.yuv: read back {flat.size} bytes; the planes of "
                         f"{width}x{height} views and their preview need {need}")
    pics = [(v, width, height) for v in VIEWS]
    if with_preview:
        pics.append(("preview", *preview_size(width, height)))
    out: dict[str, Yuv420] = {}
    at = 0
    for name, w, h in pics:
        ys, cs = w * h, (w // 2) * (h // 2)
        out[name] = Yuv420(flat[at:at + ys].reshape(h, w),
                           flat[at + ys:at + ys + cs].reshape(h // 2, w // 2),
                           flat[at + ys + cs:at + ys + 2 * cs].reshape(h // 2, w // 2))
        at += ys + 2 * cs
    return out


class YuvPass:
    """The packed-planes buffer of one :class:`~stages.engine.render_targets.RenderTargets`
    (see the module docstring): drawn after the resolve, from its strip texture."""

    SORT = 15  # after the resolve buffer (10)

    def __init__(self, targets: Any):
        from panda3d.core import (
            Camera,
            CardMaker,
            FrameBufferProperties,
            GraphicsPipe,
            NodePath,
            OrthographicLens,
            PTA_LVecBase3i,
            Shader,
            Texture,
            WindowProperties,
        )

        from .pbr_shaders import RESOLVE_VERT

        t = targets
        if t.W % 2 or t.H % 2:
            raise ValueError(f"render.yuv: {t.W}x{t.H} has an odd side; yuv420p needs even "
                             "sizes")
        self.W, self.H = t.W, t.H
        self.size = buffer_size(t.W, t.H)
        p = FrameBufferProperties()
        p.setRgbColor(True)
        p.setRgbaBits(8, 8, 8, 8)
        p.setDepthBits(0)
        self.buf = t.engine.makeOutput(t.pipe, "yuv", self.SORT, p,
                                       WindowProperties.size(*self.size),
                                       GraphicsPipe.BF_refuse_window, t.gsg, t.atlas)
        if self.buf is None:
            raise RuntimeError(f"render.yuv: could not create a {self.size[0]}x{self.size[1]} "
                               "RGBA8 offscreen buffer")
        self.tex = Texture("yuv")
        self.buf.addRenderTexture(self.tex, self.buf.RTM_bind_or_copy, self.buf.RTP_color)
        self.buf.setClearColorActive(False)
        root = NodePath("yuv")
        lens = OrthographicLens()
        lens.setFilmSize(1, 1)
        lens.setFilmOffset(0.5, 0.5)
        lens.setNearFar(-10, 10)
        cam = root.attachNewNode(Camera("yuv_cam", lens))
        cam.setP(-90)
        dr = self.buf.makeDisplayRegion()
        dr.setCamera(cam)
        cm = CardMaker("yuv_card")
        cm.setFrame(0, 1, 0, 1)
        card = root.attachNewNode(cm.generate())
        card.setP(-90)
        card.setShader(Shader.make(Shader.SL_GLSL, RESOLVE_VERT, YUV_FRAG))
        card.setShaderInput("strip", t.out_tex)
        labels, boxes = self._labels()
        card.setShaderInput("labels", labels)
        pta = PTA_LVecBase3i.emptyArray(len(VIEWS))
        for i, box in enumerate(boxes):
            pta[i] = box
        card.setShaderInput("label_box", pta)
        card.setShaderInput("label_rows", int(labels.getYSize()))
        card.setShaderInput("view_size", (t.W, t.H))
        card.setShaderInput("tex_width", int(self.size[0]))
        self.root, self.card = root, card

    def _labels(self) -> tuple[Any, list[tuple[int, int, int]]]:
        """One RGB8 texture of the views' label bitmaps side by side (each cropped to its
        preview cell, as ``tile_preview`` crops it) and each one's (x, width, height)."""
        from panda3d.core import SamplerState, Texture

        hh, hw = self.H // 2 // 2 * 2, self.W // 2 // 2 * 2
        bitmaps = [label_bitmap(v, max(10, hh // 12)) for v in VIEWS]
        bitmaps = [b[:hh, :hw] for b in bitmaps]
        rows = max(1, max(b.shape[0] for b in bitmaps))
        sheet = np.zeros((rows, max(1, sum(b.shape[1] for b in bitmaps)), 3), np.uint8)
        boxes, x = [], 0
        for b in bitmaps:
            sheet[:b.shape[0], x:x + b.shape[1]] = b
            boxes.append((x, b.shape[1], b.shape[0]))
            x += b.shape[1]
        tex = Texture("yuv_labels")
        tex.setup2dTexture(sheet.shape[1], sheet.shape[0], Texture.T_unsigned_byte,
                           Texture.F_rgb8)
        # Panda3D keeps RAM images bottom-up and in BGR order
        tex.setRamImage(np.ascontiguousarray(sheet[::-1, :, ::-1]).tobytes())
        tex.setMinfilter(SamplerState.FT_nearest)
        tex.setMagfilter(SamplerState.FT_nearest)
        return tex, boxes

    def set_active(self, on: bool) -> None:
        self.buf.setActive(bool(on))

    def unpack(self, rgba: np.ndarray, with_preview: bool) -> dict[str, Yuv420]:
        return unpack(rgba, self.W, self.H, with_preview)


__all__ = ["YUV_FRAG", "YuvPass", "buffer_size", "preview_size", "stream_bytes", "unpack"]
