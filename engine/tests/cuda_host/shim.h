// Host emulation of the CUDA features the replica's kernels use, so their source can be
// compiled by g++ and checked without a GPU: each block runs alone, each of its threads on
// an OS thread; __syncthreads is a block barrier, __shfl_xor_sync a warp exchange through
// memory, __shared__ variables are statics (one block at a time), f16 is _Float16.
// (owner: cuda; used by replica/tests/cuda_kernels_host.rs)
#define WARMPATH_HOST_EMULATION 1
#include <cmath>
#include <thread>
#include <barrier>
#include <vector>
#include <cstring>
#include <cstdio>
#include <cstdint>
#include <algorithm>
#include <memory>
struct Dim3 { unsigned x = 1, y = 1, z = 1; };
thread_local Dim3 threadIdx;
Dim3 blockIdx, blockDim;
std::barrier<>* g_bar;
std::barrier<>* g_wbar[32];
float g_wbuf[32][32];
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
typedef unsigned short half_t;
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    g_wbuf[w][l] = v;
    g_wbar[w]->arrive_and_wait();
    float r = g_wbuf[w][l ^ o];
    g_wbar[w]->arrive_and_wait();
    return r;
}
inline float __int_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
using std::min;
inline float h2f(half_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
inline half_t f2h(float v) { _Float16 f = (_Float16)v; half_t h; memcpy(&h, &f, 2); return h; }
template <class F> void launch(Dim3 grid, unsigned threads, F f) {
    blockDim = {threads, 1, 1};
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            blockIdx = {bx, by, 1};
            std::barrier<> bar(threads);
            g_bar = &bar;
            std::vector<std::unique_ptr<std::barrier<>>> wb;
            for (unsigned w = 0; w < threads / 32; ++w) { wb.emplace_back(new std::barrier<>(32)); g_wbar[w] = wb.back().get(); }
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < threads; ++t) ts.emplace_back([t, &f] { threadIdx = {t, 0, 0}; f(); });
            for (auto& t : ts) t.join();
        }
}
