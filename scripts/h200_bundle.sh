#!/usr/bin/env bash
# Builds what scripts/gpu_run.sh carries to the lent GPU machine (which has Python 3.12, torch,
# pandas, pyarrow, pynvml, PyYAML and pytest but no internet), into git-ignored folders:
#   .gl/              Debian's GL/EGL/Vulkan loader packages (amd64), unpacked there into /
#   .h200/site.tar.xz panda3d 1.10.16 (cp312; its unused ffmpeg/assimp/tinydisplay/audio
#                     plugins left out, libCg kept: libpandagl needs it), av, hydra-core,
#                     omegaconf 2.3, antlr4 4.9.3 (pure Python, from its sdist), panda3d-gltf,
#                     panda3d-simplepbr
#   .h200/pbr_legacy.py the look's shaders as of 46ba8b4 (tests/benchmarks/look_variants.py)
#   .h200/old_stages.tar.gz stages/ as of 88affef (gpu_run.sh final: the code before, on one host)
#   .h200/bin/py-spy.xz py-spy 0.4.3's static binary, xz-packed (gpu_run.sh's profiles)
# Then: device run `bash scripts/gpu_run.sh node 16` with carry [".gl", ".h200"].
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gl/' .git/info/exclude 2>/dev/null || printf '/.gl/\n/.h200/\n' >> .git/info/exclude
mkdir -p .gl .h200 /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
# shellcheck disable=SC2086
apt-get $o update >/dev/null
# shellcheck disable=SC2086
(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
w=$(mktemp -d) site=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$w" panda3d==1.10.16 av==19.0.2 hydra-core==1.3.8 \
  omegaconf==2.3.1 panda3d-gltf panda3d-simplepbr
python3 -m pip download -q --no-deps --no-binary=:all: -d "$w" antlr4-python3-runtime==4.9.3
for f in "$w"/*.whl; do unzip -q -o "$f" -d "$site"; done
tar xzf "$w"/antlr4-python3-runtime-4.9.3.tar.gz -C "$w"
cp -r "$w"/antlr4-python3-runtime-4.9.3/src/antlr4 "$site"/
rm -f "$site"/panda3d/libp3ffmpeg.so "$site"/panda3d/libp3assimp.so \
  "$site"/panda3d/libp3tinydisplay.so "$site"/panda3d/libp3openal_audio.so \
  "$site"/panda3d/libp3fmod_audio.so
rm -rf "$site"/deploy_libs "$site"/panda3d_tools "$site"/pydevd_plugins
(cd "$site" && tar cf - . | xz -1 -T2 > "$OLDPWD/.h200/site.tar.xz")
rm -rf "$w" "$site"
# the look_variants benchmark's `legacy` shaders (the device copy has no git history)
git show 46ba8b4:stages/engine/pbr.py > .h200/pbr_legacy.py
git archive 88affef stages | gzip -n > .h200/old_stages.tar.gz
w=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_5_x86_64 -d "$w" py-spy==0.4.3
unzip -q -o "$w"/py_spy-*.whl -d "$w/x"
mkdir -p .h200/bin
xz -9 -c "$(find "$w/x" -type f -name py-spy | head -1)" > .h200/bin/py-spy.xz
rm -rf "$w"
du -sh .gl .h200
