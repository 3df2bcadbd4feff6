//===- Launch.h - One process per GPU ---------------------------*- C++ -*-===//
//
// On the cuda backend a job of N ranks runs one process per GPU. `zrun
// --nproc N` is the launcher: it makes the NCCL unique id, starts N copies
// of itself with ZCC_RANK, ZCC_LOCAL_RANK, ZCC_WORLD_SIZE and ZCC_NCCL_ID
// set, and waits. A rank that dies makes the launcher say which and how;
// the others end on their communicator's timeout, and whatever is still
// running after that grace is killed, so a job never hangs. Multi-node
// jobs start one zrun per GPU themselves, torchrun-style (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or under Slurm (SLURM_PROCID, ...)
// or Open MPI (OMPI_COMM_WORLD_RANK, ...); rank 0 then sends the NCCL id to
// the others over TCP at MASTER_ADDR:MASTER_PORT.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TOOLS_ZRUN_LAUNCH_H
#define ZCC_TOOLS_ZRUN_LAUNCH_H

#include "runtime/Support/Status.h"

#include <chrono>
#include <string>

namespace zcc {

/// Where this process stands in a job.
struct ProcessRole {
  /// A rank of a job whose processes were started by zrun's launcher or by
  /// an outside launcher; false for a plain `zrun` (which launches ranks
  /// itself when the plan needs several processes).
  bool isRank = false;
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  /// ZCC_NCCL_ID (zrun's launcher); empty under an outside launcher.
  std::string ncclIdHex;
  /// MASTER_ADDR and MASTER_PORT, for the TCP exchange of the NCCL id.
  std::string masterAddress;
  int masterPort = 0;
};

/// The role the environment gives this process; an error for an
/// inconsistent environment (e.g. RANK without WORLD_SIZE).
StatusOr<ProcessRole> processRole();

/// Starts `worldSize` copies of this program with `argv` and the rank
/// variables, waits for all of them, and returns the first failure: a
/// non-zero exit or a signal, naming the rank. `grace` is how long the
/// other ranks get to end by themselves after one failed.
Status launchRanks(char **argv, int worldSize, const std::string &ncclIdHex,
                   std::chrono::seconds grace);

/// Under an outside launcher: rank 0 serves `idHex` at MASTER_ADDR:PORT to
/// the other ranks, which receive it. Fails after `timeout`.
Status exchangeNcclId(const ProcessRole &role, std::string &idHex,
                      std::chrono::seconds timeout);

} // namespace zcc

#endif // ZCC_TOOLS_ZRUN_LAUNCH_H
