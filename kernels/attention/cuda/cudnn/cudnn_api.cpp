// Loads libcudnn.so.9 once and resolves the backend API (cudnn_api.hpp).
#include "kernels/attention/cuda/cudnn/cudnn_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace lcr::cuda::cudnn {
namespace {

// The fused attention graphs (SDPA forward/backward patterns with GEN_INDEX causal masks
// and -inf fill) are recognised from cuDNN 9.10 on; older 9.x builds need other graphs.
constexpr size_t kMinVersion = 91000;

struct Loaded {
  Api api{};
  std::string why;  // empty when api is usable
};

template <class F>
bool resolve(void* lib, const char* name, F& fn, std::string& why) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) why = std::string("symbol ") + name + " missing from the cuDNN library";
  return fn != nullptr;
}

Loaded load() {
  Loaded l;
  const char* path = std::getenv("LCR_CUDNN_LIBRARY");
  const char* file = path && *path ? path : "libcudnn.so.9";
  void* lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    l.why = std::string("cannot load ") + file + " (" + (e ? e : "unknown") +
            "); put cuDNN 9's lib folder on LD_LIBRARY_PATH or set LCR_CUDNN_LIBRARY";
    return l;
  }
  Api& a = l.api;
  std::string& w = l.why;
  const bool ok = resolve(lib, "cudnnGetVersion", a.GetVersion, w) &&
                  resolve(lib, "cudnnGetErrorString", a.GetErrorString, w) &&
                  resolve(lib, "cudnnGetLastErrorString", a.GetLastErrorString, w) &&
                  resolve(lib, "cudnnCreate", a.Create, w) &&
                  resolve(lib, "cudnnSetStream", a.SetStream, w) &&
                  resolve(lib, "cudnnBackendCreateDescriptor", a.CreateDescriptor, w) &&
                  resolve(lib, "cudnnBackendDestroyDescriptor", a.DestroyDescriptor, w) &&
                  resolve(lib, "cudnnBackendFinalize", a.Finalize, w) &&
                  resolve(lib, "cudnnBackendSetAttribute", a.SetAttribute, w) &&
                  resolve(lib, "cudnnBackendGetAttribute", a.GetAttribute, w) &&
                  resolve(lib, "cudnnBackendExecute", a.Execute, w);
  if (!ok) return l;
  const size_t v = a.GetVersion();
  if (v < kMinVersion)
    w = "cuDNN " + std::to_string(v) + " is older than 9.10 (" + std::to_string(kMinVersion) +
        "), which lcr's attention graphs need";
  return l;  // the library stays loaded for the life of the process
}

}  // namespace

const Api* api(std::string* why) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.why.empty()) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

std::string status_text(const Api& api, cudnnStatus_t s) {
  char last[512] = {0};
  api.GetLastErrorString(last, sizeof last);
  std::string t = api.GetErrorString(s);
  if (last[0]) t += std::string(": ") + last;
  return t;
}

}  // namespace lcr::cuda::cudnn
