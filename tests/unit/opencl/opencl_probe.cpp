// SPDX-License-Identifier: Apache-2.0
// Test helper run as a separate process (the loader and the device list are read once per
// process, so a test of another environment needs another process).
//   opencl_probe build <cache dir>  -> builds one kernel through the disk cache and runs it;
//                                      prints "built" or "disk hit"
//   opencl_probe devices            -> prints "<count>\n<unavailable reason>\n", then what
//                                      make_client("opencl:0") says
//   opencl_probe fork               -> a child forked before the driver starts uses OpenCL; one
//                                      forked after gets unsupported; prints one line each
#include "channel/channel.hpp"
#include "opencl_server.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/opencl.hpp>

#include <cstdio>
#include <cstring>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

cubert::kernel probe_kernel() {
  return cubert::kernel::builder("opencl_probe::scale")
      .cube_dim(64)
      .opencl_source(R"(__kernel void scale(__global float* x, float a, uint n) {
  size_t i = get_global_id(0);
  if (i < n) x[i] *= a;
})",
                     "scale")
      .build();
}

// Scales 100 floats by 3 on a client of opencl:0; true when the result is right.
bool scales(cubert::client const& c) {
  std::vector<float> xs(100, 2.f);
  auto h = c.create(std::as_bytes(std::span{xs}));
  c.execute(probe_kernel(), cubert::cube_count{2},
            cubert::bindings{}.with_buffer(h.binding()).with_scalar(3.f).with_scalar(100u));
  auto const out = c.read_one(h.binding());
  float last = 0;
  std::memcpy(&last, out.data() + 99 * sizeof(float), sizeof last);
  return last == 6.f;
}

int build(char const* dir) {
  cubert::opencl::options opts;
  opts.kernel_cache_dir = dir;
  auto server = cubert::opencl::make_server(0, opts);
  auto const* cl = dynamic_cast<cubert::opencl::detail::opencl_server*>(server.get());
  cubert::client c(cubert::backend::make_channel(std::move(server), cubert::channel_kind::mutex));
  if (!scales(c)) {
    std::fprintf(stderr, "opencl_probe: the kernel computed a wrong result\n");
    return 1;
  }
  auto const& stats = cl->kernel_stats();
  std::printf("%s\n", stats.disk_hits == 1 && stats.built == 0   ? "disk hit"
                      : stats.built == 1 && stats.disk_hits == 0 ? "built"
                                                                 : "neither");
  return 0;
}

// Runs `child` in a fork() child (which ends with _Exit: nothing of the parent is torn down
// there) and returns its exit status.
template <typename F>
int in_child(F&& child) {
  std::fflush(stdout);
  pid_t const pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int code = 3;
    try {
      code = child();
    } catch (std::exception const& e) {
      std::printf("child: %s\n", e.what());
    }
    std::fflush(stdout);
    std::_Exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int forks() {
  // Before the parent starts the driver: the child lists devices and computes on its own.
  int const before = in_child([] {
    std::printf("before: %s\n", scales(cubert::make_client("opencl:0")) ? "works" : "wrong");
    return 0;
  });
  auto const parent = cubert::make_client("opencl:0");
  bool const parent_ok = scales(parent);
  // After: no device, a clear refusal, and the parent's client refuses too, without hanging.
  int const after = in_child([&parent] {
    std::printf("after: %d devices\n", cubert::opencl::device_count());
    try {
      (void)cubert::make_client("opencl:0");
      std::printf("after: a client was made\n");
    } catch (cubert::unsupported const& e) {
      std::printf("after: unsupported: %s\n", e.what());
    }
    try {
      (void)parent.empty(64);
      std::printf("after: the parent's client worked\n");
    } catch (cubert::unsupported const&) {
      std::printf("after: the parent's client: unsupported\n");
    }
    return 0;
  });
  std::printf("parent: %s\n", parent_ok && scales(parent) ? "works" : "wrong");
  return before == 0 && after == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string_view(argv[1]) == "build") return build(argv[2]);
    if (argc == 2 && std::string_view(argv[1]) == "fork") return forks();
    if (argc == 2 && std::string_view(argv[1]) == "devices") {
      std::printf("%d\n%s\n", cubert::opencl::device_count(),
                  cubert::opencl::unavailable_reason().c_str());
      try {
        auto const c = cubert::make_client("opencl:0");
        std::printf("client of %s\n", c.properties().name.c_str());
      } catch (cubert::unsupported const& e) {
        std::printf("unsupported: %s\n", e.what());
      }
      return 0;
    }
    std::fprintf(stderr, "usage: opencl_probe build <dir> | devices | fork\n");
    return 2;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "opencl_probe: %s\n", e.what());
    return 1;
  }
}
