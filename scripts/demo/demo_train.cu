// demo_train.cu: the GPU-free half of `labelguard demo` (python/labelguard/commands/demo.py runs it).
// A "training loop" of 60 steps; each step launches PyTorch's CrossEntropy forward kernel,
// at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float,float,long>,
// declared as PyTorch declares it, on a batch of 64 labels of 10 classes. Step 37's batch comes
// from a 1-based label file (labels 1..10, so every 9 became a 10). Like PyTorch it checks cudaGetLastError after each launch
// (C10_CUDA_KERNEL_LAUNCH_CHECK) and reads the loss back (loss.item()); on an error it prints it
// the way PyTorch raises it, then tries to copy the batch's labels to the host, which shows
// whether the CUDA context is still alive. It then skips the batch, as `except RuntimeError:
// continue` would, or stops when the context is dead.
// Built by `make demo` into $(BUILD)/demo/demo_train with -cudart shared, run under the runtime
// test double (build/fakecuda) with and without the guard. Tested by tests/cli/test_demo.sh.
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

namespace at { namespace native { namespace {

// The body matters on a real GPU only (under the test double an emulator runs instead); it
// computes the same sum as PyTorch's kernel, without the block reduction.
template <typename scalar_t, typename accscalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_2d(
    scalar_t* output, scalar_t* total_weight, const scalar_t* input, const index_t* target,
    const scalar_t* weights, bool size_average, int64_t nframe, int64_t ndim,
    int64_t n_classes, int64_t ignore_index) {
  if (threadIdx.x != 0) return;
  accscalar_t sum = 0, wsum = 0;
  for (int64_t i = 0; i < nframe; i++) {
    index_t t = target[i];
    if (t == ignore_index) continue;
    assert(t >= 0 && t < n_classes);  // CUDA_KERNEL_ASSERT in PyTorch
    accscalar_t w = weights ? weights[t] : accscalar_t(1);
    sum -= input[i * ndim + t] * w;
    wsum += w;
  }
  *total_weight = wsum;
  *output = size_average && wsum != 0 ? sum / wsum : sum;
}

template __global__ void nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(
    float*, float*, const float*, const long*, const float*, bool, long, long, long, long);

}}}  // namespace at::native::(anonymous)

namespace {

const int kSteps = 60, kBatch = 64, kClasses = 10, kBadStep = 37;
const long kIgnoreIndex = -100;

bool show_step(int step) {
  return step % 10 == 0 || (step >= kBadStep - 1 && step <= kBadStep + 1) || step == kSteps - 1;
}

// After an error: can the batch's labels still be read back? That is what a person debugging
// the job needs, and what a device-side assert takes away.
bool inspect_labels(const long *d_target) {
  long host[kBatch];
  cudaError_t e = cudaMemcpy(host, d_target, sizeof host, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    printf("    inspecting the batch: labels.cpu() -> CUDA error: %s\n", cudaGetErrorString(e));
    printf("    => the CUDA context is dead: nothing on the GPU can be read any more.\n");
    return false;
  }
  printf("    inspecting the batch: labels.cpu() works, the CUDA context is alive:\n");
  for (int i = 0; i < kBatch; i++)
    if (host[i] < 0 || host[i] >= kClasses) printf("      labels[%d] = %ld  (n_classes = %d)\n", i, host[i], kClasses);
  return true;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // keep our lines in order with the guard's stderr report
  float *d_out, *d_total, *d_input;
  long *d_target;
  if (cudaMalloc(&d_out, sizeof(float)) || cudaMalloc(&d_total, sizeof(float)) ||
      cudaMalloc(&d_input, sizeof(float) * kBatch * kClasses) || cudaMalloc(&d_target, sizeof(long) * kBatch)) {
    printf("cudaMalloc failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  int done = 0, skipped = 0;
  for (int step = 0; step < kSteps; step++) {
    // A deterministic batch: the model grows more confident in the right class as it trains.
    static float input[kBatch * kClasses];
    long target[kBatch];
    for (int i = 0; i < kBatch; i++) {
      target[i] = (i * 7 + step * 3) % kClasses;
      float right = -2.3f * (1.0f - step / 80.0f), wrong = -2.3f - step / 40.0f;
      for (int c = 0; c < kClasses; c++) input[i * kClasses + c] = c == target[i] ? right : wrong;
    }
    if (step == kBadStep)  // a batch read with 1-based labels: 1..10 with 10 classes
      for (int i = 0; i < kBatch; i++) target[i] += 1;
    cudaMemcpy(d_input, input, sizeof input, cudaMemcpyHostToDevice);
    cudaError_t e = cudaMemcpy(d_target, target, sizeof target, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      printf("step %2d: RuntimeError: CUDA error: %s (copying the batch to the GPU)\n", step, cudaGetErrorString(e));
      printf("    => the CUDA context is dead; the job ends here, after %d of %d steps.\n", done, kSteps);
      return 1;
    }
    at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long><<<1, 32>>>(
        d_out, d_total, d_input, d_target, nullptr, true, kBatch, kClasses, kClasses, kIgnoreIndex);
    e = cudaGetLastError();  // C10_CUDA_KERNEL_LAUNCH_CHECK()
    const char *where = "at the loss call, F.cross_entropy";
    float loss = 0, total = 0;
    if (e == cudaSuccess) {
      e = cudaMemcpy(&loss, d_out, sizeof loss, cudaMemcpyDeviceToHost);  // loss.item()
      if (e == cudaSuccess) e = cudaMemcpy(&total, d_total, sizeof total, cudaMemcpyDeviceToHost);
      where = "at loss.item(), long after the kernel that failed";
    }
    if (e != cudaSuccess) {
      printf("step %2d: RuntimeError: CUDA error: %s\n    (raised %s)\n", step, cudaGetErrorString(e), where);
      if (!inspect_labels(d_target)) {
        printf("    => the job ends here, after %d of %d steps.\n", done, kSteps);
        return 1;
      }
      printf("    => the training loop catches the exception, skips this batch and goes on.\n");
      skipped++;
      continue;
    }
    done++;
    if (show_step(step) || total != kBatch) {
      printf("step %2d: loss %.4f", step, loss);
      if (total != kBatch) printf("   (%d of %d labels counted: the bad ones were masked)", (int)total, kBatch);
      printf("\n");
    }
  }
  printf("finished: %d of %d steps trained, %d skipped.\n", done, kSteps, skipped);
  return 0;
}
