#pragma once
// cuDNN's backend (graph) API, resolved at run time from libcudnn.so.9 (dlopen), so that a
// binary built with cuDNN support still runs, on lcr's own kernels, where no cuDNN is
// installed. Only the types and enums come from the header (cudnn_graph.h); every function
// is called through the table below. LCR_CUDNN_LIBRARY names the library file to load
// instead of the one the dynamic loader finds (LD_LIBRARY_PATH, the system paths).
#include <cudnn_graph.h>

#include <string>

namespace lcr::cuda::cudnn {

struct Api {
  size_t (*GetVersion)();
  const char* (*GetErrorString)(cudnnStatus_t);
  void (*GetLastErrorString)(char*, size_t);
  cudnnStatus_t (*Create)(cudnnHandle_t*);
  cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t);
  cudnnStatus_t (*CreateDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t*);
  cudnnStatus_t (*DestroyDescriptor)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*Finalize)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*SetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, const void*);
  cudnnStatus_t (*GetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, int64_t*, void*);
  cudnnStatus_t (*Execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
};

// The loaded API, or null with *why saying what failed (library not found, a symbol
// missing, a cuDNN older than 9.10). Loads once per process; thread-safe.
const Api* api(std::string* why);

// The status name and cuDNN's own last message, for error texts.
std::string status_text(const Api& api, cudnnStatus_t s);

}  // namespace lcr::cuda::cudnn
