// Primary rays against a BVH: the ray-casting side of issue #30's visibility microbenchmark
// (tests/benchmarks/bench_raster_vs_bvh.py). One ray per (view-sample, pixel centre), closest
// hit, no culling, every triangle opaque: the same question the compute rasterizer's depth pass
// answers, asked the other way round.
//
// The same source builds twice: with nvcc as a CUDA kernel (one thread a ray, 8x4 pixel tiles
// per warp for coherent traversal) and with a C++ compiler as a host loop (the CPU tests check
// the traversal against the rasterizer with it). Both call the one __host__ __device__
// function below.
//
// Node layout: 8 floats a node, children of an inner node adjacent (right = left + 1):
//   [0..2] box min, [3] int: left child (inner) or first triangle (leaf),
//   [4..6] box max, [7] int: 0 for an inner node, else the leaf's triangle count.
// Triangles: 9 floats each (v0, e1 = v1 - v0, e2 = v2 - v0), in leaf order; ids[k] is the
// source triangle of the k-th.

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define HD __host__ __device__ __forceinline__
#else
#define HD inline
#endif

#define STACK 64

HD int as_int(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_int(f);
#else
  int i;
  memcpy(&i, &f, 4);
  return i;
#endif
}

HD float fminf_(float a, float b) { return a < b ? a : b; }
HD float fmaxf_(float a, float b) { return a > b ? a : b; }

// entry distance of the ray into box [lo, hi], or a value > tmax where it misses
HD float box_entry(const float* n, const float o[3], const float inv[3], float tmax) {
  float t0 = 0.0f, t1 = tmax;
  for (int a = 0; a < 3; ++a) {
    float ta = (n[a] - o[a]) * inv[a];
    float tb = (n[4 + a] - o[a]) * inv[a];
    t0 = fmaxf_(t0, fminf_(ta, tb));
    t1 = fminf_(t1, fmaxf_(ta, tb));
  }
  return t0 <= t1 ? t0 : 3.0e38f;
}

// Moller-Trumbore, two-sided; t along the ray (origin on the near plane, t = 1 at the far plane)
HD float hit_tri(const float* t9, const float o[3], const float d[3]) {
  const float *v0 = t9, *e1 = t9 + 3, *e2 = t9 + 6;
  float p[3] = {d[1] * e2[2] - d[2] * e2[1], d[2] * e2[0] - d[0] * e2[2],
                d[0] * e2[1] - d[1] * e2[0]};
  float det = e1[0] * p[0] + e1[1] * p[1] + e1[2] * p[2];
  if (det == 0.0f) return 3.0e38f;
  float inv = 1.0f / det;
  float s[3] = {o[0] - v0[0], o[1] - v0[1], o[2] - v0[2]};
  float u = (s[0] * p[0] + s[1] * p[1] + s[2] * p[2]) * inv;
  if (u < 0.0f || u > 1.0f) return 3.0e38f;
  float q[3] = {s[1] * e1[2] - s[2] * e1[1], s[2] * e1[0] - s[0] * e1[2],
                s[0] * e1[1] - s[1] * e1[0]};
  float v = (d[0] * q[0] + d[1] * q[1] + d[2] * q[2]) * inv;
  if (v < 0.0f || u + v > 1.0f) return 3.0e38f;
  return (e2[0] * q[0] + e2[1] * q[1] + e2[2] * q[2]) * inv;
}

// One ray: plane `plane` (a view-sample, its inverse view-projection inv_vp[16], row-major),
// pixel (px, py) with GL rows (py = 0 at the bottom). Writes the source triangle (-1: none)
// and the hit's t.
HD void cast_one(const float* nodes, const float* tris, const int32_t* ids,
                 const float* inv_vp, int W, int H, int px, int py,
                 int32_t* out_tri, float* out_t) {
  const float* m = inv_vp;
  float x = ((float)px + 0.5f) / (float)W * 2.0f - 1.0f;
  float y = ((float)py + 0.5f) / (float)H * 2.0f - 1.0f;
  float pn[4], pf[4];
  for (int r = 0; r < 4; ++r) {
    pn[r] = m[4 * r] * x + m[4 * r + 1] * y - m[4 * r + 2] + m[4 * r + 3];
    pf[r] = m[4 * r] * x + m[4 * r + 1] * y + m[4 * r + 2] + m[4 * r + 3];
  }
  float o[3] = {pn[0] / pn[3], pn[1] / pn[3], pn[2] / pn[3]};
  float d[3] = {pf[0] / pf[3] - o[0], pf[1] / pf[3] - o[1], pf[2] / pf[3] - o[2]};
  float inv[3];
  for (int a = 0; a < 3; ++a) inv[a] = 1.0f / (d[a] != 0.0f ? d[a] : 1e-30f);
  float best = 1.0f;
  int32_t best_id = -1;
  int stack[STACK];
  int sp = 0;
  int node = 0;
  if (box_entry(nodes, o, inv, best) > best) node = -1;
  while (node >= 0) {
    const float* n = nodes + 8 * node;
    int count = as_int(n[7]);
    if (count > 0) {
      int first = as_int(n[3]);
      for (int k = first; k < first + count; ++k) {
        float t = hit_tri(tris + 9 * k, o, d);
        if (t >= 0.0f && t < best) {
          best = t;
          best_id = ids[k];
        }
      }
      node = sp > 0 ? stack[--sp] : -1;
      continue;
    }
    int l = as_int(n[3]);
    float tl = box_entry(nodes + 8 * l, o, inv, best);
    float tr = box_entry(nodes + 8 * (l + 1), o, inv, best);
    bool hl = tl <= best, hr = tr <= best;
    if (hl && hr) {
      int nearer = tl <= tr ? l : l + 1;
      if (sp < STACK) stack[sp++] = nearer == l ? l + 1 : l;
      node = nearer;
    } else if (hl) {
      node = l;
    } else if (hr) {
      node = l + 1;
    } else {
      node = sp > 0 ? stack[--sp] : -1;
    }
  }
  *out_tri = best_id;
  *out_t = best;
}

#ifdef __CUDACC__
// one thread a ray; each warp takes an 8 x 4 pixel tile of one plane
__global__ void cast_kernel(const float* nodes, const float* tris, const int32_t* ids,
                            const float* inv_vp, int planes, int W, int H, int32_t* out_tri,
                            float* out_t) {
  long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  int tiles_x = (W + 7) / 8, tiles_y = (H + 3) / 4;
  long long per_plane = (long long)tiles_x * tiles_y * 32;
  if (g >= per_plane * planes) return;
  int plane = (int)(g / per_plane);
  long long r = g % per_plane;
  int tile = (int)(r / 32), lane = (int)(r % 32);
  int px = (tile % tiles_x) * 8 + lane % 8, py = (tile / tiles_x) * 4 + lane / 8;
  if (px >= W || py >= H) return;
  long long o = ((long long)plane * H + py) * W + px;
  cast_one(nodes, tris, ids, inv_vp + 16 * plane, W, H, px, py, out_tri + o, out_t + o);
}

extern "C" int bvh_cast_cuda(const float* nodes, const float* tris, const int32_t* ids,
                             const float* inv_vp, int planes, int W, int H, int32_t* out_tri,
                             float* out_t) {
  int tiles_x = (W + 7) / 8, tiles_y = (H + 3) / 4;
  long long n = (long long)tiles_x * tiles_y * 32 * planes;
  int block = 128;
  long long grid = (n + block - 1) / block;
  cast_kernel<<<(unsigned)grid, block>>>(nodes, tris, ids, inv_vp, planes, W, H, out_tri,
                                         out_t);
  return (int)cudaGetLastError();
}
#else
extern "C" int bvh_cast_cpu(const float* nodes, const float* tris, const int32_t* ids,
                            const float* inv_vp, int planes, int W, int H, int32_t* out_tri,
                            float* out_t) {
  for (int p = 0; p < planes; ++p)
    for (int py = 0; py < H; ++py)
      for (int px = 0; px < W; ++px) {
        long long o = ((long long)p * H + py) * W + px;
        cast_one(nodes, tris, ids, inv_vp + 16 * p, W, H, px, py, out_tri + o, out_t + o);
      }
  return 0;
}
#endif
