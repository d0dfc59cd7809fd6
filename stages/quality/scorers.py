"""Visual-quality scorers (paper §4.2): luminance, and an aesthetic score from one of two
backends, each in its own units.

- ``laion`` (production): the LAION improved aesthetic predictor as SpatialVID uses it — the
  CLIP ViT-L/14 image embedding with OpenAI weights (open_clip ``ViT-L-14-quickgelu``),
  L2-normalised, then an MLP 768→1024→128→64→16→1 (checkpoint keys ``layers.0``, ``layers.2``,
  ``layers.4``, ``layers.6``, ``layers.7``). Higher is better (about 1–10). Batched, on the GPU
  when there is one.
- ``brisque`` (embedded default, no downloaded weights): BRISQUE from the ``brisque`` package,
  whose model ships in its wheel. Lower is better (about 0–100).

Luminance: BT.709 luma 0.2126 R + 0.7152 G + 0.0722 B on the 0–255 encoded frame, mean over
pixels.
"""

from __future__ import annotations

import contextlib
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

BT709 = np.array([0.2126, 0.7152, 0.0722])
LAION_ARCH = "ViT-L-14-quickgelu"
MLP_KEYS = ("layers.0", "layers.2", "layers.4", "layers.6", "layers.7")
STAGE_THREADS = 4  # threads copying a batch into pinned memory (CUDA)


class ScorerError(RuntimeError):
    """A scorer cannot run (names the missing file or package and what to do)."""


def luminance(rgb: np.ndarray) -> float:
    """Mean BT.709 luma of one frame. Luma is linear in R, G, B, so its mean is the weighted
    mean of the channel means; the channel sums are exact integers, so the figure is the same
    on every machine, to the last bit."""
    sums = np.array([float(rgb[..., k].sum(dtype=np.uint64)) for k in range(3)])
    return float(sums @ BT709 / (rgb.shape[0] * rgb.shape[1]))


def _even(count: int, n: int) -> list[int]:
    """``n`` indices spread evenly over ``range(count)``, first and last included."""
    return sorted({round(i * (count - 1) / max(1, n - 1)) for i in range(min(n, count))})


def sample_frames(video: Path, n: int, at: str = "keyframes") -> list[np.ndarray]:
    """``n`` RGB frames spread evenly over a video.

    ``at="keyframes"``: at ``n`` evenly spaced times, first and last included, each frame is
    the keyframe at or before that time (GOP starts, 1 s apart in Stage II videos). Each is
    reached by a seek and decoded alone: ~1/30 of a full decode and a few demuxed packets
    rather than all of them (Python-side demuxing holds the GIL, and views are decoded by
    threads). When two times fall in one GOP (fewer keyframes than ``n``) or the container
    gives no duration, it falls back to ``"even"``. ``at="even"``: spread over all frames,
    first and last included, decoded up to the last one wanted.
    """
    import av

    if at not in ("keyframes", "even"):
        raise ValueError(f"score.sample_at: expected 'keyframes' or 'even', got {at!r}")
    if at == "keyframes":
        keys = _keyframes_by_seek(video, n)
        if keys is not None:
            return keys
    with _open(video) as c:
        total = sum(1 for p in c.demux(_video_stream(c, video)) if p.size)
    if total == 0:
        raise ValueError(f"{video}: no video packets")
    want = _even(total, n)
    out: list[np.ndarray] = []
    with av.open(str(video)) as c:
        for i, fr in enumerate(c.decode(video=0)):
            if i == want[len(out)]:
                out.append(fr.to_ndarray(format="rgb24"))
                if len(out) == len(want):
                    return out
    raise ValueError(f"{video}: decodes to fewer frames than its {total} packets "
                     f"(frame {want[len(out)]} missing)")


def _open(video: Path) -> Any:
    """The container, opened without decoding a frame: by default FFmpeg's stream probing
    decodes the first frame (a keyframe: as long as each sampled one, 10 ms at 540p).
    PyAV (18 and 19) hands ``options`` to the probe's decoders only; the decoder used after
    is made from the stream's parameters (the tests compare the frames with a plain
    decode's, to the bit)."""
    import av

    return av.open(str(video), options={"skip_frame": "all"})


def _video_stream(container: Any, video: Path) -> Any:
    if not container.streams.video:
        raise ValueError(f"{video}: no video stream")
    return container.streams.video[0]


def _keyframes_by_seek(video: Path, n: int) -> list[np.ndarray] | None:
    """The keyframes at or before ``n`` evenly spaced times; None when they are not ``n``
    distinct keyframes (the caller then decodes evenly spaced frames instead)."""

    with _open(video) as c:
        st = _video_stream(c, video)
        if not st.duration or st.duration <= 0:
            return None
        st.codec_context.thread_count = 1  # views are decoded in parallel, not frames
        start, out, seen = int(st.start_time or 0), [], set()
        for i in range(n):
            c.seek(start + (st.duration - 1) * i // max(1, n - 1), stream=st, backward=True,
                   any_frame=False)
            pkt = next((p for p in c.demux(st) if p.size), None)
            if pkt is None or not pkt.is_keyframe or pkt.pts in seen:
                return None
            seen.add(pkt.pts)
            # decode the keyframe alone: send it, then drain (the decoder holds frames back
            # for reordering); the next seek resets the decoder
            frames = [*pkt.decode(), *st.codec_context.decode(None)]
            if not frames:
                raise ValueError(f"{video}: keyframe at pts {pkt.pts} does not decode")
            out.append(frames[0].to_ndarray(format="rgb24"))
        return out


class BrisqueScorer:
    name = "brisque"
    higher_is_better = False
    # per frame on the CPU: scored in the decode workers, next to the decoding
    batched = False

    def __init__(self) -> None:
        try:
            from brisque import BRISQUE
        except ImportError as exc:
            raise ScorerError(f"score.scorer=brisque needs the 'brisque' package and OpenCV "
                              f"(pip install brisque opencv-python-headless): {exc}") from None
        self._b = BRISQUE(url=False)

    def __reduce__(self):
        # the libsvm model behind BRISQUE is a ctypes object: a copy sent to a decode worker
        # loads the model again there
        return (BrisqueScorer, ())

    def score(self, images: Sequence[np.ndarray]) -> list[float]:
        return [self.score_one(img) for img in images]

    def score_one(self, img: np.ndarray) -> float:
        """BRISQUE.score, step by step: with current SciPy one of its 36 features comes back
        as a one-element array, which the package's own scaling cannot convert; flattening
        the features first gives the package's model exactly the numbers it expects."""
        import cv2
        import skimage.color

        b = self._b
        gray = skimage.color.rgb2gray(np.ascontiguousarray(img[..., :3]))
        f1 = b.calculate_brisque_features(gray, kernel_size=7, sigma=7 / 6)
        half = cv2.resize(gray, None, fx=1 / 2, fy=1 / 2, interpolation=cv2.INTER_CUBIC)
        f2 = b.calculate_brisque_features(half, kernel_size=7, sigma=7 / 6)
        feats = np.array([float(np.asarray(f, dtype=np.float64).reshape(-1)[0])
                          for f in np.concatenate((f1, f2))])
        return float(b.calculate_image_quality_score(feats))


def laion_mlp() -> Any:
    """The LAION improved-aesthetic MLP with its checkpoint's module layout."""
    import torch.nn as nn

    class AestheticMLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.Sequential(
                nn.Linear(768, 1024), nn.Dropout(0.2), nn.Linear(1024, 128), nn.Dropout(0.2),
                nn.Linear(128, 64), nn.Dropout(0.1), nn.Linear(64, 16), nn.Linear(16, 1))

        def forward(self, x):
            return self.layers(x)

    return AestheticMLP()


def resize_matrix(n_in: int, n_out: int, start: int, keep: int = 224) -> Any:
    """torch's antialiased bicubic resize of a length-``n_in`` signal to ``n_out`` samples,
    output samples ``start .. start + keep`` (the centre crop), as a (keep, n_in) matrix:
    the resize is linear, so the matrix is the resize of the identity (in float64; 2-D
    antialiased bicubic is separable, so ``R_h @ image @ R_w.T`` is F.interpolate's result)."""
    import torch
    import torch.nn.functional as F

    eye = torch.eye(n_in, dtype=torch.float64).view(n_in, 1, 1, n_in)
    w = F.interpolate(eye, size=(1, n_out), mode="bicubic", antialias=True,
                      align_corners=False).view(n_in, n_out)
    return w.t()[start:start + keep].float()


def _mmap_loads(path: Path | None) -> Any:
    """torch.load memory-maps checkpoints inside this context (torch >= 2.6's serialization
    config) where ``path`` is in torch's zip format; a no-op for a legacy-format file (which
    cannot be mapped), for a download (``path`` None) and where the config is missing."""
    if path is None or not zipfile.is_zipfile(path):
        return contextlib.nullcontext()
    try:
        from torch.utils.serialization import config
    except ImportError:
        return contextlib.nullcontext()
    return config.patch("load.mmap", True)  # type: ignore[attr-defined]  # set at import


class LaionAestheticScorer:
    name = "laion"
    higher_is_better = True

    batched = True

    def __init__(self, weights_dir: Path, clip_file: str, mlp_file: str, device: str = "auto",
                 batch_size: int = 32, allow_download: bool = False, precision: str = "auto",
                 compile: str | bool = "auto"):
        try:
            import open_clip
            import torch
        except ImportError as exc:
            raise ScorerError("score.scorer=laion needs torch and open_clip "
                              f"(pip install -e '.[ml]'): {exc}") from None
        weights_dir = Path(weights_dir)
        clip_path, mlp_path = weights_dir / clip_file, weights_dir / mlp_file
        missing = [p for p in (clip_path, mlp_path) if not p.is_file()]
        if missing and not allow_download:
            raise ScorerError(
                "LAION aesthetic weights missing: " + ", ".join(str(p) for p in missing) +
                f". Put the open_clip {LAION_ARCH} OpenAI weights at {clip_path} (for example "
                "open_clip_pytorch_model.bin from the hub repo timm/vit_large_patch14_clip_224."
                f"openai) and the MLP checkpoint at {mlp_path} (sac+logos+ava1-l14-linearMSE.pth "
                "from christophschuhmann/improved-aesthetic-predictor), or set "
                "score.allow_download=true on a machine with internet access.")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        cuda = str(device).startswith("cuda")
        if precision == "auto":
            precision = "fp16" if cuda else "fp32"
        if precision not in ("fp32", "fp16", "bf16", "fp8") or (
                precision in ("fp16", "bf16") and not cuda):
            raise ScorerError(f"score.precision: expected auto, fp32, fp8 or (on CUDA) fp16 "
                              f"or bf16, got {precision!r} on {device}")
        compile_on = {"auto": cuda, "true": True, "false": False}.get(str(compile).lower())
        if compile_on is None:
            raise ScorerError(f"score.compile: expected auto, true or false, got {compile!r}")
        from .fast_clip import accelerate_tower, fp8_supported

        if precision == "fp8" and (why := fp8_supported(device)):
            raise ScorerError(f"score.precision=fp8: {why}; use fp16 or bf16")
        self.device, self.batch_size, self.precision = device, batch_size, precision
        self.compiled = compile_on
        self._resize: dict[tuple, tuple] = {}
        self._stager: ThreadPoolExecutor | None = None
        # the MLP first: a wrong file fails at once, not after the 1.7 GB tower has loaded
        if mlp_path.is_file():
            state = torch.load(mlp_path, map_location="cpu", weights_only=True)
        else:  # allow_download: the hub copy SpatialVID uses
            from huggingface_hub import hf_hub_download

            state = torch.load(hf_hub_download("camenduru/improved-aesthetic-predictor",
                                               mlp_file), map_location="cpu", weights_only=True)
        state = state.get("state_dict", state)
        got = sorted({k.rsplit(".", 1)[0] for k in state})
        if got != sorted(MLP_KEYS):
            raise ScorerError(f"{mlp_path}: expected MLP keys {list(MLP_KEYS)} (.weight/.bias), "
                              f"found {got}")
        mlp = laion_mlp()
        mlp.load_state_dict(state)
        local = clip_path if clip_path.is_file() else None
        pretrained = str(local) if local is not None else "openai"
        # low-precision weights (open_clip keeps LayerNorm in fp32) rather than autocast; the
        # 1.7 GB checkpoint memory-mapped, not read into a second copy (3-7 s instead of 18 s
        # on this project's 2-core CI machine, and 1.7 GB less at the peak)
        with _mmap_loads(local):
            model, _, preprocess = open_clip.create_model_and_transforms(
                LAION_ARCH, pretrained=pretrained, device=device,
                precision="bf16" if precision == "fp8" else precision)
        model.eval()
        if cuda or precision == "fp8":  # flash attention, fusable blocks, fp8 matmuls
            accelerate_tower(model.visual, fp8=precision == "fp8")
        if compile_on:
            model.visual = torch.compile(model.visual)
        self.model, self.preprocess = model, preprocess
        self.mlp = mlp.to(device).eval()

    def _gpu_batch(self, images: Sequence[np.ndarray]) -> Any:
        """open_clip's preprocessing (shortest side to 224, bicubic, antialiased; centre crop;
        OpenAI mean/std) done on the GPU: PIL on the CPU cannot feed a GPU at 1,000 views/s.
        The resize and crop are two matrix products (``resize_matrix``), on the tensor cores
        in fp16 (fp32 for an fp32 model)."""
        import torch
        from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

        h, w = images[0].shape[:2]
        mm = torch.float32 if self.precision == "fp32" else torch.float16
        if (h, w, mm) not in self._resize:
            s = 224 / min(h, w)
            oh, ow = max(224, round(h * s)), max(224, round(w * s))
            top, left = (oh - 224) // 2, (ow - 224) // 2
            mean = torch.tensor(OPENAI_DATASET_MEAN, device=self.device).view(1, 3, 1, 1)
            std = torch.tensor(OPENAI_DATASET_STD, device=self.device).view(1, 3, 1, 1)
            self._resize[(h, w, mm)] = (
                resize_matrix(h, oh, top).to(self.device, mm),
                resize_matrix(w, ow, left).t().to(self.device, mm), mean * 255, std * 255)
        # a pinned staging buffer makes the upload asynchronous (the caching host allocator
        # keeps a buffer until its copy is done), so the next batch is stacked meanwhile
        cuda = str(self.device).startswith("cuda")
        host = torch.empty((len(images), *images[0].shape), dtype=torch.uint8, pin_memory=cuda)
        hn = host.numpy()
        if len(images) >= 4 * STAGE_THREADS:
            # the copy into pinned memory was the scorer's bound on the H200 (67 ms for 256
            # frames at 540p in one thread, against 75 ms for the fp8 tower): a few threads
            # (numpy releases the GIL while copying) each copy every k-th frame
            if self._stager is None:
                self._stager = ThreadPoolExecutor(STAGE_THREADS, "score-stage")

            def fill(t: int) -> None:
                for k in range(t, len(images), STAGE_THREADS):
                    hn[k] = images[k]

            list(self._stager.map(fill, range(STAGE_THREADS)))
        else:
            np.stack(images, out=hn)
        return self._preprocess(host.to(self.device, non_blocking=True), mm)

    def _preprocess(self, x: Any, mm: Any) -> Any:
        """(B, H, W, 3) uint8 on the device → the tower's normalised (B, 3, 224, 224)."""
        import torch

        rows, cols, mean, std = self._resize[(x.shape[1], x.shape[2], mm)]
        x = x.permute(0, 3, 1, 2).to(mm, memory_format=torch.contiguous_format)
        x = (rows @ (x @ cols)).float().clamp_(0, 255)  # (B, 3, 224, 224), 0..255
        return ((x - mean) / std).to(self.dtype)

    @property
    def dtype(self) -> Any:
        import torch

        return {"fp16": torch.float16, "bf16": torch.bfloat16,
                "fp8": torch.bfloat16}.get(self.precision, torch.float32)

    def embed(self, images: Sequence[np.ndarray]) -> Any:
        import torch
        from PIL import Image

        cuda = str(self.device).startswith("cuda")
        feats = []
        with torch.inference_mode():
            for i in range(0, len(images), self.batch_size):
                chunk = images[i:i + self.batch_size]
                if cuda and len({im.shape for im in chunk}) == 1:
                    batch = self._gpu_batch(chunk)
                else:
                    batch = torch.stack([self.preprocess(Image.fromarray(im))
                                         for im in chunk]).to(self.device, self.dtype)
                n = len(batch)
                if self.compiled and n < self.batch_size:
                    # one input shape: no recompilation for a short last batch (rows are
                    # independent, so the padding changes no other frame's numbers)
                    batch = torch.cat([batch, batch[-1:].expand(self.batch_size - n,
                                                                *batch.shape[1:])])
                f = self.model.encode_image(batch)[:n].float()
                feats.append(f / f.norm(dim=-1, keepdim=True))
        return torch.cat(feats)

    def score(self, images: Sequence[np.ndarray]) -> list[float]:
        import torch

        if not images:
            return []
        with torch.inference_mode():
            return [float(v) for v in self.mlp(self.embed(images)).squeeze(-1).cpu()]


def make_scorer(scfg: Any) -> BrisqueScorer | LaionAestheticScorer:
    if scfg.scorer == "brisque":
        return BrisqueScorer()
    return LaionAestheticScorer(Path(scfg.laion_weights_dir), scfg.clip_weights_file,
                                scfg.mlp_file, scfg.device, scfg.batch_size,
                                scfg.allow_download, scfg.precision, scfg.compile)
