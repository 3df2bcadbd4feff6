//===- Launch.cpp - One process per GPU -----------------------------------===//

#include "tools/zrun/Launch.h"

#include <arpa/inet.h>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace zcc {

namespace {

const char *env(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

Status readInt(const char *name, int &value) {
  const char *text = env(name);
  char *end = nullptr;
  long parsed = std::strtol(text, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > (1 << 20))
    return makeStatus(StatusCode::kInvalidArgument,
                      "environment variable %s=%s: expected a non-negative integer",
                      name, text);
  value = static_cast<int>(parsed);
  return Status::ok();
}

std::string describeExit(int status) {
  if (WIFSIGNALED(status))
    return formatString("was killed by signal %d (%s)", WTERMSIG(status),
                        strsignal(WTERMSIG(status)));
  return formatString("exited with status %d", WEXITSTATUS(status));
}

/// Reads or writes exactly `bytes`, or fails.
bool transfer(int fd, char *data, size_t bytes, bool sending) {
  while (bytes) {
    ssize_t done = sending ? ::send(fd, data, bytes, MSG_NOSIGNAL) : ::recv(fd, data, bytes, 0);
    if (done <= 0) {
      if (done < 0 && errno == EINTR)
        continue;
      return false;
    }
    data += done;
    bytes -= static_cast<size_t>(done);
  }
  return true;
}

} // namespace

StatusOr<ProcessRole> processRole() {
  ProcessRole role;
  // Variable names of each launcher: rank, world size, local rank.
  struct Scheme {
    const char *rank, *world, *local;
  };
  const Scheme schemes[] = {
      {"ZCC_RANK", "ZCC_WORLD_SIZE", "ZCC_LOCAL_RANK"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  for (const Scheme &scheme : schemes) {
    if (!env(scheme.rank))
      continue;
    if (!env(scheme.world))
      return makeStatus(StatusCode::kInvalidArgument,
                        "%s is set but %s is not; set both (and %s) or neither",
                        scheme.rank, scheme.world, scheme.local);
    role.isRank = true;
    Status read = readInt(scheme.rank, role.rank);
    if (read.isOk())
      read = readInt(scheme.world, role.worldSize);
    role.localRank = role.rank;
    if (read.isOk() && env(scheme.local))
      read = readInt(scheme.local, role.localRank);
    if (!read.isOk())
      return read;
    if (role.rank >= role.worldSize)
      return makeStatus(StatusCode::kInvalidArgument, "%s=%d is not below %s=%d",
                        scheme.rank, role.rank, scheme.world, role.worldSize);
    break;
  }
  if (!role.isRank)
    return role;
  if (const char *id = env("ZCC_NCCL_ID"))
    role.ncclIdHex = id;
  if (role.ncclIdHex.empty() && role.worldSize > 1) {
    const char *address = env("MASTER_ADDR");
    const char *port = env("MASTER_PORT");
    if (!address || !port)
      return Status(StatusCode::kInvalidArgument,
                    "a rank started by an outside launcher needs MASTER_ADDR and "
                    "MASTER_PORT (rank 0's host and a free port) to exchange the NCCL id");
    role.masterAddress = address;
    Status read = readInt("MASTER_PORT", role.masterPort);
    if (!read.isOk())
      return read;
  }
  return role;
}

Status launchRanks(char **argv, int worldSize, const std::string &ncclIdHex,
                   std::chrono::seconds grace) {
  std::vector<pid_t> pids(worldSize, -1);
  std::vector<std::string> environment;
  for (char **entry = environ; *entry; ++entry) {
    std::string variable = *entry;
    // The launcher's own rank variables (e.g. under an outer torchrun) must
    // not leak into the ranks it starts.
    if (variable.rfind("ZCC_RANK=", 0) == 0 || variable.rfind("ZCC_LOCAL_RANK=", 0) == 0 ||
        variable.rfind("ZCC_WORLD_SIZE=", 0) == 0 || variable.rfind("ZCC_NCCL_ID=", 0) == 0 ||
        variable.rfind("RANK=", 0) == 0 || variable.rfind("WORLD_SIZE=", 0) == 0 ||
        variable.rfind("LOCAL_RANK=", 0) == 0)
      continue;
    environment.push_back(variable);
  }
  Status failure = Status::ok();
  for (int rank = 0; rank < worldSize; ++rank) {
    std::vector<std::string> rankEnvironment = environment;
    rankEnvironment.push_back(formatString("ZCC_RANK=%d", rank));
    rankEnvironment.push_back(formatString("ZCC_LOCAL_RANK=%d", rank));
    rankEnvironment.push_back(formatString("ZCC_WORLD_SIZE=%d", worldSize));
    rankEnvironment.push_back("ZCC_NCCL_ID=" + ncclIdHex);
    std::vector<char *> envp;
    for (std::string &variable : rankEnvironment)
      envp.push_back(variable.data());
    envp.push_back(nullptr);
    pid_t pid = -1;
    int spawned = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data());
    if (spawned != 0) {
      failure = makeStatus(StatusCode::kInternal, "cannot start rank %d: %s", rank,
                           std::strerror(spawned));
      break;
    }
    pids[rank] = pid;
  }

  int running = 0;
  for (pid_t pid : pids)
    running += pid > 0;
  if (!failure.isOk())
    for (pid_t pid : pids)
      if (pid > 0)
        ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::time_point::max();
  bool killed = false;
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno != EINTR)
      break;
    if (pid <= 0) {
      if (!killed && std::chrono::steady_clock::now() > deadline) {
        for (int rank = 0; rank < worldSize; ++rank)
          if (pids[rank] > 0) {
            std::fprintf(stderr,
                         "zrun: rank %d still runs %lld s after the job failed; killing it\n",
                         rank, static_cast<long long>(grace.count()));
            ::kill(pids[rank], SIGKILL);
          }
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    int rank = 0;
    while (rank < worldSize && pids[rank] != pid)
      ++rank;
    if (rank == worldSize)
      continue;
    pids[rank] = -1;
    --running;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failure.isOk()) {
      failure = makeStatus(StatusCode::kUnavailable, "rank %d of %d %s", rank, worldSize,
                           describeExit(status).c_str());
      // A rank that died without a word (a signal) cannot have told the
      // others: say so now, while they wait on their timeout.
      if (WIFSIGNALED(status))
        std::fprintf(stderr, "zrun: rank %d %s; the other ranks stop within %lld s\n", rank,
                     describeExit(status).c_str(), static_cast<long long>(grace.count()));
      deadline = std::chrono::steady_clock::now() + grace;
    }
  }
  return failure;
}

Status exchangeNcclId(const ProcessRole &role, std::string &idHex,
                      std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string port = std::to_string(role.masterPort);
  if (role.rank == 0) {
    hints.ai_flags = AI_PASSIVE;
    addrinfo *found = nullptr;
    if (getaddrinfo(nullptr, port.c_str(), &hints, &found) != 0 || !found)
      return makeStatus(StatusCode::kUnavailable, "cannot listen on port %d", role.masterPort);
    int listener = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    int yes = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    bool bound = listener >= 0 && ::bind(listener, found->ai_addr, found->ai_addrlen) == 0 &&
                 ::listen(listener, role.worldSize) == 0;
    freeaddrinfo(found);
    if (!bound) {
      if (listener >= 0)
        ::close(listener);
      return makeStatus(StatusCode::kUnavailable,
                        "rank 0 cannot listen on MASTER_PORT=%d: %s; pick a free port",
                        role.masterPort, std::strerror(errno));
    }
    int served = 0;
    while (served < role.worldSize - 1) {
      pollfd waiting{listener, POLLIN, 0};
      if (std::chrono::steady_clock::now() > deadline) {
        ::close(listener);
        return makeStatus(StatusCode::kDeadlineExceeded,
                          "rank 0: only %d of the %d other ranks connected to port %d "
                          "within %lld s",
                          served, role.worldSize - 1, role.masterPort,
                          static_cast<long long>(timeout.count()));
      }
      if (::poll(&waiting, 1, 100) <= 0)
        continue;
      int peer = ::accept(listener, nullptr, nullptr);
      if (peer < 0)
        continue;
      bool sent = transfer(peer, idHex.data(), idHex.size(), true);
      ::close(peer);
      served += sent;
    }
    ::close(listener);
    return Status::ok();
  }
  idHex.assign(256, '\0');
  for (;;) {
    addrinfo *found = nullptr;
    if (getaddrinfo(role.masterAddress.c_str(), port.c_str(), &hints, &found) == 0 && found) {
      int fd = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
      bool connected = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0;
      freeaddrinfo(found);
      if (connected && transfer(fd, idHex.data(), idHex.size(), false)) {
        ::close(fd);
        return Status::ok();
      }
      if (fd >= 0)
        ::close(fd);
    }
    if (std::chrono::steady_clock::now() > deadline)
      return makeStatus(StatusCode::kDeadlineExceeded,
                        "rank %d could not get the NCCL id from rank 0 at %s:%d within %lld s",
                        role.rank, role.masterAddress.c_str(), role.masterPort,
                        static_cast<long long>(timeout.count()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

} // namespace zcc
