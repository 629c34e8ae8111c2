//===- device_radix_sort.cuh - CUB's pair sort for the emulator -*- C++ -*-===//
//
// cub::DeviceRadixSort::SortPairs as CUB documents it: a stable sort of
// (key, value) pairs on key bits [beginBit, endBit), asking for scratch
// first when called without it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_EMULATOR_CUB_DEVICE_RADIX_SORT_CUH
#define PARTITA_RUNTIME_CUDA_EMULATOR_CUB_DEVICE_RADIX_SORT_CUH

#include "Emulator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <typename Key, typename Value, typename Count>
  static cudaError_t
  SortPairs(void *scratch, size_t &scratchBytes, const Key *keysIn,
            Key *keysOut, const Value *valuesIn, Value *valuesOut, Count count,
            int beginBit = 0, int endBit = int(sizeof(Key) * 8),
            cudaStream_t stream = nullptr) {
    if (!scratch) {
      scratchBytes = 1;
      return cudaSuccess;
    }
    if (beginBit < 0 || endBit > int(sizeof(Key) * 8) || beginBit > endBit)
      return cudaErrorInvalidValue;
    partita::runtime::cuda::emulator::enqueue(stream, [=] {
      auto bits = [&](Key k) {
        Key shifted = Key(k >> beginBit);
        int width = endBit - beginBit;
        return width >= int(sizeof(Key) * 8)
                   ? shifted
                   : Key(shifted & ((Key(1) << width) - 1));
      };
      std::vector<size_t> order(static_cast<size_t>(count));
      std::iota(order.begin(), order.end(), size_t(0));
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return bits(keysIn[x]) < bits(keysIn[y]);
      });
      std::vector<Key> keys(order.size());
      std::vector<Value> values(order.size());
      for (size_t k = 0; k < order.size(); ++k) {
        keys[k] = keysIn[order[k]];
        values[k] = valuesIn[order[k]];
      }
      std::copy(keys.begin(), keys.end(), keysOut);
      std::copy(values.begin(), values.end(), valuesOut);
    });
    return cudaSuccess;
  }
};

} // namespace cub

#endif // PARTITA_RUNTIME_CUDA_EMULATOR_CUB_DEVICE_RADIX_SORT_CUH
