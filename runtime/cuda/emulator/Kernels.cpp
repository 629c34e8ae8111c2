//===- Kernels.cpp - Kernels.cu built for the CUDA emulator ---------------===//

#include "Prelude.h"

#include "../Kernels.cu"
