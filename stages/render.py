"""`render` stage (Stage II, paper §7, §8.1–8.2): replay every finished trajectory and render its
five views offline, supersampled, into H.264 MP4s plus a tiled preview.

Layout: ``data/renders/<scene>/<level>/<instance>/<traj>/`` with an instance id of node id +
UTC timestamp + sequence number, so reruns never overwrite. One renderer process per instance
(one level, loaded once); it appends one fixed-format line per finished trajectory to the
instance's ``progress.log`` and writes the ``COMPLETE`` marker only after a normal shutdown.
The scheduler only reads ``progress.log``. Before rendering, every interrupted instance is
recovered: trajectories with a progress line whose videos decode to the expected frame count are
kept, the rest deleted, and an instance with nothing left is discarded. A finished trajectory
(same trajectory, same render settings) is never rendered twice.

Per trajectory, ``meta.json`` holds the encode settings, sha256 of every file, the level
sanitization and texture report, and the alignment gate (replayed transforms equal the recorded
ones; the recorded character position projected through each external view lands on the
character's mask).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from .config import ConfigError, RenderConfig, load_params
from .core import replay
from .core.trajectory import PROP_COLUMNS, VIEWS, TrajectoryError, validate, validate_props
from .inventory import write_parquet

PROGRESS = "progress.log"
COMPLETE = "COMPLETE"
RECOVERED = "RECOVERED"
EXTERNAL = ("back", "left", "right", "top")
TRAJ_FILES = ("frames.parquet", "cameras.parquet")
OPTIONAL_TRAJ_FILES = ("props.parquet",)  # contract v2; absent in v1 trajectories


def traj_files(traj_dir: Path) -> tuple[str, ...]:
    return TRAJ_FILES + tuple(f for f in OPTIONAL_TRAJ_FILES if (traj_dir / f).is_file())
FAIL_COLUMNS = ["level_id", "trajectory", "reason", "detail", "instance"]


# ---------------------------------------------------------------------------- keys and lines

def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def render_settings(rcfg: RenderConfig, fps: int) -> dict:
    w, h = rcfg.size()
    return {"width": w, "height": h, "spatial_samples": rcfg.spatial_samples,
            "temporal_samples": rcfg.temporal_samples, "shutter": rcfg.shutter,
            "warmup_frames": rcfg.warmup_frames, "x264_preset": rcfg.x264_preset,
            "crf": rcfg.crf, "encoder_threads": rcfg.encoder_threads,
            "x264_mbtree": rcfg.x264_mbtree,
            "gop": max(1, round(rcfg.gop_s * fps)), "preview": rcfg.preview,
            "preview_x264_preset": rcfg.preview_x264_preset,
            "preview_encoder_threads": rcfg.preview_encoder_threads,
            "mask_scale": rcfg.mask_scale, "align_radius_px": rcfg.align_radius_px,
            "align_min": rcfg.align_min}


def render_key(traj_dir: Path, settings: dict) -> str:
    """Identity of one render: the trajectory's bytes and the settings that shape the output."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for name in (*traj_files(traj_dir), "meta.json"):
        h.update(sha256_file(traj_dir / name).encode())
    return h.hexdigest()[:16]


def progress_line(traj: str, frames: int, key: str) -> str:
    """``DONE <traj> frames=<6 digits> key=<16 hex>`` — one per finished trajectory."""
    return f"DONE {traj} frames={frames:06d} key={key}\n"


def read_progress(inst: Path) -> dict[str, tuple[int, str]]:
    """traj → (frames, key) for every well-formed line (a torn last line is ignored)."""
    out: dict[str, tuple[int, str]] = {}
    p = inst / PROGRESS
    if not p.exists():
        return out
    for line in p.read_text(errors="replace").splitlines():
        parts = line.split()
        if (len(parts) == 4 and parts[0] == "DONE" and parts[2].startswith("frames=")
                and parts[3].startswith("key=") and len(parts[3]) == 20):
            try:
                out[parts[1]] = (int(parts[2][7:]), parts[3][4:])
            except ValueError:
                continue
    return out


def expected_videos(preview: bool) -> list[str]:
    return [f"{v}.mp4" for v in VIEWS] + (["preview.mp4"] if preview else [])


# ---------------------------------------------------------------------------- recovery

def recover_instance(inst: Path, log=print) -> list[str]:
    """Keep only trajectories with a progress line and videos that decode to the expected frame
    count; delete everything else; discard the instance if nothing is left. Returns the kept
    trajectory names."""
    from .media.video import count_frames

    if (inst / COMPLETE).exists() or (inst / RECOVERED).exists():
        return sorted(read_progress(inst))
    done = read_progress(inst)
    kept = []
    for child in sorted(inst.iterdir()):
        if not child.is_dir():
            continue
        ok = child.name in done
        if ok:
            meta = child / "meta.json"
            try:
                m = json.loads(meta.read_text())
                vids = m["videos"]
                ok = all(count_frames(child / v) == done[child.name][0] for v in vids)
            except (OSError, KeyError, json.JSONDecodeError):
                ok = False
        if ok:
            kept.append(child.name)
        else:
            shutil.rmtree(child)
            log(f"recover: {inst.name}/{child.name}: removed (unfinished)")
    if not kept:
        shutil.rmtree(inst)
        log(f"recover: {inst}: nothing finished, instance discarded")
        return []
    for f in inst.iterdir():
        if f.is_file() and f.name not in (PROGRESS, "instance.json", "failures.jsonl",
                                          "renderer.log"):
            f.unlink()
    (inst / RECOVERED).write_text(json.dumps({"kept": kept}) + "\n")
    log(f"recover: {inst}: kept {len(kept)} trajectories")
    return kept


def instances(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob(f"*/*/*/{PROGRESS}")) + sorted(
        p for p in root.glob("*/*/*") if p.is_dir() and not (p / PROGRESS).exists()
        and (p / "instance.json").exists())


def recover_all(root: Path, log=print) -> None:
    for inst in instances(root):
        if inst.exists() and not (inst / COMPLETE).exists() and not (inst / RECOVERED).exists():
            recover_instance(inst, log)


# ---------------------------------------------------------------------------- the renderer

class _Fail(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _resolve(p: str, base: Path) -> Path:
    q = Path(p)
    return q if q.is_absolute() else base / q


def _load_traj(traj_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict, pd.DataFrame]:
    try:
        frames = pd.read_parquet(traj_dir / "frames.parquet")
        cams = pd.read_parquet(traj_dir / "cameras.parquet")
        meta = json.loads((traj_dir / "meta.json").read_text())
        pp = traj_dir / "props.parquet"
        props = (pd.read_parquet(pp) if pp.is_file() else
                 pd.DataFrame({c: [] for c in PROP_COLUMNS}))
    except (OSError, ValueError) as exc:
        raise _Fail("invalid_trajectory", f"{traj_dir}: {exc}") from None
    try:
        validate({str(c): frames[c].tolist() for c in frames},
                 {str(c): cams[c].tolist() for c in cams}, meta)
        validate_props({str(c): props[c].tolist() for c in props}, len(frames))
    except TrajectoryError as exc:
        raise _Fail("invalid_trajectory", f"{traj_dir}/{exc}") from None
    return frames, cams, meta, props


def prop_table(props: pd.DataFrame, names: list[str], n: int
               ) -> list[list[tuple[tuple[float, float, float], tuple[float, ...]]]] | None:
    """Per frame, per prop of the loaded level: (pos, quat). None when nothing was recorded
    (a v1 trajectory). The recorded props must be the level's dynamic props, in order."""
    if props.empty:
        return None
    rec = props.drop_duplicates("prop_index").sort_values("prop_index")
    got = [str(x) for x in rec["prop"]]
    if got != names:
        raise _Fail("invalid_trajectory", f"props.parquet: props {got} do not match the "
                    f"level's dynamic props {names}")
    props = props.sort_values(["frame", "prop_index"])
    pos = props[["pos_x", "pos_y", "pos_z"]].to_numpy().reshape(n, len(names), 3)
    rot = props[["rot_w", "rot_x", "rot_y", "rot_z"]].to_numpy().reshape(n, len(names), 4)
    return [[(tuple(pos[f, k]), tuple(rot[f, k])) for k in range(len(names))]
            for f in range(n)]


class InstanceRenderer:
    """Renders the trajectories of one level into one instance directory (one process)."""

    def __init__(self, inst: Path, settings: dict, display: str, base: Path, log=print):
        self.inst, self.s, self.base, self.log = inst, settings, base, log
        self.display = display
        self.r: Any = None
        self.level_key: str | None = None
        self.level_report: dict = {}
        self.char_key: str | None = None
        self.encoder: Any = None

    def _renderer(self) -> Any:
        if self.r is None:
            from .engine.replay_render import ReplayRenderer

            self.r = ReplayRenderer(self.s["width"], self.s["height"], self.s["spatial_samples"],
                                    self.s["temporal_samples"], self.display,
                                    self.s["mask_scale"])
        return self.r

    def _ensure_level(self, meta: dict) -> None:
        from .engine.replay_render import load_level_lighting

        lv = meta.get("level") or {}
        path = _resolve(str(lv.get("path", "")), self.base)
        key = f"{path}|{lv.get('scale', 1.0)}|{lv.get('up_axis', 'Z')}"
        if key == self.level_key:
            return
        if not path.is_file():
            raise _Fail("missing_asset", f"level file {path} (meta.json level.path) not found")
        r = self._renderer()
        try:
            from .engine.embedded import load_model

            model = load_model(str(path), float(lv.get("scale", 1.0)),
                               str(lv.get("up_axis", "Z")))
        except Exception as exc:  # noqa: BLE001 - any loader failure is a reason
            raise _Fail("missing_asset", f"{path}: {exc}") from None
        model.flattenLight()
        rep = r.load_level(model, load_level_lighting(str(path)))
        r.warmup(self.s["warmup_frames"])
        self.level_report = {"removed": rep.removed, "textures": rep.textures,
                             "textures_full_res": rep.textures_full_res, "lights": rep.lights,
                             "dynamic_props": rep.props,
                             "warmup_frames": self.s["warmup_frames"]}
        self.level_key = key

    def _ensure_character(self, meta: dict) -> None:
        ch = meta.get("character") or {}
        path = _resolve(str(ch.get("model", "")), self.base)
        key = str(path)
        if key == self.char_key:
            return
        if not path.is_file():
            raise _Fail("missing_asset", f"character model {path} (meta.json character.model) "
                        "not found")
        from .engine.embedded import load_model

        model = load_model(str(path))
        clip_files = {}
        for clip in set(v for v in (ch.get("animations") or {}).values() if v):
            f = path.parent / clip
            if f.is_file():
                clip_files[clip] = str(f)
        self.r.load_character(model, str(path), clip_files)
        self.char_key = key

    def render(self, traj_dir: Path, name: str, key: str) -> dict:
        from .media.video import AsyncEncoder, EncodeSettings, VideoWriter, tile_preview

        frames, cams, meta, props = _load_traj(traj_dir)
        self._renderer()
        self._ensure_level(meta)
        self._ensure_character(meta)
        r = self.r
        ptab = prop_table(props, r.prop_names, len(frames))
        fps = int(meta["fps"])
        n = len(frames)
        fcols = {str(c): frames[c].tolist() for c in frames}
        ccols = {str(c): cams[c].tolist() for c in cams}
        rows, views = replay.frame_tables(fcols, ccols)
        segs = [int(x) for x in fcols["segment"]]
        ch = meta["character"]
        sched = replay.clip_schedule([str(a) for a in fcols["action"]],
                                     [float(v) for v in fcols["speed"]], segs,
                                     ch.get("animations") or {}, fps, r.available_clips())
        W, H = self.s["width"], self.s["height"]
        out = self.inst / name
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        enc = EncodeSettings(preset=self.s["x264_preset"], crf=self.s["crf"],
                             gop=self.s["gop"], threads=self.s["encoder_threads"],
                             mbtree=bool(self.s.get("x264_mbtree", False)))
        names = list(VIEWS) + (["preview"] if self.s["preview"] else [])
        writers = {}
        try:
            for v in VIEWS:
                writers[v] = VideoWriter(out / f"{v}.mp4", W, H, fps, enc)
            if self.s["preview"]:
                pw, ph = 3 * (W // 2 // 2 * 2), 2 * (H // 2 // 2 * 2)
                penc = EncodeSettings(preset=self.s.get("preview_x264_preset", enc.preset),
                                      crf=enc.crf, gop=enc.gop, mbtree=enc.mbtree,
                                      threads=self.s.get("preview_encoder_threads", enc.threads))
                writers["preview"] = VideoWriter(out / "preview.mp4", pw, ph, fps, penc)
            gate = self._frames(rows, views, segs, sched, meta, writers, tile_preview,
                                AsyncEncoder, ptab)
            for w in writers.values():
                w.close(n)
        except _Fail:
            for w in writers.values():
                w.abort()
            raise
        except Exception as exc:
            for w in writers.values():
                w.abort()
            reason = "disk_full" if isinstance(exc, OSError) and getattr(
                exc, "errno", None) in (28, 27) else "encode_failed"
            raise _Fail(reason, f"{type(exc).__name__}: {exc}") from None
        if gate["aligned_fraction"] < self.s["align_min"] or gate["transform_max_err"] > 1e-4:
            raise _Fail("misaligned", f"aligned {gate['aligned_fraction']:.3f} < "
                        f"{self.s['align_min']} or transform error "
                        f"{gate['transform_max_err']:.2e} m")
        try:
            return self._publish(traj_dir, out, name, key, n, fps, enc, names, views, gate,
                                 meta)
        except OSError as exc:
            shutil.rmtree(out, ignore_errors=True)
            raise _Fail("disk_full" if exc.errno in (28, 27) else "write_failed",
                        f"{type(exc).__name__}: {exc}") from None

    def _publish(self, traj_dir: Path, out: Path, name: str, key: str, n: int, fps: int,
                 enc: Any, names: list[str], views: dict, gate: dict, meta: dict) -> dict:
        W, H = self.s["width"], self.s["height"]
        for f in traj_files(traj_dir):
            shutil.copyfile(traj_dir / f, out / f)
        shutil.copyfile(traj_dir / "meta.json", out / "trajectory.json")
        files = sorted(p.name for p in out.iterdir() if p.is_file())
        rmeta = {
            "schema_version": 1, "trajectory": name, "level_id": meta["level_id"],
            "character_id": meta["character_id"], "frame_count": n, "fps": fps,
            "duration_s": n / fps, "render_key": key, "settings": self.s,
            "encode": enc.as_dict(), "videos": [f"{v}.mp4" for v in names],
            "intrinsics": {v: _intrinsics(views[v][0], W, H) for v in VIEWS},
            "level": self.level_report, "alignment": gate,
            "character_clip_problems": list(getattr(self.r, "clip_problems", [])),
            "sha256": {f: sha256_file(out / f) for f in files},
        }
        tmp = out / "meta.json.tmp"
        tmp.write_text(json.dumps(rmeta, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, out / "meta.json")
        return rmeta

    def _frames(self, rows, views, segs, sched, meta, writers, tile_preview, AsyncEncoder,
                ptab=None) -> dict:
        from .engine.replay_render import CharacterPose, SamplePose, ViewPose, temporal_offsets

        r = self.r
        W, H = self.s["width"], self.s["height"]
        offs = temporal_offsets(self.s["temporal_samples"], self.s["shutter"])
        ch = meta["character"]
        vh = float(ch.get("visual_height_m", 1.0))
        ms, rad = self.s["mask_scale"], self.s["align_radius_px"]
        in_view = {v: 0 for v in EXTERNAL}
        aligned = {v: 0 for v in EXTERNAL}
        max_err = 0.0
        dz = -r.model_min_z * float(rows[0]["scale_z"])
        fps = int(meta["fps"])
        derived = ({"preview": lambda imgs: tile_preview({v: imgs[v] for v in VIEWS}, VIEWS)}
                   if "preview" in writers else {})
        encoder = AsyncEncoder(writers, depth=self.s.get("queue_depth", 4), derived=derived)
        self.encoder = encoder
        try:
            for f in range(len(rows)):
                samples = []
                for off in offs:
                    c = replay.character_pose(rows, f, off, segs)
                    clip, ct = sched[f]
                    cp = CharacterPose(c["pos"], c["quat"], c["scale"], clip, ct + off / fps)
                    vp = {}
                    for v in VIEWS:
                        p = replay.camera_pose(views[v], f, off, segs)
                        vp[v] = ViewPose(p["pos"], p["quat"], p["fov_deg"])
                    samples.append(SamplePose(cp, vp))
                c0 = replay.character_pose(rows, f, 0.0, segs)
                exact = SamplePose(CharacterPose(c0["pos"], c0["quat"], c0["scale"], *sched[f]),
                                   {v: ViewPose(*(lambda p: (p["pos"], p["quat"], p["fov_deg"]))(
                                       replay.camera_pose(views[v], f, 0.0, segs)))
                                    for v in VIEWS})
                if ptab is not None:
                    r.place_props(ptab[f])
                colors, masks, placed = r.render(samples, exact, dz)
                # gate 1: the transforms in the scene graph are the recorded ones
                rec = rows[f]
                pz = placed["character"]["pos"]
                err = max(abs(pz[0] - rec["pos_x"]), abs(pz[1] - rec["pos_y"]),
                          abs(pz[2] - dz - rec["pos_z"]))
                for v in VIEWS:
                    cr = views[v][f]
                    pc = placed[v]
                    err = max(err, abs(pc[0] - cr["pos_x"]), abs(pc[1] - cr["pos_y"]),
                              abs(pc[2] - cr["pos_z"]))
                if ptab is not None:
                    for (pp, pq), (gp, gq) in zip(ptab[f], placed["props"], strict=True):
                        err = max(err, *(abs(a - b) for a, b in zip(pp, gp, strict=True)),
                                  min(max(abs(a - b) for a, b in zip(pq, gq, strict=True)),
                                      max(abs(a + b) for a, b in zip(pq, gq, strict=True))))
                max_err = max(max_err, err)
                # gate 2: the recorded position projects onto the rendered character
                target = (rec["pos_x"], rec["pos_y"], rec["pos_z"] + 0.5 * vh)
                for v in EXTERNAL:
                    cr = views[v][f]
                    fx = (W / 2) / math.tan(math.radians(cr["fov_deg"]) / 2)
                    u, w_, d = replay.project(target, (cr["pos_x"], cr["pos_y"], cr["pos_z"]),
                                              (cr["rot_w"], cr["rot_x"], cr["rot_y"],
                                               cr["rot_z"]), fx, fx, W / 2, H / 2)
                    if not (d > 0.05 and 0 <= u < W and 0 <= w_ < H):
                        continue
                    in_view[v] += 1
                    m = masks[v]
                    mu, mv = int(u / ms), int(w_ / ms)
                    win = m[max(0, mv - rad): mv + rad + 1, max(0, mu - rad): mu + rad + 1]
                    if win.any():
                        aligned[v] += 1
                encoder.put(colors)
        finally:
            encoder.finish()
        tot_in, tot_ok = sum(in_view.values()), sum(aligned.values())
        return {"in_view_frames": in_view, "aligned_frames": aligned,
                "props_replayed": len(r.prop_names) if ptab is not None else 0,
                "aligned_fraction": (tot_ok / tot_in) if tot_in else 1.0,
                "transform_max_err": max_err}

    def close(self) -> None:
        if self.r is not None:
            self.r.close()


def _intrinsics(cam_row: dict, W: int, H: int) -> dict:
    fx = (W / 2) / math.tan(math.radians(cam_row["fov_deg"]) / 2)
    return {"width": W, "height": H, "fov_deg": cam_row["fov_deg"], "fx": fx, "fy": fx,
            "cx": W / 2, "cy": H / 2}


def worker(inst: Path) -> int:
    """The rendering process: the jobs of ``instance.json``, one progress line each."""
    spec = json.loads((inst / "instance.json").read_text())
    base = Path(spec.get("base", "."))
    ir = InstanceRenderer(inst, spec["settings"], spec.get("display", "p3headlessgl"), base)
    done = read_progress(inst)
    for job in spec["jobs"]:
        name = job["name"]
        if name in done:
            continue
        t0 = time.perf_counter()
        try:
            rmeta = ir.render(Path(job["traj_dir"]), name, job["key"])
        except Exception as exc:  # noqa: BLE001 - one bad trajectory never stops the instance
            reason, detail = ((exc.reason, exc.detail) if isinstance(exc, _Fail) else
                              ("render_error", f"{type(exc).__name__}: {exc}"))
            shutil.rmtree(inst / name, ignore_errors=True)
            with open(inst / "failures.jsonl", "a") as f:
                f.write(json.dumps({"trajectory": name, "reason": reason,
                                    "detail": detail}) + "\n")
            print(f"render: {name}: {reason}: {detail}", flush=True)
            continue
        with open(inst / PROGRESS, "a") as f:
            f.write(progress_line(name, rmeta["frame_count"], job["key"]))
            f.flush()
            os.fsync(f.fileno())
        dt = time.perf_counter() - t0
        enc = ir.encoder
        busy = " ".join(f"{k}={v:.1f}" for k, v in (enc.busy_s.items() if enc else ()))
        print(f"render: {name}: {rmeta['frame_count']} frames x {len(VIEWS)} views in "
              f"{dt:.1f} s ({rmeta['frame_count'] / dt:.1f} frames/s), aligned "
              f"{rmeta['alignment']['aligned_fraction']:.3f}, render thread waited "
              f"{enc.wait_s if enc else 0:.1f} s on encoders, encoder busy s: {busy}",
              flush=True)
    ir.close()
    (inst / COMPLETE).write_text(json.dumps({"jobs": len(spec["jobs"])}) + "\n")
    return 0


# ---------------------------------------------------------------------------- the scheduler

def _level_parts(level_id: str) -> tuple[str, str]:
    scene, _, level = level_id.partition("/")
    return scene or "_", (level or scene).replace("/", "__")


def finished(root: Path) -> dict[tuple[str, str, str], Path]:
    """(level dir, traj, key) → trajectory directory, for every closed instance."""
    out: dict[tuple[str, str, str], Path] = {}
    for inst in instances(root):
        if not ((inst / COMPLETE).exists() or (inst / RECOVERED).exists()):
            continue
        lvl = f"{inst.parent.parent.name}/{inst.parent.name}"
        for traj, (_, key) in read_progress(inst).items():
            if (inst / traj / "meta.json").exists():
                out[(lvl, traj, key)] = inst / traj
    return out


def run_render(rcfg: RenderConfig, traj_root: Path, root: Path, display: str = "p3headlessgl",
               fps: int = 30, log=print, levels: set[str] | None = None
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Render every trajectory not rendered yet; return (index, failures)."""
    root.mkdir(parents=True, exist_ok=True)
    recover_all(root, log)
    settings = render_settings(rcfg, fps)
    done = finished(root)
    by_level: dict[str, list[dict]] = {}
    failures: list[dict] = []
    wanted: list[tuple[str, str, str, str]] = []
    for meta_p in sorted(traj_root.glob("*/traj_*/meta.json")):
        tdir = meta_p.parent
        try:
            meta = json.loads(meta_p.read_text())
            lid = str(meta["level_id"])
        except (OSError, ValueError, KeyError) as exc:
            failures.append({"level_id": tdir.parent.name, "trajectory": tdir.name,
                             "reason": "invalid_trajectory", "detail": f"{meta_p}: {exc}",
                             "instance": ""})
            continue
        if levels is not None and lid not in levels:
            continue  # not in this machine's pool (no longer selected, or another node's)
        scene, level = _level_parts(lid)
        key = render_key(tdir, settings)
        wanted.append((lid, f"{scene}/{level}", tdir.name, key))
        if (f"{scene}/{level}", tdir.name, key) in done:
            continue
        by_level.setdefault(lid, []).append({"name": tdir.name, "traj_dir": str(tdir.resolve()),
                                             "key": key})
    seq = 0
    for lid, jobs in sorted(by_level.items()):
        scene, level = _level_parts(lid)
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        inst = root / scene / level / f"{rcfg.node_id}-{stamp}-{seq:04d}"
        while inst.exists():
            seq += 1
            inst = root / scene / level / f"{rcfg.node_id}-{stamp}-{seq:04d}"
        seq += 1
        inst.mkdir(parents=True)
        (inst / "instance.json").write_text(json.dumps(
            {"level_id": lid, "settings": settings, "display": display,
             "base": str(Path.cwd()), "jobs": jobs}, indent=1) + "\n")
        t0 = time.perf_counter()
        rc = _spawn_worker(inst, rcfg.instance_timeout_s)
        log(f"render: {lid}: {len(jobs)} trajectories in {time.perf_counter() - t0:.1f} s "
            f"(renderer exit {rc})")
        crash_tail = ""
        if rc != 0:
            lines = (inst / "renderer.log").read_text(errors="replace").strip().splitlines()
            crash_tail = " | ".join(lines[-3:])[-600:]
            recover_instance(inst, log)
        fl = inst / "failures.jsonl"
        reported = set()
        if fl.exists():
            for line in fl.read_text().splitlines():
                d = json.loads(line)
                reported.add(d["trajectory"])
                failures.append({"level_id": lid, "trajectory": d["trajectory"],
                                 "reason": d["reason"], "detail": d["detail"],
                                 "instance": inst.name})
        if rc != 0:
            kept = set(read_progress(inst)) if inst.exists() else set()
            for j in jobs:
                if j["name"] not in kept and j["name"] not in reported:
                    failures.append({"level_id": lid, "trajectory": j["name"],
                                     "reason": "renderer_crashed",
                                     "detail": f"renderer exit code {rc}: {crash_tail}",
                                     "instance": inst.name})
    done = finished(root)
    rows = []
    for lid, lvl, traj, key in wanted:
        d = done.get((lvl, traj, key))
        if d is None:
            continue
        m = json.loads((d / "meta.json").read_text())
        rows.append({"level_id": lid, "trajectory": traj, "path": str(d.relative_to(root)),
                     "instance": d.parent.name, "character_id": m["character_id"],
                     "frames": m["frame_count"], "fps": m["fps"], "duration_s": m["duration_s"],
                     "width": m["settings"]["width"], "height": m["settings"]["height"],
                     "aligned_fraction": m["alignment"]["aligned_fraction"]})
    index = pd.DataFrame(rows, columns=["level_id", "trajectory", "path", "instance",
                                        "character_id", "frames", "fps", "duration_s", "width",
                                        "height", "aligned_fraction"])
    return index, pd.DataFrame(failures, columns=FAIL_COLUMNS)


def _spawn_worker(inst: Path, timeout_s: float) -> int:
    with open(inst / "renderer.log", "ab") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "stages.render", "worker", str(inst)],
                                stdout=logf, stderr=subprocess.STDOUT)
        try:
            return proc.wait(timeout=timeout_s or None)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return -9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge render", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    w = sub.add_parser("worker", help="render one instance (internal: run by the scheduler)")
    w.add_argument("instance")
    rc = sub.add_parser("recover", help="recover interrupted instances under a path")
    rc.add_argument("path")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--trajectories", default="data/trajectories")
    ap.add_argument("--out", default="data/renders")
    ap.add_argument("--pools", default="", help="pools.parquet: render only the levels of this "
                    "machine's pool (cluster.node; every pool when empty)")
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    if args.cmd == "worker":
        return worker(Path(args.instance))
    if args.cmd == "recover":
        p = Path(args.path)
        if (p / "instance.json").exists():
            recover_instance(p)
        else:
            recover_all(p)
        return 0
    try:
        cfg = load_params(args.params, args.set)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    only = None
    if args.pools:
        from .pools import pool_levels

        only = set(pool_levels(pd.read_parquet(args.pools), cfg.cluster.node))
    index, failures = run_render(cfg.render, Path(args.trajectories), out, cfg.engine.display,
                                 cfg.engine.fps, levels=only)
    write_parquet(index, out / "index.parquet")
    write_parquet(failures, out / "failures.parquet")
    hours = index["duration_s"].sum() / 3600 if len(index) else 0.0
    print(f"render: {len(index)} trajectories ({hours * 60:.1f} five-view minutes), "
          f"{len(failures)} failures → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["run_render", "recover_instance", "worker", "asdict"]
