// A GPU-only path that calls a function the emulator lacks.
#ifndef PARTITA_CUDA_EMULATOR
void prefetch(void *p, unsigned long n) { cudaMemPrefetchAsync(p, n, 0, 0); }
#endif
// cudaLaunchHostFunc(...) in a comment is not a call.
void copy(void *to, const void *from, unsigned long n) {
  cudaMemcpyAsync(to, from, n, cudaMemcpyDefault, nullptr);
}
// The backend's own function, declared and called: not an entry point.
int cudaDevicesSeen(int *count);
int seen() { return cudaDevicesSeen(nullptr); }
