//===- CudaPlugin.cpp - Loading the cuda backend --------------------------===//

#include "runtime/CudaPlugin.h"

#include <cstdlib>
#include <dlfcn.h>
#include <limits.h>
#include <mutex>
#include <unistd.h>
#include <vector>

namespace zcc {

namespace {

std::string programDirectory() {
  char path[PATH_MAX];
  ssize_t length = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0)
    return ".";
  std::string exe(path, static_cast<size_t>(length));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

StatusOr<const CudaPlugin *> load() {
  std::vector<std::string> candidates;
  if (const char *forced = std::getenv("ZCC_CUDA_PLUGIN"); forced && *forced) {
    candidates.push_back(forced);
  } else {
    std::string dir = programDirectory();
    candidates = {dir + "/../lib/libzcc_cuda.so", dir + "/libzcc_cuda.so"};
  }
  std::string tried;
  for (const std::string &path : candidates) {
    if (::access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return Status(StatusCode::kUnavailable,
                    "cannot load the cuda backend " + path + ": " + ::dlerror() +
                        " (is the CUDA toolkit's library folder on the loader's path?); "
                        "run with --backend cpu");
    auto entry = reinterpret_cast<const CudaPlugin *(*)()>(::dlsym(handle, "zccCudaPlugin"));
    if (!entry)
      return Status(StatusCode::kUnavailable, path + " is not zcc's cuda backend (no zccCudaPlugin)");
    const CudaPlugin *plugin = entry();
    if (!plugin || plugin->abi != kCudaPluginAbi)
      return Status(StatusCode::kUnavailable,
                    path + " is from another build of zcc; rebuild zrun and the plugin together");
    return plugin;
  }
  return Status(StatusCode::kUnavailable,
                "this zrun has no cuda backend (no " + tried +
                    "; it is built where the CUDA toolkit is found); run with --backend cpu");
}

} // namespace

StatusOr<const CudaPlugin *> loadCudaPlugin() {
  static std::once_flag once;
  static StatusOr<const CudaPlugin *> *loaded = nullptr;
  std::call_once(once, [] { loaded = new StatusOr<const CudaPlugin *>(load()); });
  return *loaded;
}

} // namespace zcc
