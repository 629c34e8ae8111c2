//===- CublasLt.cpp - The cuBLASLt calls of the backend, on the CPU -------===//
//
// The matmuls the backend asks of cuBLASLt, as its documentation defines
// them: column-major layouts, D = alpha op(A) op(B) + beta C, and the BIAS
// epilogue adding a vector of D's type down each column. Descriptors are
// checked as cuBLASLt checks them: layouts that do not fit the operation
// or a leading dimension below the rows are invalid, types outside
// f32/bf16 with f32 compute are not supported. Inputs are rounded to the
// compute type's precision (tf32, bf16) and products summed in f32, as on
// tensor cores; the order of the sums differs from any GPU's.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include "partita/runtime/Bf16.h"

#include <cublasLt.h>

#include <cmath>
#include <cstring>
#include <new>
#include <vector>

struct cublasLtContext {};

namespace {

struct Desc {
  cublasComputeType_t compute;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
};
struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t) &&
                  sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t),
              "the descriptors live in cuBLASLt's opaque structs");

Desc &desc(cublasLtMatmulDesc_t d) { return *reinterpret_cast<Desc *>(d); }
const Layout &layout(cublasLtMatrixLayout_t l) {
  return *reinterpret_cast<const Layout *>(l);
}

template <typename T>
cublasStatus_t setFrom(T &field, const void *buf, size_t bytes) {
  if (bytes != sizeof(T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool f32OrBf16(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF;
}

/// Whether the layouts fit D = op(A) op(B) + C and the types are ones the
/// backend's matmuls use: INVALID_VALUE or NOT_SUPPORTED otherwise.
cublasStatus_t validate(const Desc &d, const Layout &a, const Layout &b,
                        const Layout &c, const Layout &dl) {
  for (const Layout *l : {&a, &b, &c, &dl})
    if (l->ld < int64_t(l->rows) || l->ld < 1)
      return CUBLAS_STATUS_INVALID_VALUE;
  uint64_t m = d.transA == CUBLAS_OP_N ? a.rows : a.cols;
  uint64_t k = d.transA == CUBLAS_OP_N ? a.cols : a.rows;
  uint64_t kb = d.transB == CUBLAS_OP_N ? b.rows : b.cols;
  uint64_t n = d.transB == CUBLAS_OP_N ? b.cols : b.rows;
  if (k != kb || c.rows != m || c.cols != n || dl.rows != m || dl.cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (c.type != dl.type || a.type != b.type || !f32OrBf16(a.type) ||
      !f32OrBf16(c.type))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // bf16 inputs accumulate in f32 into f32 or bf16; f32 inputs into f32.
  bool bf16In = a.type == CUDA_R_16BF;
  bool computeOk = bf16In ? d.compute == CUBLAS_COMPUTE_32F
                          : d.compute == CUBLAS_COMPUTE_32F ||
                                d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                                d.compute == CUBLAS_COMPUTE_32F_FAST_16BF;
  if (!computeOk || (!bf16In && c.type != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
      d.epilogue != CUBLASLT_EPILOGUE_BIAS)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

float read(const void *p, cudaDataType type, int64_t i) {
  if (type == CUDA_R_16BF)
    return partita::runtime::fromBf16(static_cast<const uint16_t *>(p)[i]);
  return static_cast<const float *>(p)[i];
}

void write(void *p, cudaDataType type, int64_t i, float v) {
  if (type == CUDA_R_16BF)
    static_cast<uint16_t *>(p)[i] = partita::runtime::toBf16(v);
  else
    static_cast<float *>(p)[i] = v;
}

/// An f32 input as the compute type's tensor cores see it.
float rounded(float v, cublasComputeType_t compute) {
  if (compute == CUBLAS_COMPUTE_32F_FAST_16BF)
    return partita::runtime::fromBf16(partita::runtime::toBf16(v));
  if (compute == CUBLAS_COMPUTE_32F_FAST_TF32 && std::isfinite(v)) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = (bits + (1u << 12)) & ~((1u << 13) - 1); // 10 mantissa bits
    std::memcpy(&v, &bits, 4);
  }
  return v;
}

/// op(X) of a column-major layout as a dense [rows][inner] f32 matrix:
/// row r of op(X) when `transposed` is false reads X(r, i), else X(i, r).
std::vector<float> rowsOf(const void *x, const Layout &l, bool transposed,
                          uint64_t rows, uint64_t inner,
                          cublasComputeType_t compute) {
  std::vector<float> out(rows * inner);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t i = 0; i < inner; ++i) {
      int64_t at = transposed ? int64_t(i) + int64_t(r) * l.ld
                              : int64_t(r) + int64_t(i) * l.ld;
      out[r * inner + i] = rounded(read(x, l.type, at), compute);
    }
  return out;
}

} // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scaleType) {
  if (scaleType != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *d = new cublasLtMatmulDescOpaque_t;
  new (*d) Desc{compute};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                               cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t bytes) {
  Desc &s = desc(d);
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setFrom(s.transA, buf, bytes);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setFrom(s.transB, buf, bytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setFrom(s.epilogue, buf, bytes);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setFrom(s.bias, buf, bytes);
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *l = new cublasLtMatrixLayoutOpaque_t;
  new (*l) Layout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                     cublasLtMatmulPreferenceAttributes_t attr,
                                     const void *, size_t) {
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return CUBLAS_STATUS_SUCCESS;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *found) {
  *found = 0;
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t status =
      validate(desc(d), layout(a), layout(b), layout(c), layout(dl));
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  std::memset(&results[0], 0, sizeof(results[0]));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B,
                              cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D,
                              cublasLtMatrixLayout_t dl,
                              const cublasLtMatmulAlgo_t *, void *, size_t,
                              cudaStream_t stream) {
  // The descriptors and the host scalars are read now, as cuBLASLt reads
  // them when the call enqueues the product; the caller may free them.
  Desc s = desc(d);
  Layout la = layout(a), lb = layout(b), lc = layout(c), ld = layout(dl);
  cublasStatus_t status = validate(s, la, lb, lc, ld);
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  if (s.epilogue == CUBLASLT_EPILOGUE_BIAS && !s.bias)
    return CUBLAS_STATUS_INVALID_VALUE;
  float scale = *static_cast<const float *>(alpha);
  float keep = *static_cast<const float *>(beta);
  partita::runtime::cuda::emulator::enqueue(stream, [=] {
    bool transA = s.transA != CUBLAS_OP_N, transB = s.transB != CUBLAS_OP_N;
    uint64_t m = ld.rows, n = ld.cols, k = transA ? la.rows : la.cols;
    // Row i of op(A), and column j of op(B) (row j of op(B)^T).
    std::vector<float> rowsA = rowsOf(A, la, transA, m, k, s.compute);
    std::vector<float> colsB = rowsOf(B, lb, !transB, n, k, s.compute);
    std::vector<float> result(m * n);
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < m; ++i) {
        float sum = 0;
        for (uint64_t l = 0; l < k; ++l)
          sum += rowsA[i * k + l] * colsB[j * k + l];
        float v = scale * sum;
        if (keep != 0)
          v += keep * read(C, lc.type, int64_t(i) + int64_t(j) * lc.ld);
        if (s.epilogue == CUBLASLT_EPILOGUE_BIAS)
          v += read(s.bias, ld.type, int64_t(i));
        result[j * m + i] = v;
      }
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < m; ++i)
        write(D, ld.type, int64_t(i) + int64_t(j) * ld.ld, result[j * m + i]);
  });
  return CUBLAS_STATUS_SUCCESS;
}
