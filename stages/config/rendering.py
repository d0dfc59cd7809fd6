"""What the engine makes: Stage I trajectories and Stage II renders (config groups ``engine``,
``trajectories``, ``render``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.cameras import CameraRigConfig
from ..core.stage1_config import ActionConfig, SpawnConfig
from ..engine.render_settings import MAX_TEXTURE_PX, MAX_TRIANGLES


@dataclass
class EngineConfig:
    # which adapter: "embedded" (Panda3D + Bullet) or "unreal"
    name: str = "embedded"
    # Panda3D display module for offscreen rendering (p3headlessgl = EGL; p3tinydisplay = software)
    display: str = "p3headlessgl"
    # simulation rate, frames per second (fixed step)
    fps: int = 30


@dataclass
class TrajectoriesConfig:
    # trajectories per enabled level
    per_level: int = 2
    # frames per trajectory (production preset: 1800 = 60 s at 30 fps)
    frames: int = 300
    # characters to sample from: inventory character ids, or empty for every usable one
    characters: list[str] = field(default_factory=list)
    # cast occlusion rays for the external cameras (off only for benchmarking)
    camera_rays: bool = True
    # only these level ids (empty: every enabled level)
    levels: list[str] = field(default_factory=list)
    actions: ActionConfig = field(default_factory=ActionConfig)
    spawn: SpawnConfig = field(default_factory=SpawnConfig)
    cameras: CameraRigConfig = field(default_factory=CameraRigConfig)


@dataclass
class RenderLimitsConfig:
    # the most triangles a level may draw (its loaded scene, every instance counted). A level
    # over it is not screened (screen reason over_limit, from the inventory's count) and fails
    # Stage II as scene_over_limit naming both numbers (a glTF before it is loaded). 5 M: the
    # sample levels hold thousands and a 4 M-triangle level renders (GL, llvmpipe: 59 s, 6.7 GB
    # peak RSS for 3 frames; bench_render_limits.py), but loading costs ~1.7 KB of RAM a
    # triangle at its peak (panda3d-gltf's conversion: 3.4 GB for 2 M, 1.5 GB kept), so 5 M
    # (~8.5 GB) is about one slot's share of the H200 host (125 GiB, 16 slots); the compute
    # backend keeps ~192 B a triangle more on the host and again on the device
    max_triangles: int = MAX_TRIANGLES
    # the longest texture side, px, rendered at full size (both backends); a longer texture is
    # halved at load (its own mip chain, box-filtered) until it fits, and meta.json's
    # level.textures_downscaled says which, from what size to what. 8192: 8k textures render
    # at full size (256 MiB a texture as RGBA8); the GL driver's own maximum (16384 on Mesa,
    # 32768 on NVIDIA) caps it where lower
    max_texture_px: int = MAX_TEXTURE_PX


RESOLUTION_PRESETS = {"540p": (960, 540), "720p": (1280, 720), "1080p": (1920, 1080)}


@dataclass
class RenderConfig:
    # resolution preset: 540p (screening), 720p, 1080p
    preset: str = "720p"
    # explicit size in px overriding the preset (0 = use the preset); even numbers
    width: int = 0
    height: int = 0
    # anti-aliasing as Movie Render Queue does it: sub-pixel jittered spatial samples x
    # sub-frame temporal samples, accumulated in linear light into each output frame
    spatial_samples: int = 8
    temporal_samples: int = 1
    # fraction of the frame interval the temporal samples span (0.5 = a 180-degree shutter)
    shutter: float = 0.5
    # frames rendered and discarded after the level loads (texture residency, caches)
    warmup_frames: int = 8
    # H.264 (libx264) settings, pinned so the same inputs give the same bytes
    x264_preset: str = "veryfast"
    crf: int = 20
    encoder_threads: int = 2
    # x264 MB-tree: smaller files, but no byte-identical re-runs (see EncodeSettings.mbtree)
    x264_mbtree: bool = False
    # keyframe interval, s (closed GOP: seeking decodes at most this much)
    gop_s: float = 1.0
    # write the tiled five-view preview MP4 (never scored)
    preview: bool = True
    # the preview is for eyes only (never scored): a faster x264 preset and more threads so its
    # 1.5x-a-view picture never becomes the stream that holds the renderer back
    preview_x264_preset: str = "ultrafast"
    preview_encoder_threads: int = 4
    # frames queued between renderer and encoder (bounds memory)
    queue_depth: int = 4
    # alignment gate: mask resolution divisor, hit radius in mask px, minimum aligned share
    mask_scale: int = 2
    align_radius_px: int = 3
    align_min: float = 0.95
    # node id in instance ids (node id + timestamp + sequence number)
    node_id: str = "local"
    # kill a renderer process running longer than this, s (0 = no limit)
    instance_timeout_s: float = 0.0
    # the look (stages/engine/pbr.py): sun shadow map size (px per side) and the half-width of
    # the area around the character it covers (m; refitted every frame)
    shadow_map_size: int = 2048
    shadow_extent_m: float = 25.0
    # shadow-map taps per output pixel (1, 2, 4 or 8; each a hardware 2x2 comparison), spread
    # over the pixel's samples: softness (at 8 samples every value costs one tap a sample)
    shadow_pcf_taps: int = 4
    # automatic exposure: metered on the first meter_frames frames of each trajectory, bringing
    # the geometric mean luminance to exposure_key (0 frames = fixed exposure); the level's
    # exposure_compensation (overrides.yaml, EV) multiplies it
    meter_frames: int = 3
    exposure_key: float = 0.1
    # tone map applied to linear light before the sRGB encode: aces (filmic) or none (clamp)
    tone_map: str = "aces"
    # strength of the sky's image-based light (diffuse and specular)
    ibl_strength: float = 0.6
    # deferred: the rasterizer writes a G-buffer and a compute pass lights it (the same look;
    # an H100/H200 runs pixel shaders on few units, compute on all; needs OpenGL 4.3);
    # forward: the whole look in the fragment shader (the reference; OpenGL 3.3); auto:
    # deferred on a GPU with compute shaders, forward on a software rasterizer (llvmpipe)
    shading: str = "auto"
    # Stage II's renderer on the embedded engine: gl (Panda3D's OpenGL path, the reference);
    # compute (stages/engine/compute: rasterizer, G-buffer, lighting and resolve in torch, on
    # CUDA where torch sees a GPU, else on the CPU; docs/compute-renderer.md); auto: compute
    # on a GPU slot whose renderers an NVIDIA MPS daemon serves, gl elsewhere and whenever
    # ground-truth layers are asked for (measured: stages/engine/compute/backend.py), resolved
    # by the node per slot before the render key is made. Unreal ignores it (gl only)
    backend: str = "gl"
    # how the GL backend's frames reach RAM: pbo (pixel-pack buffers and fences, collected up
    # to two frames later, the fence polled with sleeps: no spin in the driver) or sync
    # (Panda3D's glReadPixels at each frame's end: the render thread waits for the GPU there,
    # spinning on NVIDIA). The same bytes either way, so not part of the render key. pbo by
    # default: byte-identical, and on the 2-core CPU box (llvmpipe) no slower at 320x180 x1,
    # x2x2 and x4, faster at 960x540 (docs/gl-readback.md). Compute and Unreal ignore it
    readback: str = "pbo"
    # the compute backend's shading rate: pixel (material and lighting once per pixel and
    # triangle, visibility per sample, as MSAA does: at 720p x 8 about one fragment in 7 is
    # shaded) or sample (every sample shaded, as the GL path does). pixel by default: at 8
    # samples it keeps 41.7-50.8 dB against GL per view where sample keeps 45.3-51.7
    # (320x180, AlpineMeadow; stages/engine/compute/merged.py). GL and Unreal ignore it
    compute_shading: str = "pixel"
    # how the compute backend shades its surface leaders (the material and lighting of one
    # sample per pixel and triangle) on a GPU: auto (the Triton kernel wherever it can run,
    # as leaders_triton.AUTO_TAKES_KERNEL says, by measurement; the CPU always takes the
    # graph), triton (one Triton kernel, or the render fails where it cannot run or
    # compile), torch (the graph), or triton:<registers> (ptxas held to that many
    # registers a lane, 64 to 255: a tuning knob). On a lent H100 at 720p x 8 the kernel took
    # a frame's device time from 18.4 to 11.4 ms; against the graph its stored codes are the
    # same on the sample levels but for one-step channels (docs/compute-renderer.md), so a
    # choice other than auto is part of the render key. meta.json's compute_leaders records
    # the path that ran. GL and Unreal ignore it
    compute_leaders: str = "auto"
    # where each view's RGB becomes the encoders' yuv420p: device (on the renderer's GPU: the
    # GL backend's gl_yuv pass, which needs readback pbo, or the compute backend's
    # compute/yuv.py; the CPU's encoding threads then run x264 alone and no preview is tiled
    # on the CPU), encoder (swscale inside each encoding thread) or auto (device on a GPU,
    # encoder on a software rasterizer or the CPU). Within 1 code of each other: part of the
    # render key; meta.json's yuv records the one used. Unreal ignores it
    yuv: str = "auto"
    # the node's torch.compile cache for the compute backend (relative: under the project's
    # base; stages/engine/compute/compile_cache.py): kept across runs and restarts, and the
    # node's renderers of one configuration compile their graphs once, one renderer at a time
    # (the others wait and load them). Not part of the render key (the same bytes either way);
    # TORCHINDUCTOR_CACHE_DIR, where set, wins; empty: neither (torch's own default under /tmp,
    # every renderer compiling for itself). GL and Unreal ignore it
    compile_cache_dir: str = ".cache/wmforge/torch_compile"
    # ground-truth layers written beside each view's MP4 (docs/ground-truth.md): any of depth,
    # normals, ids, mask, flow_fwd, flow_bwd; [] = off. Default off: on the 2-core CPU box at
    # 540p x 1 even the cheapest layer (mask) ran at 36-77 % of RGB-only five-view frames/s
    # (two runs), every layer at 13 %, below the 80 % the issue asks (docs/ground-truth.md)
    ground_truth: list[str] = field(default_factory=list)
    # what Stage II renders at most (triangles, texture size); see RenderLimitsConfig
    limits: RenderLimitsConfig = field(default_factory=RenderLimitsConfig)

    def size(self) -> tuple[int, int]:
        if self.width and self.height:
            return self.width, self.height
        return RESOLUTION_PRESETS[self.preset]
