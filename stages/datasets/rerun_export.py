"""`wmforge export rerun <trajectory>`: one rendered trajectory as a Rerun recording (``.rrd``),
written with rerun-sdk, no viewer needed.

Entities (timelines ``frame`` and ``time``):

- ``world``: view coordinates (right-handed, Z up); the annotation context (instance id →
  ``kind: name`` from instances.parquet) when the ids layer exists;
- ``world/cameras/<view>``: the camera-to-world Transform3D per frame;
- ``world/cameras/<view>/image``: a Pinhole in RDF (OpenCV axes), K at the video's size;
- ``world/cameras/<view>/image/rgb``: the view's MP4 embedded as an AssetVideo, one
  VideoFrameReference per frame;
- ``world/cameras/<view>/image/depth`` (DepthImage, metres, 0 where there is no surface) and
  ``…/segmentation`` (SegmentationImage of instance ids), when the render has those layers;
- ``world/character`` (feet position per frame) and ``world/character/path`` (the whole path);
- ``actions/key`` (TextLog), ``actions/index``, ``actions/valid``, ``actions/yaw_delta_deg``,
  ``actions/view_yaw_delta_deg`` (Scalars): at frame t, the input applied after frame t;
- ``conventions``: a text document stating all of the above.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.actions import ACTIONS
from ..core.camera_json import camera_to_world, k_matrix
from ..core.trajectory import VIEWS
from .clip_spans import Clip, render_clip
from .samples import CONVENTIONS, export_frames

ENTITY_ROOT = "world"


class RerunExportError(ValueError):
    """The folder is not a rendered trajectory the recording can be made from."""


def _clip(traj_dir: Path) -> tuple[Clip, dict]:
    for need in ("meta.json", "frames.parquet", "cameras.parquet", *[f"{v}.mp4" for v in VIEWS]):
        if not (traj_dir / need).is_file():
            raise RerunExportError(f"{traj_dir}: no {need} — expected a rendered trajectory "
                                   "(data/renders/<scene>/<level>/<instance>/<traj>/)")
    meta = json.loads((traj_dir / "meta.json").read_text())
    return render_clip(traj_dir, meta, traj_dir.name, str(meta.get("level_id")),
                       traj_dir.name), meta


def _annotations(traj_dir: Path) -> list:
    import rerun as rr

    inst = pd.read_parquet(traj_dir / "instances.parquet").sort_values("id")
    if len(inst) and int(inst["id"].max()) > 0xFFFF:
        raise RerunExportError(f"{traj_dir}/instances.parquet: id {int(inst['id'].max())} does "
                               "not fit Rerun's 16-bit class ids")
    rng = np.random.default_rng(0)
    info = [rr.AnnotationInfo(id=0, label="no surface", color=(0, 0, 0))]
    for r in inst.to_dict("records"):
        color = (255, 64, 64) if r["kind"] == "character" else tuple(
            int(x) for x in rng.integers(40, 230, 3))
        info.append(rr.AnnotationInfo(id=int(r["id"]), label=f"{r['kind']}: {r['name']}",
                                      color=color))
    return info


def _log_layers(rec, traj_dir: Path, meta: dict, v: str, every: int) -> list[str]:
    """Depth and segmentation of one view, every ``every``-th frame; returns what was logged."""
    import rerun as rr

    from ..media.layers import read_layer

    have = set((meta.get("ground_truth") or {}).get("layers") or [])
    done = []
    base = f"{ENTITY_ROOT}/cameras/{v}/image"
    if "depth" in have:
        d = read_layer(traj_dir, v, "depth")
        for f in range(0, len(d), every):
            rec.set_time("frame", sequence=f)
            rec.set_time("time", duration=f / meta["fps"])
            z = np.where(np.isfinite(d[f]), d[f], 0.0).astype(np.float32)
            rec.log(f"{base}/depth", rr.DepthImage(z, meter=1.0))
        done.append("depth")
    if "ids" in have:
        ids = read_layer(traj_dir, v, "ids")
        for f in range(0, len(ids), every):
            rec.set_time("frame", sequence=f)
            rec.set_time("time", duration=f / meta["fps"])
            rec.log(f"{base}/segmentation", rr.SegmentationImage(ids[f].astype(np.uint16)))
        done.append("segmentation")
    return done


def export_rerun(traj_dir: Path, out: Path, layer_every: int = 1) -> dict:
    """Write the recording of ``traj_dir`` to ``out``; returns a summary (entities, frames)."""
    import rerun as rr

    if layer_every < 1:
        raise RerunExportError(f"--layer-every {layer_every}: expected 1 or more")
    traj_dir = Path(traj_dir)
    clip, meta = _clip(traj_dir)
    frames, cams = export_frames(clip)
    n, fps = len(frames), clip.fps
    rid = uuid.uuid5(uuid.NAMESPACE_URL, f"wmforge:{meta.get('render_key')}:{traj_dir.name}")
    # one chunk per logged row and no time-based flush: the same render gives the same chunks
    # (Rerun's default batcher cuts chunks by wall-clock ticks)
    batcher = rr.ChunkBatcherConfig(flush_tick=timedelta(days=1), flush_num_bytes=1 << 40,
                                    flush_num_rows=1)
    rec = rr.RecordingStream("wmforge", recording_id=str(rid), send_properties=False,
                             batcher_config=batcher)
    rec.set_log_time_enabled(False)
    rec.set_log_tick_enabled(False)
    out.parent.mkdir(parents=True, exist_ok=True)
    rec.save(out)
    times = [rr.TimeColumn("frame", sequence=np.arange(n)),
             rr.TimeColumn("time", duration=np.arange(n) / fps)]
    entities = [ENTITY_ROOT]
    rec.log(ENTITY_ROOT, rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
    if "ids" in set((meta.get("ground_truth") or {}).get("layers") or []):
        rec.log(ENTITY_ROOT, rr.AnnotationContext(_annotations(traj_dir)), static=True)
    for v in VIEWS:
        c = cams[cams["view"] == v].sort_values("frame").to_dict("records")
        m = np.array([camera_to_world(r) for r in c])
        cam = f"{ENTITY_ROOT}/cameras/{v}"
        rec.send_columns(cam, indexes=times, columns=rr.Transform3D.columns(
            translation=m[:, :3, 3], mat3x3=m[:, :3, :3]))
        ks = np.array([k_matrix(clip.width, clip.height, float(r["fov_deg"])) for r in c])
        pin = rr.Pinhole(image_from_camera=ks[0], resolution=[clip.width, clip.height],
                         camera_xyz=rr.ViewCoordinates.RDF)
        if np.allclose(ks, ks[0]):
            rec.log(f"{cam}/image", pin, static=True)
        else:  # a zooming camera: K per frame
            rec.log(f"{cam}/image", pin, static=True)
            rec.send_columns(f"{cam}/image", indexes=times, columns=rr.Pinhole.columns(
                image_from_camera=ks))
        video = rr.AssetVideo(path=traj_dir / f"{v}.mp4")
        rec.log(f"{cam}/image/rgb", video, static=True)
        ts = np.asarray(video.read_frame_timestamps_nanos())
        if len(ts) != n:
            raise RerunExportError(f"{traj_dir}/{v}.mp4: {len(ts)} frames, expected {n}")
        rec.send_columns(f"{cam}/image/rgb", indexes=times,
                         columns=rr.VideoFrameReference.columns_nanos(ts))
        entities += [cam, f"{cam}/image", f"{cam}/image/rgb"]
        entities += [f"{cam}/image/{x}" for x in _log_layers(rec, traj_dir, meta, v,
                                                             layer_every)]
    pos = frames[["pos_x", "pos_y", "pos_z"]].to_numpy(np.float32)
    rec.send_columns(f"{ENTITY_ROOT}/character", indexes=times,
                     columns=rr.Points3D.columns(positions=pos, radii=np.full(n, 0.1, np.float32),
                                                 colors=np.tile([255, 64, 64], (n, 1))))
    strips = [pos[frames["segment"].to_numpy() == s] for s in sorted(frames["segment"].unique())]
    rec.log(f"{ENTITY_ROOT}/character/path", rr.LineStrips3D(strips), static=True)
    act = frames["action"].astype(str).tolist()
    rec.send_columns("actions/key", indexes=times, columns=rr.TextLog.columns(text=act))
    for name, vals in (("index", [ACTIONS.index(a) for a in act]),
                       ("valid", frames["action_valid"].astype(float).tolist()),
                       ("yaw_delta_deg", frames["yaw_delta_deg"].tolist()),
                       ("view_yaw_delta_deg", frames["view_yaw_delta_deg"].tolist())):
        rec.send_columns(f"actions/{name}", indexes=times,
                         columns=rr.Scalars.columns(scalars=np.asarray(vals, np.float64)))
    doc = "\n".join(f"- **{k.replace('_', ' ')}**: {t}" for k, t in CONVENTIONS.items())
    rec.log("conventions", rr.TextDocument(doc, media_type=rr.MediaType.MARKDOWN), static=True)
    entities += [f"{ENTITY_ROOT}/character", f"{ENTITY_ROOT}/character/path", "actions/key",
                 *[f"actions/{x}" for x in ("index", "valid", "yaw_delta_deg",
                                            "view_yaw_delta_deg")], "conventions"]
    rec.flush()
    rec.disconnect()
    return {"out": str(out), "frames": n, "entities": entities, "bytes": out.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge export rerun", description=__doc__.splitlines()[0])
    ap.add_argument("trajectory", help="a rendered trajectory directory "
                    "(data/renders/<scene>/<level>/<instance>/<traj>/)")
    ap.add_argument("--out", help="the .rrd to write (default: ./<traj>.rrd; the render folder "
                    "is left as it was published)")
    ap.add_argument("--layer-every", type=int, default=1,
                    help="log depth and segmentation every N-th frame (they are stored raw in "
                    "the recording: about 5 x W x H x 6 bytes per frame)")
    args = ap.parse_args(argv)
    traj = Path(args.trajectory)
    out = Path(args.out) if args.out else Path(f"{traj.resolve().name}.rrd")
    try:
        s = export_rerun(traj, out, args.layer_every)
    except (RerunExportError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"export rerun: {s['frames']} frames, {len(s['entities'])} entities, "
          f"{s['bytes'] / 1e6:.1f} MB → {s['out']} (open with: rerun {s['out']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
