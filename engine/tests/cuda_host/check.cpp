// Checks every kernel of KERNEL_SOURCE, run through shim.h, against naive references:
// embedding gather, RMSNorm (all rows and selected rows), RoPE in both pairings, the KV
// write into a paged pool, causal GQA attention over block tables (a ragged batch with a
// prefill chunk and a decode over 151 positions, i.e. three key tiles) and SwiGLU.
// Prints "all kernels match" and exits 0 when every value is within tolerance.
#include "shim.h"
#include "kernels_host.h"  // KERNEL_SOURCE, written by the test
static uint64_t s = 12345;
float rnd() { s = s * 6364136223846793005ULL + 1442695040888963407ULL; return ((s >> 40) / float(1 << 24)) * 2 - 1; }
int fails = 0;
void check(const char* what, float got, float want, float tol) {
    if (!(std::fabs(got - want) <= tol * (1 + std::fabs(want)))) { if (fails < 20) printf("FAIL %s: got %f want %f\n", what, got, want); fails++; }
}
Dim3 g1(long n, unsigned t) { return {unsigned((n + t - 1) / t), 1, 1}; }
int main() {
    // embed
    { int vocab = 10, dim = 7; std::vector<half_t> table(vocab * dim); for (auto& v : table) v = f2h(rnd());
      std::vector<unsigned> tok = {3, 9, 0}; std::vector<float> x(3 * dim);
      long long n = 3 * dim;
      launch(g1(n, 256), 256, [&] { embed(table.data(), tok.data(), x.data(), dim, n); });
      for (int r = 0; r < 3; ++r) for (int c = 0; c < dim; ++c) check("embed", x[r * dim + c], h2f(table[tok[r] * dim + c]), 0); }
    // rmsnorm + rmsnorm_rows
    { int rows = 3, dim = 300; float eps = 1e-5f; std::vector<float> x(rows * dim), w(dim); for (auto& v : x) v = rnd() * 3; for (auto& v : w) v = rnd();
      std::vector<half_t> out(rows * dim), out2(2 * dim); std::vector<int> idx = {2, 0};
      launch({unsigned(rows), 1, 1}, 256, [&] { rmsnorm(x.data(), w.data(), out.data(), dim, eps); });
      launch({2, 1, 1}, 256, [&] { rmsnorm_rows(x.data(), idx.data(), w.data(), out2.data(), dim, eps); });
      for (int r = 0; r < rows; ++r) { double ss = 0; for (int i = 0; i < dim; ++i) ss += double(x[r*dim+i]) * x[r*dim+i];
        float sc = 1.0 / std::sqrt(ss / dim + eps);
        for (int i = 0; i < dim; ++i) { check("rmsnorm", h2f(out[r*dim+i]), x[r*dim+i]*sc*w[i], 2e-3);
          if (r == 2) check("rmsnorm_rows", h2f(out2[i]), x[r*dim+i]*sc*w[i], 2e-3);
          if (r == 0) check("rmsnorm_rows1", h2f(out2[dim+i]), x[r*dim+i]*sc*w[i], 2e-3); } } }
    // rope, both styles
    for (int inter = 0; inter < 2; ++inter) {
      int rows = 3, nh = 3, nkv = 2, hd = 8, qd = nh*hd, kvd = nkv*hd, stride = qd + 2*kvd, heads = nh + nkv; float theta = 10000, fs = 1.0f;
      std::vector<float> qkv(rows * stride); for (auto& v : qkv) v = rnd(); auto orig = qkv; std::vector<int> pos = {0, 5, 1017};
      long total = long(rows) * heads * hd / 2;
      launch(g1(total, 256), 256, [&] { rope(qkv.data(), pos.data(), rows, stride, heads, hd, theta, fs, inter); });
      for (int r = 0; r < rows; ++r) for (int h = 0; h < heads; ++h) for (int i = 0; i < hd/2; ++i) {
        double inv = std::pow(double(theta), -2.0 * i / hd); double p = pos[r] * double(fs);
        float c = std::cos(p*inv), sn = std::sin(p*inv);
        int a = inter ? 2*i : i, b = inter ? 2*i+1 : i + hd/2; const float* o = &orig[r*stride + h*hd];
        check("rope a", qkv[r*stride+h*hd+a], o[a]*c - o[b]*sn, 1e-5); check("rope b", qkv[r*stride+h*hd+b], o[a]*sn + o[b]*c, 1e-5); }
      for (int r = 0; r < rows; ++r) for (int j = heads*hd; j < stride; ++j) check("rope leaves v", qkv[r*stride+j], orig[r*stride+j], 0);
    }
    // kv_write + attention over a paged pool, ragged batch, multi-tile
    { int bs = 4, nl = 2, nh = 4, nkv = 2, hd = 8, kvd = nkv*hd, qd = nh*hd, stride = qd + 2*kvd, group = nh/nkv, npages = 60, layer = 1;
      long long pf = (long long)nl * 2 * bs * kvd, lf = 2LL * bs * kvd, voff = (long long)bs * kvd, layer_off = layer * lf;
      std::vector<float> pool(pf * npages); for (auto& v : pool) v = rnd();
      // item 0: positions 3..8 (5 new) on pages 5,1,3 ; item 1: decode at 150 on pages 10..47 (38 pages)
      std::vector<std::vector<int>> tables = {{5, 1, 3}, {}}; for (int p = 10; p < 48; ++p) tables[1].push_back(p);
      struct Row { int item, pos; }; std::vector<Row> rowsv = {{0,3},{0,4},{0,5},{0,6},{0,7},{1,150}};
      int rows = rowsv.size();
      std::vector<int> pos, row_item, pt, pt_off; std::vector<long long> dst;
      for (int i = 0; i < 2; ++i) { pt_off.push_back(pt.size()); for (int p : tables[i]) pt.push_back(p); }
      for (auto& r : rowsv) { pos.push_back(r.pos); row_item.push_back(r.item); int page = tables[r.item][r.pos / bs]; dst.push_back(page * pf + (long long)(r.pos % bs) * kvd); }
      std::vector<float> qkv(rows * stride); for (auto& v : qkv) v = rnd() * 2;
      launch(g1((long)rows * kvd, 256), 256, [&] { kv_write(qkv.data(), dst.data(), pool.data(), rows, stride, qd, kvd, layer_off, voff); });
      auto K = [&](int item, int p, int kh, int d) { int page = tables[item][p / bs]; return pool[page*pf + layer_off + (long long)(p % bs)*kvd + kh*hd + d]; };
      auto V = [&](int item, int p, int kh, int d) { int page = tables[item][p / bs]; return pool[page*pf + layer_off + voff + (long long)(p % bs)*kvd + kh*hd + d]; };
      for (int r = 0; r < rows; ++r) for (int j = 0; j < kvd; ++j) { check("kv_write k", K(rowsv[r].item, rowsv[r].pos, j / hd, j % hd), qkv[r*stride + qd + j], 0);
                                                                     check("kv_write v", V(rowsv[r].item, rowsv[r].pos, j / hd, j % hd), qkv[r*stride + qd + kvd + j], 0); }
      std::vector<half_t> out(rows * qd); float scale = 1.0f / std::sqrt(float(hd));
      unsigned threads = 128;
      launch({unsigned(rows), unsigned(nh), 1}, threads, [&] { attention(qkv.data(), pool.data(), pos.data(), row_item.data(), pt_off.data(), pt.data(), out.data(), stride, nh, group, hd, kvd, bs, pf, layer_off, scale); });
      for (int r = 0; r < rows; ++r) for (int h = 0; h < nh; ++h) {
        int n = rowsv[r].pos + 1, kh = h / group; std::vector<double> sc(n); double mx = -1e30;
        for (int p = 0; p < n; ++p) { double d = 0; for (int i = 0; i < hd; ++i) d += qkv[r*stride + h*hd + i] * K(rowsv[r].item, p, kh, i); sc[p] = d * scale; mx = std::max(mx, sc[p]); }
        double sum = 0; for (auto& v : sc) { v = std::exp(v - mx); sum += v; }
        for (int i = 0; i < hd; ++i) { double o = 0; for (int p = 0; p < n; ++p) o += sc[p] / sum * V(rowsv[r].item, p, kh, i); check("attention", h2f(out[r*qd + h*hd + i]), o, 2e-3); } } }
    // swiglu
    { int rows = 2, ffn = 10; std::vector<float> gu(rows * 2 * ffn); for (auto& v : gu) v = rnd() * 4; std::vector<half_t> out(rows * ffn);
      launch(g1(rows * ffn, 256), 256, [&] { swiglu(gu.data(), out.data(), rows, ffn); });
      for (int r = 0; r < rows; ++r) for (int c = 0; c < ffn; ++c) { float g = gu[r*2*ffn+c], u = gu[r*2*ffn+ffn+c]; check("swiglu", h2f(out[r*ffn+c]), g / (1 + std::exp(-g)) * u, 2e-3); } }
    printf("%s: %d failures\n", fails ? "FAILED" : "all kernels match", fails);
    return fails != 0;
}
