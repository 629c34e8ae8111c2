#include "compiler/Fine.h"
#include "partita/runtime/Plan.h"
