"""Optional VLM captions through an OpenAI-compatible chat endpoint (notes §4.2, §4.6).

One key frame every ``keyframe_s`` seconds goes to the model with the facts the engine recorded
for that stretch (so the model describes what it sees without contradicting the labels); frames
between key frames reuse the key frame's caption. Answers are cached on disk by a hash of the
request, so a re-run never asks twice. Timeouts and bounded retries (connection errors, 429,
5xx); anything else fails at once with the endpoint and the reason.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

PROMPT = ("Describe this frame of a video clip in dense detail, as one paragraph. Focus on the "
          "environment (lighting, textures, weather), the main character (appearance, "
          "movement) and the camera. Facts recorded by the game engine for this moment, which "
          "you must not contradict: {facts}")


class VLMError(RuntimeError):
    """The endpoint could not give a caption (names the URL and the cause)."""


class VLMClient:
    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float,
                 max_retries: int, cache_dir: Path, max_tokens: int = 300,
                 sleep=time.sleep):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.timeout_s, self.max_retries, self.max_tokens = timeout_s, max_retries, max_tokens
        self.cache_dir = Path(cache_dir)
        self.sleep = sleep
        self.requests_sent = 0
        self.cache_hits = 0

    def _request_body(self, image_jpeg: bytes, facts: str) -> dict[str, Any]:
        url = "data:image/jpeg;base64," + base64.b64encode(image_jpeg).decode()
        return {"model": self.model, "temperature": 0, "max_tokens": self.max_tokens,
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": PROMPT.format(facts=facts)},
                    {"type": "image_url", "image_url": {"url": url}}]}]}

    def caption(self, image_jpeg: bytes, facts: str) -> str:
        body = self._request_body(image_jpeg, facts)
        raw = json.dumps(body, sort_keys=True).encode()
        key = hashlib.sha256(self.url.encode() + b"\0" + raw).hexdigest()
        cached = self.cache_dir / key[:2] / f"{key}.json"
        if cached.is_file():
            self.cache_hits += 1
            return str(json.loads(cached.read_text())["caption"])
        text = self._post(raw)
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_text(json.dumps({"caption": text, "model": self.model}))
        os.replace(tmp, cached)
        return text

    def _post(self, raw: bytes) -> str:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)))
            req = urllib.request.Request(self.url, data=raw, headers=headers, method="POST")
            self.requests_sent += 1
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                    data = json.loads(r.read())
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code} {exc.reason}"
                if exc.code == 429 or exc.code >= 500:
                    continue
                raise VLMError(f"VLM endpoint {self.url} refused the request: {last}: "
                               f"{exc.read()[:300]!r}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
            except json.JSONDecodeError as exc:
                raise VLMError(f"VLM endpoint {self.url} answered with non-JSON: {exc}") from None
            try:
                return str(data["choices"][0]["message"]["content"]).strip()
            except (KeyError, IndexError, TypeError):
                raise VLMError(f"VLM endpoint {self.url} answered without "
                               f"choices[0].message.content: {str(data)[:300]}") from None
        raise VLMError(f"VLM endpoint {self.url} unreachable after {self.max_retries + 1} "
                       f"attempts ({last}); check caption.vlm.base_url, or caption without it: "
                       "-S caption.backend=grounded")


def keyframes(start: int, end: int, fps: int, every_s: float) -> list[int]:
    step = max(1, round(every_s * fps))
    return list(range(start, end, step))


def read_jpegs(video: Path, frames: list[int], quality: int = 90) -> dict[int, bytes]:
    """The listed frames of a video as JPEG bytes (decoded in one pass)."""
    import av
    from PIL import Image

    want = set(frames)
    out: dict[int, bytes] = {}
    with av.open(str(video)) as c:
        for i, fr in enumerate(c.decode(video=0)):
            if i in want:
                buf = io.BytesIO()
                Image.fromarray(fr.to_ndarray(format="rgb24")).save(buf, "JPEG", quality=quality)
                out[i] = buf.getvalue()
                if len(out) == len(want):
                    break
    return out


def vlm_keyframe_captions(client: VLMClient, video: Path, start: int, end: int, fps: int,
                          every_s: float, phrases: list[dict]) -> list[dict]:
    """``[{frame, t, caption}]`` for the key frames of [start, end); frame numbers are relative
    to the clip. ``phrases`` are the grounded motion phrases (the facts for each key frame)."""
    kfs = keyframes(start, end, fps, every_s)
    jpegs = read_jpegs(video, kfs)
    out = []
    for f in kfs:
        facts = next((p["phrase"] for p in phrases if p["frame"] <= f - start < p["end"]), "")
        out.append({"frame": f - start, "t": round((f - start) / fps, 3),
                    "caption": client.caption(jpegs[f], facts)})
    return out
