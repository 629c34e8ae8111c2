#include <string_view>
#include "mlir/IR/Builders.h"
