"""Curation (paper §4.2): renderability screening, visual-quality scoring and level selection
(config groups ``screen``, ``score``, ``select``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ScreenConfig:
    # renderability screening (§4.2): clips per candidate level, each this long, s
    clips: int = 5
    clip_s: float = 10.0
    # screening render: preset (or explicit size) and spatial samples (1: no anti-aliasing)
    preset: str = "540p"
    width: int = 0
    height: int = 0
    spatial_samples: int = 1
    # characters to screen with (inventory ids of the library being screened; a missing one
    # stops the stage at start-up); empty: every usable walking character of that library
    characters: list[str] = field(default_factory=list)
    # added to the global seed, so screening clips differ from production trajectories
    seed_offset: int = 1000
    # an engine process (Stage I or II of one level) running longer than this fails, s
    timeout_s: float = 900.0
    # hovering: walking frames out of ground contact above this share, or the capsule bottom
    # more than hover_gap_m above the visible ground below in more than hover_gap_share of frames
    hover_airborne_share: float = 0.5
    hover_gap_m: float = 0.25
    hover_gap_share: float = 0.3
    # interpenetration: capsule overlapping visible geometry by more than penetration_tol_m in
    # more than penetration_share of frames
    penetration_tol_m: float = 0.05
    penetration_share: float = 0.1
    # a level fails a detector that trips on at least this share of its clips
    reject_clip_share: float = 0.4
    # the file of manual verdicts that override the automatic ones (relative to the repo root)
    review_file: str = "review/screen.yaml"
    # contact-sheet tile width, px (at least 320: frames are scaled to it, reasons written on)
    sheet_tile_w: int = 480


@dataclass
class ScoreConfig:
    # visual quality (§4.2): clips per renderable level, each this long, s
    clips: int = 20
    clip_s: float = 10.0
    preset: str = "540p"
    width: int = 0
    height: int = 0
    spatial_samples: int = 1
    seed_offset: int = 2000
    timeout_s: float = 900.0
    # aesthetic scorer: "brisque" (embedded, ships its model; lower is better) or "laion"
    # (CLIP ViT-L/14 + the LAION improved aesthetic MLP; higher is better, about 1..10)
    scorer: str = "brisque"
    # frames sampled evenly from every view video (SpatialVID samples 3)
    frames_per_view: int = 8
    # "keyframes": at evenly spaced times, the keyframe at or before each (GOP starts, 1 s
    # apart); each reached by a seek and decoded alone, ~1/30 of a full decode; two times in
    # one GOP fall back to "even"; "even": spread over all frames, first and last included
    sample_at: str = "keyframes"
    # processes decoding (and, for BRISQUE, scoring) views; 0: one per CPU, 1: no pool
    decode_workers: int = 0
    # LAION weights: a local directory holding clip_weights_file and mlp_file
    laion_weights_dir: str = "models/laion-aesthetic"
    clip_weights_file: str = "open_clip_pytorch_model.bin"
    mlp_file: str = "sac+logos+ava1-l14-linearMSE.pth"
    # fetch missing weights from the hub (machines with internet only)
    allow_download: bool = False
    # images per batch; "auto" device: cuda when there is one
    batch_size: int = 32
    device: str = "auto"
    # LAION: "auto" = fp16 on CUDA (weights fp16, LayerNorm fp32), fp32 elsewhere; "bf16";
    # "fp8" = the transformer's linear layers in float8 e4m3 (Ada/Hopper GPUs), the rest
    # bf16: the tower 1.18x fp16's rate on the H200, embeddings within cosine 0.998 of fp32
    # on random weights (not checked on the real ones: README, Benchmarks)
    precision: str = "auto"
    # LAION: torch.compile the image tower (fuses the LayerNorms and activations between the
    # matmuls; ~1 min once per process); "auto" = on CUDA
    compile: str = "auto"


@dataclass
class SelectConfig:
    # a view passes when its aesthetic score clears the scorer's bar and its mean luma is
    # strictly between lum_min and lum_max (0-255)
    aes_min: float = 5.5  # LAION units (higher is better)
    brisque_max: float = 45.0  # BRISQUE units (lower is better)
    lum_min: float = 25.0
    lum_max: float = 140.0
    # a level is retained when more than this share of its sampled views pass
    level_pass_share: float = 0.25
