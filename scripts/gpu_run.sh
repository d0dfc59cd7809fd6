#!/usr/bin/env bash
# The GPU runs of the node-runner issue, on the lent NVIDIA H200 (device tool; not part of CI).
# The device machine has Python 3.12 with torch, pandas, pyarrow, pynvml and pytest but no
# internet: the rest travels in .h200/ (site.tar.xz: panda3d 1.10.16 cp312 without its unused
# display/audio/ffmpeg plugins, av 19.0.2, hydra-core, omegaconf, antlr4, panda3d-gltf,
# simplepbr; whl/: open_clip_torch, ftfy, wcwidth) and .gl/ (Debian's GL loader packages).
# Usage (on the device, in the repo root): bash scripts/gpu_run.sh
#   {tests|node|multi|harness|variants|det|compute|gt|raster|look|readback|merged|frame|trace|step|final|sync|mpsgl|glyuv|cstart|kernel|ab|fig} [slots]; variants: VARIANTS=base,const_fs,...
#   (tests/benchmarks/look_variants.py) FRAMES=45
# det: N=50 renders of the same four trajectories (scripts/render_determinism.py, slots at once,
# no burners; MAXS caps the seconds) and the distinct-output count (#32 item 7)
# multi: slots on every GPU of the host, one renderer killed with kill -9 mid-run (issue: multi-GPU
# node run; `bash scripts/gpu_run.sh multi 4,8` on an nvidia-h200-x2 or -x4 machine)
# raster: the compute backend's GPU tests, then its G-buffer at 720p x 8 and x 1 with the depth
# pass in torch ops and in the Triton kernel (the latter with a torch.profiler table)
# look: the compute backend against GL at 720p x 8 on one trajectory (PSNR, luma, gate, same
# bytes twice; a side-by-side PNG), then bench_render of BACKENDS at the given slot counts
# readback: the GL read-back on its own (render.readback sync vs pbo, 720p x 8), then
# bench_render with each at the given slot counts
# gt: ground-truth layers' cost (issue #33): five-view minutes per GPU-hour with every layer off,
# the defaults and every layer on, at 720p x 8 and 540p x 1, GT_PROCS renderers side by side
# (default 8), and MB per five-view minute per layer
set -euo pipefail
what=${1:-tests}
slots=${2:-1,4,8,16}
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /tmp/site
[ -d /tmp/site/panda3d ] || tar xJf .h200/site.tar.xz -C /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .h200/whl/*.whl \
  2>/dev/null || true
# py-spy 0.4.3's static binary, xz-packed (the transfer's 64 MiB)
[ -f .h200/bin/py-spy.xz ] && xz -dc .h200/bin/py-spy.xz > /tmp/py-spy && chmod +x /tmp/py-spy
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 DVC_NO_ANALYTICS=1
if ! python3 -c "from stages.engine.device import egl_devices as e; import sys; sys.exit(0 if any(x is not None for x in e()) else 1)"; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv
python3 -m stages.cluster.node_cli slots
case "$what" in
  tests) python3 -m pytest -p no:cacheprovider -q -m gpu tests/test_gpu.py 2>&1 | tee "$OUT/gpu_tests.log" ;;
  node) python3 tests/benchmarks/bench_node.py --preset 720p --spatial 8 --frames 300 \
          --slots "$slots" --json "$OUT/bench_node.json" 2>&1 | tee "$OUT/bench_node.log" ;;
  multi) python3 tests/benchmarks/bench_node.py --all-gpus --kill-one --preset 720p --spatial 8 \
          --frames 300 --slots "$slots" --json "$OUT/bench_node_multi.json" 2>&1 \
          | tee "$OUT/bench_node_multi.log" ;;
  harness) python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 --frames 300 \
             --procs "$slots" --json "$OUT/bench_render.json" 2>&1 | tee "$OUT/bench_render.log" ;;
  variants) python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
              --frames "${FRAMES:-45}" --procs "$slots" --variants "${VARIANTS:-base}" \
              --json "$OUT/bench_variants.json" 2>&1 | tee "$OUT/bench_variants.log" ;;
  det) python3 scripts/render_determinism.py /tmp/det "${N:-50}" --slots "$slots" --burners 0 \
         --max-seconds "${MAXS:-0}" 2>&1 | tee "$OUT/determinism.log" ;;
  compute) python3 tests/benchmarks/bench_compute_vs_fragment.py --size 10240x3600 --frames 20 \
             --json "$OUT/bench_compute.json" 2>&1 | tee "$OUT/bench_compute.log" ;;
  raster) python3 -m pytest -p no:cacheprovider -q -m gpu tests/engine/compute/ 2>&1 \
            | tee "$OUT/gpu_compute_tests.log"
          cfgs=("8 torch off" "8 triton off" "8 triton on" "1 triton off" "1 triton on")
          [ -n "${RASTER_CFGS:-}" ] && IFS=, read -ra cfgs <<<"$RASTER_CFGS"
          for cfg in "${cfgs[@]}"; do
            set -- $cfg
            python3 tests/benchmarks/bench_compute_raster.py --device cuda --size 1280x720 \
              --spatial "$1" --kernel "$2" --compile "$3" --frames "${FRAMES:-5}" \
              $([ "$2" = triton ] && echo --profile) \
              2>&1 | grep -v egldisplay | tee "$OUT/bench_raster_x$1_$2_$3.log"
          done
          # the whole Stage II per backend (renderer, lighting, resolve, encoder), if time is left
          [ -n "${RENDER_S:-}" ] && timeout "$RENDER_S" python3 tests/benchmarks/bench_render.py \
            --preset 720p --spatial 8 --frames "${RENDER_FRAMES:-30}" --procs "${RENDER_PROCS:-1}" \
            --backend gl,compute --json "$OUT/bench_render_backends.json" 2>&1 \
            | grep -v egldisplay | tee "$OUT/bench_render_backends.log" || true ;;
  look) python3 tests/benchmarks/compare_backends.py --size 1280x720 --spatial 8 \
          --frames "${FRAMES:-30}" --out "$OUT" 2>&1 | grep -v "egldisplay\|glgsg" \
          | tee "$OUT/compare_backends.log"
        python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
          --frames "${RENDER_FRAMES:-60}" --procs "$slots" --backend "${BACKENDS:-compute}" \
          --json "$OUT/bench_render_backends.json" 2>&1 | grep -v egldisplay \
          | tee "$OUT/bench_render_backends.log" ;;
  readback) python3 tests/benchmarks/bench_gl_readback.py --width 1280 --height 720 --spatial 8 \
              --frames "${FRAMES:-60}" --modes sync,pbo,sync,pbo --encode --gpu 0 \
              --json "$OUT/bench_gl_readback.json" 2>&1 | grep -v egldisplay \
              | tee "$OUT/bench_gl_readback.log"
            python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
              --frames "${RENDER_FRAMES:-60}" --procs "$slots" --readback sync,pbo \
              --json "$OUT/bench_render_readback.json" 2>&1 | grep -v egldisplay \
              | tee "$OUT/bench_render_readback.log" ;;
  merged) # issue #30, shading once per pixel and triangle: the compute tests on the GPU (and
          # the gpu-marked device-fault drill), the host's x264 ceiling, then Stage II at 720p
          # x 8 with GL (pbo), compute pixel and compute sample side by side
    timeout "${TEST_S:-170}" python3 -m pytest -p no:cacheprovider -q -m "gpu or not gpu" \
      tests/engine/compute/test_merged.py \
      tests/test_gpu.py::test_real_cuda_oom_and_device_assert_through_the_node_runner 2>&1 \
      | grep -v "egldisplay\|glgsg" | tee "$OUT/gpu_merged_tests.log" || true
    timeout 120 python3 tests/benchmarks/bench_x264_ceiling.py --streams 1,16 \
      --presets veryfast,ultrafast --frames 300 --json "$OUT/x264_ceiling.json" 2>&1 \
      | tee "$OUT/x264_ceiling.log" || true
    timeout "${R1_S:-150}" python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
      --frames "${RENDER_FRAMES:-120}" --procs 1 --backend gl,compute:pixel,compute:sample \
      --readback pbo --json "$OUT/bench_render_1.json" 2>&1 | grep -v "egldisplay\|glgsg" \
      | tee "$OUT/bench_render_1.log" || true
    timeout "${RN_S:-170}" python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
      --frames "${RENDER_FRAMES:-120}" --procs "$slots" --backend "${BACKENDS:-compute:pixel,gl}" \
      --readback pbo --json "$OUT/bench_render_n.json" 2>&1 | grep -v "egldisplay\|glgsg" \
      | tee "$OUT/bench_render_n.log" || true ;;
  frame) # issue #30: one compute frame's split and profile (bench_compute_frame), the look
         # against GL at 720p x 8 (compare_backends), then a py-spy profile of one slot while
         # PROCS compute renderers run side by side (the CPU split: encoders and the rest)
    [ "${TEST_S:-110}" = 0 ] || timeout "${TEST_S:-110}" python3 -m pytest -p no:cacheprovider -q -p no:logging \
      tests/engine/compute/test_merged.py 2>&1 | grep -v "egldisplay\|glgsg" \
      | tee "$OUT/gpu_merged_tests.log" || true
    timeout "${F_S:-200}" python3 tests/benchmarks/bench_compute_frame.py --size 1280x720 \
      --spatial 8 --rates "${RATES:-pixel,sample}" --frames "${FRAMES:-10}" --profile \
      --json "$OUT/bench_compute_frame.json" 2>&1 | grep -v "egldisplay\|glgsg" \
      | tee "$OUT/bench_compute_frame.log" || true
    timeout "${LOOK_S:-150}" python3 tests/benchmarks/compare_backends.py --size 1280x720 \
      --spatial 8 --frames "${LOOK_FRAMES:-20}" --out "$OUT" 2>&1 \
      | grep -v "egldisplay\|glgsg" | tee "$OUT/compare_backends.log" || true
    [ "${SPY:-1}" = 0 ] && exit 0
    ( timeout "${SPY_S:-170}" python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
        --frames "${RENDER_FRAMES:-240}" --procs "${PROCS:-8}" --backend "${SPY_BACKEND:-compute}" \
        --readback pbo --json "$OUT/bench_render_spy.json" 2>&1 \
        | grep -v "egldisplay\|glgsg" > "$OUT/bench_render_spy.log" ) &
    for _ in $(seq 1 120); do
      pid=$(pgrep -f "stages.engine.render_worker" | head -1 || true)
      [ -n "$pid" ] && [ "$(ls /tmp/wmforge-bench-*/inst_*_0/traj_0000/*.mp4.part 2>/dev/null \
        | head -1 || true)" ] && break
      sleep 1
    done
    sleep "${SPY_DELAY:-20}"
    [ -n "${pid:-}" ] && /tmp/py-spy record --native -r 50 -d "${SPY_DUR:-20}" \
      -f raw -o "$OUT/pyspy_slot.txt" -p "$pid" > "$OUT/pyspy.log" 2>&1 || true
    wait; cat "$OUT/bench_render_spy.log" ;;
  trace) # issue #30: where one compute frame's device time goes (bench_compute_frame --trace,
         # split by the stages/ function that launched each kernel: trace_split.py), after the
         # compute tests of merged shading (TEST_S seconds; 0 skips them)
    [ "${TEST_S:-0}" = 0 ] || timeout "${TEST_S}" python3 -m pytest -p no:cacheprovider -q \
      -p no:logging -m "gpu or not gpu" tests/engine/compute/test_merged.py 2>&1 \
      | grep -v "egldisplay\|glgsg" | tee "$OUT/gpu_merged_tests.log" || true
    timeout "${F_S:-240}" python3 tests/benchmarks/bench_compute_frame.py --size 1280x720 \
      --spatial 8 --rates pixel --frames "${FRAMES:-8}" --profile \
      --trace "$OUT/trace_{rate}.json.gz" --json "$OUT/bench_compute_frame.json" 2>&1 \
      | grep -v "egldisplay\|glgsg\|USDT\|profiler" | tee "$OUT/bench_compute_frame.log" || true
    [ -f "$OUT/trace_pixel.json.gz" ] && python3 tests/benchmarks/trace_split.py \
      "$OUT/trace_pixel.json.gz" --top 60 > "$OUT/trace_split.txt" 2>&1 || true ;;
  step) # issue #30, one frame's device time: this tree's frame traced (as `trace`), the
        # raster-against-BVH visibility microbenchmark (bench_raster_vs_bvh), then the
        # code before (.h200/old_stages.tar.gz) timed the same way in the same run, then (on an
        # H200, or with CEILING=1) the host's x264 ceiling
    TEST_S=0 bash "$0" trace
    timeout "${BVH_S:-150}" python3 tests/benchmarks/bench_raster_vs_bvh.py --size 1280x720 \
      --spatial 8 --reps 10 --json "$OUT/raster_vs_bvh.json" 2>&1 \
      | grep -v "egldisplay\|glgsg" | tee "$OUT/raster_vs_bvh.log" || true
    rm -rf /tmp/old && mkdir -p /tmp/old
    tar -cf - --exclude=./.h200 --exclude=./.gl --exclude=./data . | tar -xf - -C /tmp/old
    rm -rf /tmp/old/stages && tar xzf .h200/old_stages.tar.gz -C /tmp/old
    (cd /tmp/old && PYTHONPATH=/tmp/site:/tmp/old timeout "${F_S:-240}" python3 \
      tests/benchmarks/bench_compute_frame.py --size 1280x720 --spatial 8 --rates pixel \
      --frames "${FRAMES:-8}" --json "$OUT/bench_compute_frame_old.json" 2>&1 \
      | grep -v "egldisplay\|glgsg" | tee "$OUT/bench_compute_frame_old.log") || true
    if [ "${CEILING:-}" = 1 ] || nvidia-smi --query-gpu=name --format=csv | grep -q H200; then
      timeout 130 python3 tests/benchmarks/bench_x264_ceiling.py --streams 1,16 \
        --presets veryfast,ultrafast --frames 300 --json "$OUT/x264_ceiling.json" 2>&1 \
        | tee "$OUT/x264_ceiling.log" || true
    fi ;;
  final) # issue #30, this tree against the code before (.h200/old_stages.tar.gz) on one host:
         # the fused-step tests, one frame's split (bench_compute_frame) and Stage II at 720p x 8
         # with MPS_PROCS renderers under CUDA MPS, old and new (MPS: the device-bound case)
    timeout 120 python3 -m pytest -p no:cacheprovider -q -p no:logging -m "gpu or not gpu" \
      tests/engine/compute/test_fused_steps.py tests/engine/compute/test_scene_step.py 2>&1 \
      | grep -v "egldisplay\|glgsg" | tee "$OUT/gpu_tests.log" || true
    rm -rf /tmp/old && mkdir -p /tmp/old
    tar -cf - --exclude=./.h200 --exclude=./.gl --exclude=./data . | tar -xf - -C /tmp/old
    rm -rf /tmp/old/stages && tar xzf .h200/old_stages.tar.gz -C /tmp/old
    for t in new old; do
      d=$PWD; [ $t = old ] && d=/tmp/old
      (cd "$d" && PYTHONPATH=/tmp/site:$d timeout 150 python3 tests/benchmarks/bench_compute_frame.py \
        --size 1280x720 --spatial 8 --rates pixel --frames 8 --json "$OUT/frame_$t.json" 2>&1 \
        | grep -v "egldisplay\|glgsg\|Warning\|warn" | tail -2) || true
    done
    [ "${MPS:-1}" = 0 ] && exit 0
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
    mkdir -p /tmp/mps_pipe /tmp/mps_log
    nvidia-cuda-mps-control -d && sleep 1
    for t in new old; do
      d=$PWD; [ $t = old ] && d=/tmp/old
      (cd "$d" && PYTHONPATH=/tmp/site:$d timeout 150 python3 tests/benchmarks/bench_render.py \
        --preset 720p --spatial 8 --frames 150 --procs "${MPS_PROCS:-8}" --backend compute:pixel \
        --json "$OUT/mps_${t}_${MPS_PROCS:-8}.json" 2>&1 | grep -v "egldisplay\|glgsg" | tail -3) || true
    done
    echo quit | nvidia-cuda-mps-control || true ;;
  sync) # issue #30, the scene step without host waits: compute pixel at 720p x 8 with the code
        # of the commit before (.h200/old_stages.tar.gz: `git archive <commit> stages`) and this
        # tree, 1 and PROCS renderers; then this tree under CUDA MPS (where the host has its
        # control daemon) at PROCS and MPS_PROCS renderers. Stops starting runs at DEADLINE s.
    deadline=${DEADLINE:-560}  # from the script's start (setup too)
    timeout "${TEST_S:-90}" python3 -m pytest -p no:cacheprovider -q -m "gpu or not gpu" \
      tests/engine/compute/test_scene_step.py 2>&1 | grep -v "egldisplay\|glgsg" \
      | tee "$OUT/gpu_step_tests.log" || true
    rm -rf /tmp/old && mkdir -p /tmp/old
    tar -cf - --exclude=./.h200 --exclude=./.gl --exclude=./data . | tar -xf - -C /tmp/old
    rm -rf /tmp/old/stages && tar xzf .h200/old_stages.tar.gz -C /tmp/old
    bench() { # tag tree procs
      local left=$((deadline - SECONDS)) lim=${B_S:-150}
      [ "$left" -gt 40 ] || { echo "skipped $1: no time left"; return 0; }
      [ "$left" -lt "$lim" ] && lim=$left
      (cd "$2" && PYTHONPATH=/tmp/site:$2 timeout "$lim" python3 tests/benchmarks/bench_render.py \
        --preset 720p --spatial 8 --frames "${RENDER_FRAMES:-150}" --procs "$3" \
        --backend compute:pixel --json "$OUT/bench_$1.json" 2>&1 \
        | grep -v "egldisplay\|glgsg" | tee "$OUT/bench_$1.log") || true
    }
    for p in 1 "${PROCS:-4}"; do [ -n "${NO_OLD:-}" ] || bench "old_$p" /tmp/old "$p"; bench "new_$p" "$PWD" "$p"; done
    if command -v nvidia-cuda-mps-control >/dev/null; then
      export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
      mkdir -p /tmp/mps_pipe /tmp/mps_log
      if nvidia-cuda-mps-control -d; then
        sleep 1
        for p in "${PROCS:-4}" "${MPS_PROCS:-8}"; do bench "mps_new_$p" "$PWD" "$p"; done
        echo quit | nvidia-cuda-mps-control || true
      fi
      cp /tmp/mps_log/* "$OUT/" 2>/dev/null || true
    else
      echo "this host has no nvidia-cuda-mps-control"
    fi ;;
  mpsgl) # the same host's GL (pbo) at 4 and 8 renderers and compute pixel at MPS_PROCS (12)
         # under CUDA MPS (the hand-run third call of the sync measurement, 2026-12-06)
    for p in 4 8; do
      timeout 110 python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
        --frames 150 --procs "$p" --backend gl --readback pbo \
        --json "$OUT/bench_gl_pbo_$p.json" 2>&1 | grep -v "egldisplay\|glgsg" | tail -3 || true
    done
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
    mkdir -p /tmp/mps_pipe /tmp/mps_log
    nvidia-cuda-mps-control -d && sleep 1
    timeout 160 python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 --frames 150 \
      --procs "${MPS_PROCS:-12}" --backend compute:pixel \
      --json "$OUT/bench_mps_new_${MPS_PROCS:-12}.json" 2>&1 | grep -v "egldisplay\|glgsg" \
      | tail -3 || true
    echo quit | nvidia-cuda-mps-control || true ;;
  glyuv) # issue #30, the GL backend's yuv420p pass (render.yuv): its tests on the card's
          # driver, the host CPU a 720p frame costs each way, then GL pbo at 720p x 8 with
          # yuv encoder and device at the given slot counts (default 8)
    python3 -m pytest -p no:cacheprovider -q tests/engine/test_gl_yuv.py 2>&1 \
      | tee "$OUT/gl_yuv_tests.log" | tail -5 || true
    python3 tests/benchmarks/bench_gl_yuv_host.py --frames 24 --repeat 2 \
      --json "$OUT/gl_yuv_host_720p.json" 2>&1 | grep -v "egldisplay\|glgsg" | tail -30 || true
    for p in ${2:-8}; do
      timeout 200 python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
        --frames 150 --procs "$p" --backend gl --readback pbo --yuv encoder,device \
        --json "$OUT/bench_gl_yuv_$p.json" 2>&1 | grep -v "egldisplay\|glgsg" | tail -4 || true
    done ;;
  cstart) # issue #30, the compute renderers' start-up: MPS_PROCS renderers under CUDA MPS,
          # without and then with a node compile cache (a fresh folder: one compiles, the
          # others wait and load), then again with that folder warm
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
    mkdir -p /tmp/mps_pipe /tmp/mps_log
    nvidia-cuda-mps-control -d && sleep 1
    rm -rf /tmp/cc_node
    for c in "" /tmp/cc_node /tmp/cc_node; do
      timeout 170 python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
        --frames 150 --procs "${MPS_PROCS:-8}" --backend compute:pixel ${c:+--compile-cache "$c"} \
        --json "$OUT/cstart_${c:+cache}_$(date +%s).json" 2>&1 | grep -v "egldisplay\|glgsg" \
        | tail -3 || true
    done
    echo quit | nvidia-cuda-mps-control || true ;;
  ab) # issue #30, the leaders' Triton kernel on a card: its gpu test (compiled against the CPU
      # torch path, both sample levels), then Stage II compute pixel at 720p x 8 with MPS_PROCS
      # renderers under CUDA MPS, the leaders shaded by the kernel and by the torch graph (this
      # tree both times, a fresh node compile cache each), then the host's x264 ceiling
    deadline=${DEADLINE:-540}  # bash's SECONDS counts from the script's start (setup too)
    left() { local l=$((deadline - SECONDS)); [ "$l" -gt "$1" ] && echo "$l" || echo 0; }
    [ "${TEST_S:-170}" = 0 ] || timeout "${TEST_S:-170}" python3 -m pytest -p no:cacheprovider \
      -q -s -p no:logging -W ignore -m gpu -k compiled tests/engine/compute/test_leaders_triton.py \
      2>&1 | grep -v "egldisplay\|glgsg" | tee "$OUT/leaders_gpu_test.log" | tail -6 || true
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
    mkdir -p /tmp/mps_pipe /tmp/mps_log
    nvidia-cuda-mps-control -d && sleep 1
    arms=${AB:-triton torch}
    # the arms share what is left before the x264 ceiling (X264_S) equally
    per=$(( ($(left 0) - ${X264_S:-70}) / $(wc -w <<<"$arms") ))
    for lk in $arms; do
      l=$(left 70); [ "$l" = 0 ] && { echo "skipped $lk: no time left"; continue; }
      t=${lk//:/_}  # no colons in file names (the device tool returns plain names only)
      rm -rf "/tmp/cc_$t"
      # in its own process group; if it outlives its time, py-spy dumps every renderer's
      # stacks (where it stuck) before the whole group is killed (no renderer lingers on
      # the GPU into the next arm)
      setsid python3 tests/benchmarks/bench_render.py --preset 720p --spatial 8 \
        --frames "${RENDER_FRAMES:-150}" --procs "${MPS_PROCS:-8}" --backend "compute:pixel:$lk" \
        --compile-cache "/tmp/cc_$t" --log-dir "$OUT/logs_$t" \
        --json "$OUT/mps_${t}_${MPS_PROCS:-8}.json" > "$OUT/mps_${t}.log" 2>&1 &
      pid=$!; end=$((SECONDS + (l < per ? l : per)))
      while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 2; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "$lk: still running at its deadline; stacks in spy_$t.txt"
        for w in $(pgrep -f "stages.engine.render_worker"); do
          echo "== $w"  # (a failed or timed-out dump must not end the script: set -e)
          [ -x /tmp/py-spy ] && { timeout 10 /tmp/py-spy dump --pid "$w" 2>&1 | head -60; } || true
        done > "$OUT/spy_$t.txt"
        kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true  # (set -e)
        sleep 3; pkill -9 -f stages.engine.render_worker || true
      fi
      wait "$pid" 2>/dev/null || true
      grep -v "egldisplay\|glgsg" "$OUT/mps_${t}.log" > "$OUT/mps_${t}.txt" || true
      for f in "$OUT/logs_$t"/*.log; do [ -f "$f" ] && tail -c 4000 "$f" > "$f.tail" && mv "$f.tail" "$f"; done
      tail -3 "$OUT/mps_${t}.txt"
    done
    echo quit | nvidia-cuda-mps-control || true
    l=$(left 30); [ "$l" = 0 ] || timeout $((l < 70 ? l : 70)) python3 \
      tests/benchmarks/bench_x264_ceiling.py --streams 16 --presets veryfast --frames 150 \
      --json "$OUT/x264_ceiling.json" 2>&1 | tail -4 || true ;;
  fig) # issue #30's figure set in one call: RUNS (space-separated
       # "mps|nomps,backend,procs,spatial[,frames]" entries, run in order, each sharing what is left before the x264 ceiling equally) with
       # 720p Stage II through bench_render (a fresh node compile cache each; GL at pbo), GPU
       # memory and utilisation sampled by nvidia-smi throughout (smi.csv), a py-spy profile of
       # one renderer (native frames, SPY_DUR s) in the run numbered SPY (1-based; 0: none),
       # then the host's x264 ceiling (16 veryfast streams). Stops starting runs at DEADLINE s.
    deadline=${DEADLINE:-560}
    left() { local l=$((deadline - SECONDS)); [ "$l" -gt "$1" ] && echo "$l" || echo 0; }
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader \
      -lms 1000 > "$OUT/smi.csv" 2>&1 &
    smi=$!
    # the sampler and the MPS daemon end with the script, however it ends
    trap 'kill "$smi" 2>/dev/null; echo quit | nvidia-cuda-mps-control 2>/dev/null' EXIT
    : > "$OUT/runs.txt"  # this call's runs only (a warm machine keeps /tmp between calls)
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
    mkdir -p /tmp/mps_pipe /tmp/mps_log
    runs=(${RUNS:-"mps,compute:pixel:triton,8,8" "mps,compute:pixel:torch,8,8" "nomps,gl,8,8"})
    n=0
    for r in "${runs[@]}"; do
      n=$((n + 1)); IFS=, read -r mps be procs sp frames <<<"$r"
      remaining=$(( ${#runs[@]} - n + 1 ))
      # RESERVE_S: the seconds kept for each later run (0: the runs share what is left equally)
      if [ "${RESERVE_S:-0}" -gt 0 ]; then per=$(( $(left 0) - ${X264_S:-70} - RESERVE_S * (remaining - 1) ))
      else per=$(( ($(left 0) - ${X264_S:-70}) / remaining )); fi
      l=$(left 60); [ "$l" = 0 ] && { echo "skipped $r: no time left"; continue; }
      [ "$per" -lt "$l" ] && l=$per
      [ "$l" -lt 30 ] && { echo "skipped $r: $l s is too short"; continue; }
      t="r${n}_${mps}_${be//:/_}_${procs}_x${sp}"
      if [ "$mps" = mps ]; then nvidia-cuda-mps-control -d 2>/dev/null || true; sleep 1
      else echo quit | nvidia-cuda-mps-control 2>/dev/null || true; sleep 1; fi
      # SHARED_CACHE=1: one compile cache per backend and sample count, kept between the runs (a
      # first short run warms it, as a node's persistent cache is warm after its first unit)
      cc="/tmp/cc_$t"; [ "${SHARED_CACHE:-}" = 1 ] && cc="/tmp/cc_${be//:/_}_x${sp}" || rm -rf "$cc"
      echo "== $t: $l s from $(date +%T), $(date +%s), cache $cc" | tee -a "$OUT/runs.txt"
      setsid python3 tests/benchmarks/bench_render.py --preset 720p --spatial "$sp" \
        --frames "${frames:-${RENDER_FRAMES:-300}}" --procs "$procs" --backend "$be" --readback pbo \
        --compile-cache "$cc" --log-dir "$OUT/logs_$t" \
        --json "$OUT/$t.json" > "$OUT/$t.log" 2>&1 &
      pid=$!; end=$((SECONDS + l))
      if [ "${SPY:-0}" = "$n" ] && [ -x /tmp/py-spy ]; then
        ( sleep "${SPY_DELAY:-60}"; kill -0 "$pid" 2>/dev/null || exit 0  # (its run only)
          w=$(pgrep -f "stages.engine.render_worker" | head -1 || true)
          [ -n "$w" ] && timeout $(( ${SPY_DUR:-20} + 15 )) /tmp/py-spy record --native -r 50 \
            -d "${SPY_DUR:-20}" -f raw -o "$OUT/pyspy_$t.txt" -p "$w" > "$OUT/pyspy.log" 2>&1 \
            || true ) &
      fi
      while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 2; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "$t: still running at its deadline; stacks in spy_$t.txt"
        for w in $(pgrep -f "stages.engine.render_worker"); do
          echo "== $w"
          [ -x /tmp/py-spy ] && { timeout 10 /tmp/py-spy dump --pid "$w" 2>&1 | head -60; } || true
        done > "$OUT/spy_$t.txt"
        kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
        sleep 3; pkill -9 -f stages.engine.render_worker || true
      fi
      wait "$pid" 2>/dev/null || true
      echo "   ended $(date +%s)" >> "$OUT/runs.txt"
      grep -v "egldisplay\|glgsg" "$OUT/$t.log" | tail -4 || true
      for f in "$OUT/logs_$t"/*.log; do [ -f "$f" ] && tail -c 6000 "$f" > "$f.tail" && mv "$f.tail" "$f"; done
    done
    echo quit | nvidia-cuda-mps-control 2>/dev/null || true
    kill "$smi" 2>/dev/null || true
    l=$(left 30); [ "$l" = 0 ] || timeout $((l < 70 ? l : 70)) python3 \
      tests/benchmarks/bench_x264_ceiling.py --streams 16 --presets veryfast --frames 150 \
      --json "$OUT/x264_ceiling.json" 2>&1 | tail -4 || true ;;
  kernel) # issue #30, the leaders' Triton kernel alone, for a short lease: its exactness test
          # and the compiled kernel against the torch path on the card, then one 720p x 8
          # compute frame with the torch graph and with the kernel (device time per frame)
    timeout "${TEST_S:-110}" python3 -m pytest -p no:cacheprovider -q -s -p no:logging -W ignore \
      -m "gpu or not gpu" -k "stores or compiled" tests/engine/compute/test_leaders_triton.py 2>&1 \
      | grep -v "egldisplay\|glgsg" | tee "$OUT/leaders_tests.log" | tail -8 || true
    timeout "${F_S:-200}" python3 tests/benchmarks/bench_compute_frame.py --size 1280x720 \
      --spatial 8 --rates pixel --leaders torch,triton --frames 4 --json "$OUT/frame.json" 2>&1 \
      | grep -v "egldisplay\|glgsg\|USDT" > "$OUT/frame.log" || true
    grep '^{' "$OUT/frame.log" || tail -20 "$OUT/frame.log" ;;
  gt) for cfg in "720p 8" "540p 1"; do
        set -- $cfg
        python3 tests/benchmarks/bench_ground_truth.py --preset "$1" --spatial "$2" \
          --frames "${FRAMES:-300}" --procs "${GT_PROCS:-8}" --configs off,defaults,all \
          --json "$OUT/bench_gt_$1x$2.json" 2>&1 | tee "$OUT/bench_gt_$1x$2.log"
      done ;;
esac
