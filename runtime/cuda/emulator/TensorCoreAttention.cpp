//===- TensorCoreAttention.cpp - The WMMA kernels for the emulator --------===//

#include "Prelude.h"

#include "../TensorCoreAttention.cu"
