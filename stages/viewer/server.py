"""`wmforge view`: a local web page for spot-checking one rendered trajectory (paper §8.1, Fig. 5).

The page plays the five views (and the tiled preview) in sync with one scrubber, shows the
recorded action of the current frame on a WASD key diagram, a timeline of actions, speed,
grounded state, segments and events (click one to jump to it), and a 3D plot of the character
path with the five cameras at the current frame. Where the render has ground-truth layers, each
view toggles between RGB, depth, normals, ids and flow (colourised previews made when the page
is built, stages/viewer/layer_previews.py). Everything it needs is in ``static/`` beside
this file: it works offline, no CDN.

The server is the standard library's ``ThreadingHTTPServer``; videos are served with HTTP range
requests (browsers seek in a video only when the server answers ranges).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import tempfile
import weakref
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STATIC = Path(__file__).resolve().parent / "static"
VIEWS = ("back", "left", "right", "top", "fp")
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".mp4": "video/mp4",
                 ".json": "application/json", ".png": "image/png"}


class ViewerError(Exception):
    """The directory is not a rendered (or Stage I) trajectory."""


def _forward(w: float, x: float, y: float, z: float) -> list[float]:
    """Viewing direction (+z of the OpenCV camera) of a world-from-camera quaternion."""
    return [2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)]


def _r(v: float, nd: int = 4) -> float:
    return round(float(v), nd) if math.isfinite(float(v)) else 0.0


def trajectory_payload(traj_dir: Path) -> dict[str, Any]:
    """Everything the page shows, from the files of one trajectory directory: a render output
    (videos + frames/cameras parquet + meta.json) or a bare Stage I trajectory (no videos)."""
    import pandas as pd

    traj_dir = Path(traj_dir)
    for need in ("frames.parquet", "cameras.parquet", "meta.json"):
        if not (traj_dir / need).is_file():
            raise ViewerError(f"{traj_dir}: no {need} — expected a rendered trajectory "
                              "(data/renders/<scene>/<level>/<instance>/<traj>/) or a Stage I "
                              "trajectory (data/trajectories/<level>/<traj>/)")
    try:
        frames = pd.read_parquet(traj_dir / "frames.parquet").sort_values("frame")
        cams = pd.read_parquet(traj_dir / "cameras.parquet")
        meta = json.loads((traj_dir / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise ViewerError(f"{traj_dir}: cannot read: {exc}") from None
    fps = int(meta.get("fps") or 30)
    n = len(frames)
    videos = {}
    for v in VIEWS:
        if (traj_dir / f"{v}.mp4").is_file():
            videos[v] = f"/video/{v}.mp4"
    preview = "/video/preview.mp4" if (traj_dir / "preview.mp4").is_file() else None
    cameras: dict[str, dict[str, list]] = {}
    for v in VIEWS:
        c = cams[cams["view"] == v].sort_values("frame")
        if len(c) != n:
            raise ViewerError(f"{traj_dir}/cameras.parquet: view {v!r} has {len(c)} rows, "
                              f"expected one per frame ({n})")
        cameras[v] = {
            "pos": [[_r(a), _r(b), _r(c_)] for a, b, c_ in
                    zip(c["pos_x"], c["pos_y"], c["pos_z"], strict=True)],
            "fwd": [[_r(t) for t in _forward(w, x, y, z)] for w, x, y, z in
                    zip(c["rot_w"], c["rot_x"], c["rot_y"], c["rot_z"], strict=True)],
            "fov_deg": [_r(f, 2) for f in c["fov_deg"]],
            "occluded": [bool(o) for o in c["occluded"]],
        }
    events = [{"frame": int(f), "event": str(e)} for f, e in
              zip(frames["frame"], frames["event"], strict=True) if str(e) != "none"]
    seg = [int(s) for s in frames["segment"]]
    segments = []
    start = 0
    for i in range(1, n + 1):
        if i == n or seg[i] != seg[start]:
            segments.append({"segment": seg[start], "start": start, "end": i - 1})
            start = i
    size = None
    if "settings" in meta:
        size = [int(meta["settings"]["width"]), int(meta["settings"]["height"])]
    return {
        "name": traj_dir.name, "level_id": meta.get("level_id"),
        "character_id": meta.get("character_id"), "fps": fps, "frames": n, "size": size,
        "rendered": bool(videos), "videos": videos, "preview": preview,
        "action": [str(a) for a in frames["action"]],
        "speed": [_r(s, 3) for s in frames["speed"]],
        "grounded": [bool(g) for g in frames["grounded"]],
        "segment": seg, "segments": segments, "events": events,
        "pos": [[_r(a), _r(b), _r(c)] for a, b, c in
                zip(frames["pos_x"], frames["pos_y"], frames["pos_z"], strict=True)],
        "yaw_deg": [_r(y, 2) for y in frames["yaw_deg"]],
        "cameras": cameras,
        "alignment": meta.get("alignment"),
        "layers": {},  # view → toggle → URL, filled by make_server when the render has layers
    }


_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class ViewerHandler(BaseHTTPRequestHandler):
    """Serves the bundled page, the trajectory's JSON and its videos (with range requests)."""

    server_version = "wmforge-view"

    def __init__(self, *args: Any, traj_dir: Path, payload: bytes, previews: Path | None = None,
                 **kw: Any):
        self.traj_dir = traj_dir
        self.payload = payload
        self.previews = previews
        super().__init__(*args, **kw)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: the page makes many range requests

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            return self._file(STATIC / "index.html")
        if path == "/api/trajectory":
            return self._bytes(self.payload, "application/json")
        m = re.fullmatch(r"/static/([A-Za-z0-9_.-]+)", path)
        if m and (STATIC / m.group(1)).is_file():
            return self._file(STATIC / m.group(1))
        m = re.fullmatch(r"/video/((?:back|left|right|top|fp|preview)\.mp4)", path)
        if m and (self.traj_dir / m.group(1)).is_file():
            return self._file(self.traj_dir / m.group(1))
        m = re.fullmatch(r"/layer/((?:back|left|right|top|fp)\.[a-z]+\.mp4)", path)
        if m and self.previews is not None and (self.previews / m.group(1)).is_file():
            return self._file(self.previews / m.group(1))
        self.send_error(HTTPStatus.NOT_FOUND, f"no {path}")

    def _bytes(self, data: bytes, ctype: str) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def _file(self, path: Path) -> None:
        size = path.stat().st_size
        ctype = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
        start, end = 0, size - 1
        rng = self.headers.get("Range")
        status = HTTPStatus.OK
        if rng:
            m = _RANGE.match(rng.strip())
            if not m or (not m.group(1) and not m.group(2)):
                self.send_error(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                return
            if m.group(1):
                start = int(m.group(1))
                end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            else:  # suffix range: the last N bytes
                start = max(0, size - int(m.group(2)))
            if start > end or start >= size:
                self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                self.send_header("Content-Range", f"bytes */{size}")
                self.end_headers()
                return
            status = HTTPStatus.PARTIAL_CONTENT
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        if status == HTTPStatus.PARTIAL_CONTENT:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        try:
            with open(path, "rb") as f:
                f.seek(start)
                left = end - start + 1
                while left > 0:
                    chunk = f.read(min(left, 1 << 16))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser cancelled a range it no longer needs (normal while seeking)


def make_server(traj_dir: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server for one trajectory directory (port 0: any free port; see ``server_address``)."""
    traj_dir = Path(traj_dir).resolve()
    data = trajectory_payload(traj_dir)
    previews = _layer_previews(traj_dir, data)
    payload = json.dumps(data, separators=(",", ":")).encode()
    handler = partial(ViewerHandler, traj_dir=traj_dir, payload=payload, previews=previews)
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    if previews is not None:  # removed with the server
        weakref.finalize(server, shutil.rmtree, previews, True)
    return server


def _layer_previews(traj_dir: Path, data: dict[str, Any]) -> Path | None:
    """Colourised previews of the render's ground-truth layers in a temporary folder (the render
    folder stays as it was published); fills ``data["layers"]``. None without layers."""
    meta = json.loads((traj_dir / "meta.json").read_text())
    layers = list((meta.get("ground_truth") or {}).get("layers") or [])
    if not layers or not data["rendered"]:
        return None
    from .layer_previews import build_previews

    out = Path(tempfile.mkdtemp(prefix="wmforge-view-"))
    try:
        made = build_previews(traj_dir, layers, data["fps"],
                              int((meta.get("settings") or {}).get("gop") or data["fps"]), out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    data["layers"] = {v: {t: f"/layer/{name}" for t, name in m.items()} for v, m in made.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge view", description=__doc__.splitlines()[0])
    ap.add_argument("trajectory", help="a rendered trajectory directory "
                    "(data/renders/<scene>/<level>/<instance>/<traj>/) or a Stage I one")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    args = ap.parse_args(argv)
    try:
        server = make_server(Path(args.trajectory), args.host, args.port)
    except ViewerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    host, port = str(server.server_address[0]), int(server.server_address[1])
    print(f"wmforge view: {Path(args.trajectory).resolve()} at http://{host}:{port}/ "
          "(Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
