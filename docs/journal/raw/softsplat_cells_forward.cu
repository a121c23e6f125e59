// Session 6's cell-binned gather forward of softsplat (tried, measured, not adopted: docs/journal/softsplat-history.md).
// These kernels replaced zmax_kernel, zmax_gather, splat_forward(_rows) and splat_normalise inside
// softsplat.py's _CUDA_SOURCE (v8, commit f2a79e4), with `scalar_t fx, fy` added to struct Corners and set in
// corners_of. The host side, per forward:
//   cells = torch.zeros((2, N*(H+1)*(W+1)), int32); count, cursor = cells
//   bin_count(n_src, H, W, flow, count)                 -- a thread per source
//   torch.cumsum(count, 0, dtype=torch.int32, out=cursor)
//   meta = empty((3 or 2, n_src), acc dtype); vals = empty((C, n_src), io dtype)
//   bin_scatter(n_src, C, H, W, x, flow, metric, cursor, meta, vals)
//   bin_gather(n_src, C, H, W, meta, vals, count, cursor, out, den, zmax)   -- grid y = ceil(C / CHUNK)
// The backward kernels were unchanged (they read den and zmax).
// The forward bins sources by cell, then gathers per target: no float atomics, no accumulator.
// A source with any target inside the frame lands on the 2x2 block of targets whose top-left corner is
// its cell (floor(x + u), floor(y + v)), in [-1, W-1] x [-1, H-1]: cells are stored (H + 1) x (W + 1)
// per image, cell (-1, -1) first. bin_count counts the sources per cell; an inclusive scan of the counts
// (torch.cumsum) gives each cell's end; bin_scatter moves every source's payload (its fractional
// position, metric and channels, one plane each) to a slot of its cell, counting the cell's cursor down
// from the end to the start; bin_gather then gives every target the sources of the four cells whose
// blocks hold it, and computes Z_max, the weights, the sums and the normalised output in registers.
__device__ __forceinline__ long long cell_of(long long n, int H, int W, int cx, int cy) {
    return n * (long long)(H + 1) * (W + 1) + (long long)(cy + 1) * (W + 1) + (cx + 1);
}

extern "C" __global__ void bin_count(const long long n_src, const int H, const int W,
                                     const scalar_t* __restrict__ flow, int* __restrict__ count) {
    const long long src = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (src >= n_src) return;
    Corners c;
    if (!corners_of(src, H, W, flow, c)) return;
    atomicAdd(count + cell_of(src / ((long long)H * W), H, W, c.x0, c.y0), 1);
}

extern "C" __global__ void bin_scatter(const long long n_src, const int C, const int H, const int W,
                                       const io_t* __restrict__ input,
                                       const scalar_t* __restrict__ flow,
                                       const scalar_t* __restrict__ metric,
                                       int* __restrict__ cursor,
                                       scalar_t* __restrict__ meta,
                                       io_t* __restrict__ vals) {
    const long long src = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (src >= n_src) return;
    Corners c;
    if (!corners_of(src, H, W, flow, c)) return;
    const long long hw = (long long)H * W;
    const long long n = src / hw;
    const long long s = src - n * hw;
    const long long slot = atomicSub(cursor + cell_of(n, H, W, c.x0, c.y0), 1) - 1;
    meta[slot] = c.fx;
    meta[n_src + slot] = c.fy;
#if KIND == KIND_LINEAR || KIND == KIND_SOFT
    meta[2 * n_src + slot] = metric[src];
#endif
    const io_t* in = input + n * C * hw + s;
    for (int ch = 0; ch < C; ++ch) vals[(long long)ch * n_src + slot] = in[(long long)ch * hw];
}

#ifndef CHUNK
#define CHUNK 8
#endif

// One thread per target and chunk of CHUNK channels (blockIdx.y). den gets the guarded weight, negated
// where the guard blocks its gradient (zeroeps/clipeps); den and zmax may be null (no backward to come).
extern "C" __global__ void bin_gather(const long long n_dst, const int C, const int H, const int W,
                                      const scalar_t* __restrict__ meta,
                                      const io_t* __restrict__ vals,
                                      const int* __restrict__ count,
                                      const int* __restrict__ cursor,
                                      io_t* __restrict__ out,
                                      scalar_t* __restrict__ den,
                                      scalar_t* __restrict__ zmax) {
    const long long dst = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (dst >= n_dst) return;
    const int ch0 = blockIdx.y * CHUNK;
    const long long hw = (long long)H * W;
    const long long n = dst / hw;
    const long long t = dst - n * hw;
    const int y = (int)(t / W);
    const int x = (int)(t - (long long)y * W);
    int lo[4], hi[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        // this target is corner (dx, dy) of cell (x - dx, y - dy)
        const long long cell = cell_of(n, H, W, x - (q & 1), y - (q >> 1));
        lo[q] = cursor[cell];
        hi[q] = lo[q] + count[cell];
    }
    const scalar_t* fxs = meta;
    const scalar_t* fys = meta + n_dst;
#if KIND == KIND_SOFT
    const scalar_t* ms = meta + 2 * n_dst;
    scalar_t z = -(scalar_t)__int_as_float(0x7f800000);  // the max over sources with a positive weight here; NaN metrics never win
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        for (int i = lo[q]; i < hi[q]; ++i) {
            const scalar_t wx = (q & 1) ? fxs[i] : (scalar_t)1 - fxs[i];
            const scalar_t wy = (q >> 1) ? fys[i] : (scalar_t)1 - fys[i];
            if (wx * wy > 0 && ms[i] > z) z = ms[i];
        }
    }
    const bool has_z = isfinite(z);
#endif
    scalar_t acc[CHUNK];
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) acc[j] = 0;
    scalar_t d = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        for (int i = lo[q]; i < hi[q]; ++i) {
            const scalar_t wx = (q & 1) ? fxs[i] : (scalar_t)1 - fxs[i];
            const scalar_t wy = (q >> 1) ? fys[i] : (scalar_t)1 - fys[i];
#if KIND == KIND_SOFT
            // <= 0 wherever the weight is positive; the clamp guards zero-weight corners
            const scalar_t e = has_z ? wx * wy * exp_scalar(fmin(ms[i] - z, (scalar_t)0)) : (scalar_t)0;
#elif KIND == KIND_LINEAR
            const scalar_t e = wx * wy * meta[2 * n_dst + i];
#else
            const scalar_t e = wx * wy;
#endif
            if (e == 0) continue;
            d += e;
#pragma unroll
            for (int j = 0; j < CHUNK; ++j) {
                if (ch0 + j < C) acc[j] += e * io_load(vals[(long long)(ch0 + j) * n_dst + i]);
            }
        }
    }
    scalar_t inv = 1;
#if KIND != KIND_SUM
    bool blocked = false;
#if EPS_MODE == 0
    d = d + (scalar_t)1e-7;
#elif EPS_MODE == 1
    if (d == 0) { d = 1; blocked = true; }
#else
    if (d < (scalar_t)1e-7) { d = (scalar_t)1e-7; blocked = true; }
#endif
    inv = (scalar_t)1 / d;
    if (den != nullptr && blockIdx.y == 0) den[dst] = blocked ? -d : d;
#endif
#if KIND == KIND_SOFT
    if (zmax != nullptr && blockIdx.y == 0) zmax[dst] = z;
#endif
    io_t* o = out + n * C * hw + t;
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) {
        if (ch0 + j < C) o[(long long)(ch0 + j) * hw] = io_store(acc[j] * inv);
    }
}

// The backward's packed rows are laid out N*H*W x CP (channels last, CP a multiple of 4 for float so that
// 16-byte loads apply): channels 0..C-1, then channel C for the weight (all kinds but sum).

