//===- LlvmAsanOptions.cpp - ASan defaults for fuzzers that link LLVM -----===//
//
// The LLVM and MLIR libraries from Debian are not instrumented, but their
// headers are compiled into ours: BumpPtrAllocator, inlined here, poisons a
// new slab's free space, and the libraries' own allocations from that slab
// write to it without unpoisoning (a false "use-after-poison" in
// StringAttr::get). Without user poisoning ASan keeps every check of its
// own: heap and stack bounds, use after free, use after scope.
//
//===----------------------------------------------------------------------===//

extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}
