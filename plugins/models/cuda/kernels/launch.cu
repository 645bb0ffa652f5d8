#include <string>

#include "launch.cuh"

namespace headway::models::cuda::kernels {
namespace {

// Built with the same flags as every kernel of the library: its PTX version is theirs.
__global__ void overlap_probe_kernel() { detail::wait_for_previous_kernel<true>(); }

}  // namespace

std::string overlapped_launch_problem(int device) {
  cudaError_t err = cudaSetDevice(device);
  int major = 0;
  int minor = 0;
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  }
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  }
  if (err != cudaSuccess) return std::string("device query failed: ") + cudaGetErrorString(err);
  if (major < 9) {
    return "GPU " + std::to_string(device) + " has compute capability " + std::to_string(major) +
           "." + std::to_string(minor) + "; programmatic dependent launch needs 9.0 (Hopper)";
  }
  cudaFuncAttributes attributes{};
  err = cudaFuncGetAttributes(&attributes, overlap_probe_kernel);
  if (err != cudaSuccess) return std::string("cudaFuncGetAttributes: ") + cudaGetErrorString(err);
  if (attributes.ptxVersion < 90) {
    return "the kernels were built for compute_" + std::to_string(attributes.ptxVersion) +
           ", where their wait for the previous kernel compiles away; build them for sm_90a "
           "(CMAKE_CUDA_ARCHITECTURES=90a)";
  }
  return "";
}

}  // namespace headway::models::cuda::kernels
