"""Stage II ground-truth passes in the editor: Movie Render Queue jobs that write scene depth,
world normals and object ids as lossless EXR, one un-jittered sample per pixel, per camera and
frame (issue 33; the host turns them into the layer contract: stages/engine/unreal_layers.py).

Why separate jobs, one camera each, with one spatial and one temporal sample:
- MRQ jitters every sample unless a job has exactly one spatial and one temporal sample
  (MoviePipeline.cpp: ``bAllowSpatialJitter = !(NumSpatialSamples == 1 &&
  NumTemporalSamples == 1)``), and its accumulator averages every sample — post-process
  materials and the object-id coverage included. Depth and ids must never be averaged, so the
  layers cannot ride in the RGB job, whose samples are the anti-aliasing.
- The Object ID pass (``MoviePipelineObjectIdRenderPass``, plugin "Movie Render Queue
  Additional Render Passes", editor only: it reads the hit proxies) renders the sequence's
  camera-cut camera only; it has no per-camera loop as the deferred pass has for
  *render all cameras*. One job per camera gives every view its ids.

What each job writes (``FILE_NAME_FORMAT``; single-layer EXR, ZIP = lossless):
- depth: a post-process material (domain PostProcess, after tonemapping) whose emissive is
  SceneTexture:SceneDepth — the linear depth along the view axis in cm, in R — written 32-bit
  (``high_precision_output``): ``<camera>/FinalImageWmfDepth.<frame>.exr``;
- normals: the same with SceneTexture:WorldNormal (GBuffer, world axes of Unreal, -1..1, not
  normalised), 32-bit: ``<camera>/FinalImageWmfNormal.<frame>.exr``;
- ids: the Object ID pass grouped by actor label (``ACTOR``): Cryptomatte layers, rank 0 id in
  R of ``<camera>/ActorHitProxyMask00.<frame>.exr`` (float bits of MurmurHash3_32 of the label),
  the label→hash manifest in the EXR header (``cryptomatte/<key>/manifest``).
The deferred pass also writes its main image (``FinalImage``), which the host ignores: the
post-process materials are rendered only with the main pass on.

The materials are made here by script (MaterialEditingLibrary), not shipped as .uasset, so
what they output is stated in this file. Flow is not rendered: the host computes it from the
depth and the recorded cameras (see unreal_layers.py for why not Unreal's velocity buffer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import unreal

FILE_NAME_FORMAT = "{camera_name}/{render_pass}.{frame_number}"
MATERIAL_PACKAGE = "/Game/Wmforge/Materials"
CHARACTER_LABEL = "wmforge_character"  # the character actor's label: its object-id name
# MRQ output of each rendered buffer: post-process material name (its {render_pass} is
# "FinalImage" + name) or the Object ID pass's first cryptomatte layer
POST_PROCESS = {"depth": "WmfDepth", "normals": "WmfNormal"}
RENDER_PASS = {"depth": "FinalImageWmfDepth", "normals": "FinalImageWmfNormal",
               "ids": "ActorHitProxyMask00"}
# the rendered buffers each contract layer is made from (flow: depth for the geometry, ids
# to leave the character, whose skinned motion the host does not know, out of it)
NEEDS = {"depth": ("depth",), "normals": ("normals", "depth"), "ids": ("ids",),
         "mask": ("ids",), "flow_fwd": ("depth", "ids"), "flow_bwd": ("depth", "ids")}


def buffers_for(layers: list[str]) -> tuple[str, ...]:
    """The buffers (depth, normals, ids) the layers need, in a fixed order."""
    want = {b for layer in layers for b in NEEDS[layer]}
    return tuple(b for b in ("depth", "normals", "ids") if b in want)


def _scene_texture(name: str) -> unreal.SceneTextureId:
    return {"depth": unreal.SceneTextureId.PPI_SCENE_DEPTH,
            "normals": unreal.SceneTextureId.PPI_WORLD_NORMAL}[name]


def post_process_material(buffer: str, log: Any) -> unreal.Material:
    """The post-process material that outputs ``buffer`` (depth or normals) unchanged as its
    emissive colour; made anew each run (one left by a crashed run is deleted first)."""
    name = POST_PROCESS[buffer]
    path = f"{MATERIAL_PACKAGE}/{name}"
    lib = unreal.EditorAssetLibrary
    if lib.does_asset_exist(path) and not lib.delete_asset(path):
        raise RuntimeError(f"{path}: a material left by an earlier run could not be deleted")
    made = unreal.AssetToolsHelpers.get_asset_tools().create_asset(
        name, MATERIAL_PACKAGE, unreal.Material.static_class(), unreal.MaterialFactoryNew())
    if not isinstance(made, unreal.Material):
        raise RuntimeError(f"{path}: create_asset did not make a Material ({made!r})")
    made.set_editor_property("material_domain", unreal.MaterialDomain.MD_POST_PROCESS)
    made.blendable_location = unreal.BlendableLocation.BL_SCENE_COLOR_AFTER_TONEMAPPING
    mel = unreal.MaterialEditingLibrary
    tex = mel.create_material_expression(made, unreal.MaterialExpressionSceneTexture.static_class())
    if not isinstance(tex, unreal.MaterialExpressionSceneTexture):
        raise RuntimeError(f"{path}: no SceneTexture expression made")
    tex.set_editor_property("scene_texture_id", _scene_texture(buffer))
    tex.set_editor_property("filtered", False)  # point-sampled: one texel per pixel
    if not mel.connect_material_property(tex, "Color", unreal.MaterialProperty.MP_EMISSIVE_COLOR):
        raise RuntimeError(f"{path}: SceneTexture could not be connected to the emissive colour")
    mel.recompile_material(made)
    if not lib.save_loaded_asset(made):
        raise RuntimeError(f"{path}: could not be saved (MRQ loads it by path)")
    log(f"wmforge: stage2: post-process material {path} outputs {buffer}")
    return made


def materials(buffers: tuple[str, ...], log: Any) -> dict[str, unreal.Material]:
    """The post-process materials of the depth and normal buffers among ``buffers``; fails with
    the plugin's name when ids are wanted and the Object ID pass is not loaded."""
    if "ids" in buffers and not hasattr(unreal, "MoviePipelineObjectIdRenderPass"):
        raise RuntimeError("ground truth ids need the Object ID pass: enable the plugin "
                           "'Movie Render Queue Additional Render Passes' "
                           "(MoviePipelineMaskRenderPass) in the project")
    return {b: post_process_material(b, log) for b in buffers if b in POST_PROCESS}


def set_output(cfg: unreal.MoviePipelinePrimaryConfig, out_dir: Path, file_name_format: str,
               width: int, height: int, fps: int) -> unreal.MoviePipelineOutputSetting:
    """MRQ's output setting as both Stage II jobs (RGB and ground truth) use it: our folder,
    names and size, the trajectory's frame rate, frames zero-padded to 6, existing files
    overwritten (a retry) and flushed per shot."""
    out = cfg.find_or_add_setting_by_class(unreal.MoviePipelineOutputSetting)
    out.output_directory = unreal.DirectoryPath(str(out_dir))
    out.file_name_format = file_name_format
    out.output_resolution = unreal.IntPoint(width, height)
    out.zero_pad_frame_numbers = 6
    out.use_custom_frame_rate = True
    out.output_frame_rate = unreal.FrameRate(fps, 1)
    out.override_existing_output = True
    out.flush_disk_writes_per_shot = True
    return out


def configure_job(job: unreal.MoviePipelineExecutorJob, width: int, height: int, fps: int,
                  out_dir: Path, buffers: tuple[str, ...],
                  mats: dict[str, unreal.Material]) -> dict:
    """A ground-truth job: one camera (the sequence's camera cut), one spatial and one temporal
    sample (no jitter, nothing averaged), no anti-aliasing or multi-sample effects, no warm-up
    (nothing in these buffers builds up over frames), lossless 32-bit EXR per pass and frame.
    Returns what was set (recorded in rendered.jsonl)."""
    cfg = job.get_configuration()
    set_output(cfg, out_dir, FILE_NAME_FORMAT, width, height, fps)
    aa = cfg.find_or_add_setting_by_class(unreal.MoviePipelineAntiAliasingSetting)
    aa.spatial_sample_count = 1
    aa.temporal_sample_count = 1
    aa.render_warm_up_count = 0
    aa.engine_warm_up_count = 0
    aa.render_warm_up_frames = False
    aa.use_camera_cut_for_warm_up = False
    aa.override_anti_aliasing = True
    aa.anti_aliasing_method = unreal.AntiAliasingMethod.AAM_NONE
    cam = cfg.find_or_add_setting_by_class(unreal.MoviePipelineCameraSetting)
    cam.render_all_cameras = False  # the camera cut's camera: the Object ID pass renders only it
    deferred = cfg.find_or_add_setting_by_class(unreal.MoviePipelineDeferredPassBase)
    deferred.render_main_pass = True  # post-process materials render only with the main pass
    deferred.disable_multisample_effects = True  # no DoF, motion blur, AA: pixels line up
    passes = [unreal.MoviePipelinePostProcessPass(enabled=True, name=POST_PROCESS[b],
                                                  material=mats[b], high_precision_output=True)
              for b in buffers if b in POST_PROCESS]
    # replaces MRQ's pre-seeded (disabled) WorldDepth and MotionVectors entries
    deferred.additional_post_process_materials = unreal.Array.cast(
        unreal.MoviePipelinePostProcessPass, passes)
    if "ids" in buffers:
        ids = cfg.find_or_add_setting_by_class(unreal.MoviePipelineObjectIdRenderPass)
        ids.id_type = unreal.MoviePipelineObjectIdPassIdType.ACTOR
        ids.include_translucent_objects = False
    exr = cfg.find_or_add_setting_by_class(unreal.MoviePipelineImageSequenceOutput_EXR)
    exr.compression = unreal.EXRCompressionFormat.ZIP  # lossless
    exr.multilayer = False  # one file per pass: {render_pass} in the file name
    game = cfg.find_or_add_setting_by_class(unreal.MoviePipelineGameOverrideSetting)
    game.flush_streaming_managers = True
    return {"spatial_samples": 1, "temporal_samples": 1, "anti_aliasing_method": "none",
            "buffers": list(buffers), "render_passes": [RENDER_PASS[b] for b in buffers],
            "file_name_format": FILE_NAME_FORMAT, "exr_compression": "zip",
            "resolution": [width, height]}
