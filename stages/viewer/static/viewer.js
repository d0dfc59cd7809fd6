// wmforge view: five synchronized views, the recorded action per frame, a timeline and a 3D plot.
// No dependencies: plain DOM and 2D canvas, so the page works offline.
"use strict";

const ACTION_KEYS = { W: ["W"], A: ["A"], S: ["S"], D: ["D"], WA: ["W", "A"], WD: ["W", "D"],
  SA: ["S", "A"], SD: ["S", "D"], IDLE: [] };
const ACTION_COLORS = { W: "#3d8bd4", A: "#8e5bd4", S: "#d45b5b", D: "#d4a23d", WA: "#5b6fd4",
  WD: "#3dbbb0", SA: "#c05bb0", SD: "#d47a3d", IDLE: "#555b66" };
const VIEW_COLORS = { back: "#ff7f0e", left: "#2ca02c", right: "#d62728", top: "#9467bd",
  fp: "#17becf" };
const EVENT_COLORS = { spawn: "#3dbb6a", escape: "#d4c12a", respawn: "#e0533d" };

const V = {
  data: null, frame: 0, playing: false, ready: false, videos: {}, preview: null, shown: {},
  orbit: { yaw: -0.7, pitch: 0.6, zoom: 1.0 },
};
window.wmforgeViewer = V;

const $ = (id) => document.getElementById(id);
// frame f occupies [f/fps, (f+1)/fps): seek to its middle so rounding never lands on a neighbour
const timeOf = (f) => (f + 0.5) / V.data.fps;
const frameOfTime = (t) => Math.max(0, Math.min(V.data.frames - 1, Math.floor(t * V.data.fps + 1e-6)));

/** The frame a video element is showing (from its clock), or -1 while it is still seeking. */
V.frameOf = (video) => (video.seeking || video.readyState < 2) ? -1 : frameOfTime(video.currentTime);
V.allVideos = () => [...Object.values(V.videos), ...(V.preview ? [V.preview] : [])];

function makeVideo(view, src, cls) {
  const fig = document.createElement("figure");
  fig.className = cls;
  const video = document.createElement("video");
  video.src = src; video.muted = true; video.preload = "auto"; video.playsInline = true;
  video.dataset.view = view;
  const cap = document.createElement("figcaption");
  cap.textContent = view;
  fig.append(video, cap);
  $("videos").append(fig);
  return video;
}

// ---------------------------------------------------------------- ground-truth toggles

/** Show `toggle` ("rgb", "depth", "normals", "ids", "flow") in a view's video element, on the
 * current frame; resolves once the element shows it. */
V.showLayer = (view, toggle) => new Promise((ok, fail) => {
  const v = V.videos[view], d = V.data;
  const src = toggle === "rgb" ? d.videos[view] : (d.layers[view] || {})[toggle];
  if (!v || !src) { fail(new Error(`no ${toggle} for ${view}`)); return; }
  V.shown[view] = toggle;
  document.querySelectorAll(`.toggles[data-view="${view}"] button`).forEach(
    (b) => b.classList.toggle("on", b.dataset.toggle === toggle));
  const wasPlaying = V.playing;
  v.addEventListener("loadeddata", () => {
    v.currentTime = timeOf(V.frame);
    if (wasPlaying) v.play().catch(() => {});
    ok(toggle);
  }, { once: true });
  v.addEventListener("error", () => fail(new Error(`cannot load ${src}`)), { once: true });
  v.src = src;
});

function addToggles(fig, view) {
  const bar = document.createElement("div");
  bar.className = "toggles"; bar.dataset.view = view;
  for (const t of ["rgb", ...Object.keys(V.data.layers[view])]) {
    const b = document.createElement("button");
    b.type = "button"; b.dataset.toggle = t; b.textContent = t === "rgb" ? "RGB" : t;
    b.classList.toggle("on", t === "rgb");
    b.addEventListener("click", () => V.showLayer(view, t).catch((e) => console.error(e)));
    bar.append(b);
  }
  fig.append(bar);
}

function setFrame(f, seek = true) {
  const d = V.data;
  f = Math.max(0, Math.min(d.frames - 1, Math.round(f)));
  V.frame = f;
  $("scrubber").value = String(f);
  $("frame-number").textContent = String(f);
  $("time").textContent = (f / d.fps).toFixed(3) + " s";
  const action = d.action[f];
  $("action-label").textContent = action;
  const on = new Set(ACTION_KEYS[action] || []);
  document.querySelectorAll(".key").forEach((k) => k.classList.toggle("on", on.has(k.dataset.key)));
  $("speed").textContent = d.speed[f].toFixed(2) + " m/s";
  $("grounded").textContent = d.grounded[f] ? "yes" : "no (airborne)";
  $("segment").textContent = String(d.segment[f]);
  if (seek) for (const v of V.allVideos()) v.currentTime = timeOf(f);
  drawTimeline();
  draw3d();
}
V.setFrame = (f) => { pause(); setFrame(f); };

// ---------------------------------------------------------------- playback in sync

function play() {
  if (V.playing || !V.data.rendered) return;
  if (V.frame >= V.data.frames - 1) setFrame(0);
  V.playing = true;
  $("play").textContent = "❚❚ pause";
  for (const v of V.allVideos()) v.play().catch(() => {});
  requestAnimationFrame(tick);
}

function pause() {
  if (!V.playing) return;
  V.playing = false;
  $("play").textContent = "▶ play";
  for (const v of V.allVideos()) v.pause();
  setFrame(V.frame); // snap every video onto the same frame
}

function tick() {
  if (!V.playing) return;
  const master = V.videos.back || V.allVideos()[0];
  const t = master.currentTime;
  for (const v of V.allVideos()) {
    if (v !== master && Math.abs(v.currentTime - t) > 0.5 / V.data.fps) v.currentTime = t;
  }
  setFrame(frameOfTime(t), false);
  if (master.ended) { pause(); return; }
  requestAnimationFrame(tick);
}

// ---------------------------------------------------------------- timeline

function drawTimeline() {
  const c = $("timeline"), d = V.data;
  const w = c.clientWidth; if (c.width !== w) c.width = w;
  const g = c.getContext("2d"), n = d.frames, x = (f) => (f / n) * w, fw = Math.max(1, w / n);
  g.clearRect(0, 0, w, c.height);
  g.font = "10px system-ui"; g.fillStyle = "#8a8f98";
  g.fillText("action", 4, 10); g.fillText("speed", 4, 50); g.fillText("grounded", 4, 88);
  g.fillText("segments · events", 4, 107);
  for (let f = 0; f < n; f++) {
    g.fillStyle = ACTION_COLORS[d.action[f]] || "#888"; g.fillRect(x(f), 13, fw + 0.5, 16);
    g.fillStyle = d.grounded[f] ? "#3dbb6a" : "#e0533d"; g.fillRect(x(f), 91, fw + 0.5, 5);
  }
  const vmax = Math.max(0.5, ...d.speed);
  g.strokeStyle = "#e6e6e6"; g.beginPath();
  for (let f = 0; f < n; f++) { const y = 80 - (d.speed[f] / vmax) * 26; f ? g.lineTo(x(f) + fw / 2, y) : g.moveTo(x(f), y); }
  g.stroke();
  for (const s of d.segments) {
    g.fillStyle = s.segment % 2 ? "#3a3f4a" : "#2a2e36"; g.fillRect(x(s.start), 111, x(s.end + 1) - x(s.start), 18);
  }
  for (const e of d.events) {
    g.fillStyle = EVENT_COLORS[e.event] || "#fff";
    g.beginPath(); g.moveTo(x(e.frame) + fw / 2, 112); g.lineTo(x(e.frame) + fw / 2 - 5, 128); g.lineTo(x(e.frame) + fw / 2 + 5, 128); g.fill();
  }
  g.fillStyle = "#fff"; g.fillRect(x(V.frame) + fw / 2 - 1, 0, 2, c.height);
}

// ---------------------------------------------------------------- 3D plot (orbit, no library)

function bounds() {
  const d = V.data, pts = [...d.pos];
  for (const v of Object.keys(d.cameras)) pts.push(...d.cameras[v].pos);
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (const p of pts) for (let i = 0; i < 3; i++) { lo[i] = Math.min(lo[i], p[i]); hi[i] = Math.max(hi[i], p[i]); }
  const c = lo.map((l, i) => (l + hi[i]) / 2);
  const r = Math.max(1, ...hi.map((h, i) => (h - lo[i]) / 2)) * 1.15;
  return { c, r, ground: lo[2] };
}

function projector(canvas) {
  const { yaw, pitch, zoom } = V.orbit, b = V.bounds;
  const cy = Math.cos(yaw), sy = Math.sin(yaw), cp = Math.cos(pitch), sp = Math.sin(pitch);
  const s = (Math.min(canvas.width, canvas.height) / 2 / b.r) * zoom;
  return (p) => {
    const x = p[0] - b.c[0], y = p[1] - b.c[1], z = p[2] - b.c[2];
    const rx = cy * x - sy * y, ry = sy * x + cy * y; // yaw about +Z
    const up = cp * z - sp * ry, depth = sp * z + cp * ry; // pitch about the screen's x axis
    return [canvas.width / 2 + rx * s, canvas.height / 2 - up * s, depth];
  };
}

function draw3d() {
  const c = $("plot3d"), g = c.getContext("2d"), d = V.data, P = projector(c), f = V.frame, b = V.bounds;
  g.clearRect(0, 0, c.width, c.height);
  g.strokeStyle = "#2c313a"; g.lineWidth = 1; // ground grid at the lowest point
  const step = Math.pow(10, Math.floor(Math.log10(b.r))) / 2;
  for (let k = -b.r; k <= b.r + 1e-9; k += step) {
    for (const [a, e] of [[[b.c[0] + k, b.c[1] - b.r], [b.c[0] + k, b.c[1] + b.r]], [[b.c[0] - b.r, b.c[1] + k], [b.c[0] + b.r, b.c[1] + k]]]) {
      const p = P([a[0], a[1], b.ground]), q = P([e[0], e[1], b.ground]);
      g.beginPath(); g.moveTo(p[0], p[1]); g.lineTo(q[0], q[1]); g.stroke();
    }
  }
  g.lineWidth = 2; // character path, one polyline per segment, bright up to the current frame
  for (const s of d.segments) {
    for (const [a, e, col] of [[s.start, Math.min(s.end, f), "#ffb000"], [Math.max(s.start, f), s.end, "#6b6f78"]]) {
      if (e <= a) continue;
      g.strokeStyle = col; g.beginPath();
      for (let i = a; i <= e; i++) { const p = P(d.pos[i]); i === a ? g.moveTo(p[0], p[1]) : g.lineTo(p[0], p[1]); }
      g.stroke();
    }
  }
  const ch = P(d.pos[f]);
  g.fillStyle = "#ffb000"; g.beginPath(); g.arc(ch[0], ch[1], 5, 0, 2 * Math.PI); g.fill();
  g.font = "11px system-ui";
  for (const v of Object.keys(d.cameras)) { // cameras at the current frame, with view direction
    const cam = d.cameras[v], p = cam.pos[f], fw = cam.fwd[f];
    const len = b.r * 0.18, a = P(p), e = P([p[0] + fw[0] * len, p[1] + fw[1] * len, p[2] + fw[2] * len]);
    g.strokeStyle = g.fillStyle = VIEW_COLORS[v] || "#fff";
    g.beginPath(); g.moveTo(a[0], a[1]); g.lineTo(e[0], e[1]); g.stroke();
    g.beginPath(); g.arc(a[0], a[1], 4, 0, 2 * Math.PI); g.fill();
    g.fillText(v, a[0] + 6, a[1] - 6);
  }
}

function setupOrbit() {
  const c = $("plot3d");
  let drag = null;
  c.addEventListener("pointerdown", (e) => { drag = [e.clientX, e.clientY]; c.setPointerCapture(e.pointerId); });
  c.addEventListener("pointerup", () => { drag = null; });
  c.addEventListener("pointermove", (e) => {
    if (!drag) return;
    V.orbit.yaw += (e.clientX - drag[0]) * 0.01;
    V.orbit.pitch = Math.max(-1.5, Math.min(1.5, V.orbit.pitch + (e.clientY - drag[1]) * 0.01));
    drag = [e.clientX, e.clientY]; draw3d();
  });
  c.addEventListener("wheel", (e) => { e.preventDefault(); V.orbit.zoom *= e.deltaY < 0 ? 1.1 : 1 / 1.1; draw3d(); }, { passive: false });
}

// ---------------------------------------------------------------- start

async function init() {
  const d = await (await fetch("/api/trajectory")).json();
  V.data = d; V.bounds = bounds();
  document.title = `wmforge view · ${d.name}`;
  $("title").textContent = `${d.level_id} · ${d.character_id} · ${d.name} · ${d.frames} frames @ ${d.fps} fps` +
    (d.size ? ` · ${d.size[0]}×${d.size[1]}` : "") + (d.rendered ? "" : " · not rendered (plots only)");
  $("frame-count").textContent = String(d.frames - 1);
  $("scrubber").max = String(d.frames - 1);
  for (const [view, src] of Object.entries(d.videos)) {
    V.videos[view] = makeVideo(view, src, "view");
    V.shown[view] = "rgb";
    if (d.layers && d.layers[view]) addToggles(V.videos[view].parentElement, view);
  }
  if (d.preview) V.preview = makeVideo("preview", d.preview, "preview");
  $("show-preview").disabled = !d.preview;
  $("legend").innerHTML = Object.entries(VIEW_COLORS).map(([v, c]) => `<span><i style="background:${c}"></i>${v}</span>`).join("") +
    `<span><i style="background:#ffb000"></i>character</span>`;
  $("action-legend").innerHTML = "actions: " + Object.entries(ACTION_COLORS).map(([a, c]) => `<span><i style="background:${c}"></i>${a}</span>`).join("");
  for (const e of d.events) {
    const btn = document.createElement("button");
    btn.type = "button"; btn.className = e.event; btn.dataset.frame = String(e.frame);
    btn.textContent = `${e.event} @ ${e.frame}`;
    btn.addEventListener("click", () => V.setFrame(e.frame));
    $("events").append(btn);
  }
  $("scrubber").addEventListener("input", (e) => V.setFrame(Number(e.target.value)));
  $("play").addEventListener("click", () => (V.playing ? pause() : play()));
  $("prev").addEventListener("click", () => V.setFrame(V.frame - 1));
  $("next").addEventListener("click", () => V.setFrame(V.frame + 1));
  $("show-preview").addEventListener("change", (e) => $("videos").classList.toggle("show-preview", e.target.checked));
  $("timeline").addEventListener("click", (e) => {
    const r = e.target.getBoundingClientRect();
    V.setFrame(Math.floor(((e.clientX - r.left) / r.width) * d.frames));
  });
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" && e.target.type !== "range" && e.target.type !== "checkbox") return;
    if (e.key === " ") { e.preventDefault(); V.playing ? pause() : play(); }
    else if (e.key === "," || e.key === "ArrowLeft") { e.preventDefault(); V.setFrame(V.frame - 1); }
    else if (e.key === "." || e.key === "ArrowRight") { e.preventDefault(); V.setFrame(V.frame + 1); }
  });
  window.addEventListener("resize", drawTimeline);
  setupOrbit();
  await Promise.all(V.allVideos().map((v) => new Promise((ok) => {
    if (v.readyState >= 1) ok(); else { v.addEventListener("loadedmetadata", ok, { once: true }); v.addEventListener("error", ok, { once: true }); }
  })));
  setFrame(0);
  V.ready = true;
}

init().catch((err) => { $("title").textContent = "error: " + err; console.error(err); });
