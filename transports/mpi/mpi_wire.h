#pragma once
// The mpi transport's parent <-> child channel (see mpi_transport.h): JSON messages over an
// AF_UNIX SOCK_SEQPACKET socketpair (one message per packet, so no framing), optionally carrying
// one file descriptor (SCM_RIGHTS: the memfd of a shared buffer), plus the shared control page
// where the child publishes its progress without a system call.
#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rendezvous/deadline.h"

namespace ncclsmoke::transports::mpi_wire {

constexpr std::size_t kMaxMessage = 1 << 20;
constexpr int kChildSocketFd = 3;    // the child's end of the socketpair, in the child
constexpr int kChildControlFd = 4;   // the control page's memfd, in the child
constexpr const char* kChildArg = "__mpi-child";  // argv[1] of the child (see mpi_child_main)

// Exit statuses of the child that the parent classifies.
constexpr int kExitAborted = 70;    // Open MPI aborted (PMIx_Abort caught by the guard)
constexpr int kExitAbandoned = 71;  // the parent abandoned a stuck call (SIGUSR1)
constexpr int kExitProtocol = 72;   // bad message / parent gone

// Written by the child, read by the parent, in a shared page.
struct ControlPage {
  std::atomic<uint64_t> iterations_done{0};  // timed loop: collectives completed so far
  std::atomic<int32_t> in_mpi_init{0};
};

// Sends one message (and `fd` if >= 0). False on a closed or broken socket.
bool send_msg(int sock, const nlohmann::json& msg, int fd = -1);
// Receives one message before `deadline`. Result: 1 received, 0 timed out, -1 EOF / error.
// `fd_out` gets a received descriptor (or -1).
int recv_msg(int sock, nlohmann::json& out, rendezvous::Deadline deadline, int* fd_out = nullptr);

}  // namespace ncclsmoke::transports::mpi_wire

namespace ncclsmoke::transports::mpi_wire {

// How the MPI child ended, as the parent saw it; classify_death() names it (pure, unit-tested).
struct ChildDeath {
  bool reported_abort = false;        // the guard's {"event":"abort"} arrived
  std::vector<std::string> help;      // Open MPI's help texts from that report
  std::string abort_message;          // PMIx_Abort's msg
  bool reaped = false;                // waitpid returned
  bool exited = false;                // WIFEXITED
  int code = 0;                       // exit status or signal number
  bool during_init = false;           // the pending request was open (MPI_Init_thread / dup)
  std::vector<std::string> stderr_tail;
};
struct DeathVerdict {
  int kind = 0;  // an ErrorKind value (transport.h)
  std::string reason;  // one line, starting with what happened
};
// {"library", "mpi_version"}: MPI calls allowed before MPI_Init, so the rank itself may call it.
nlohmann::json library_identity();

DeathVerdict classify_death(const ChildDeath& d, const std::string& what);
// Open MPI's help texts as one line: each text's first sentence (or its "An error occurred in
// <call>" line), joined by " | ", at most `max_chars` characters.
std::string help_summary(const std::vector<std::string>& help, std::size_t max_chars = 800);

}  // namespace ncclsmoke::transports::mpi_wire
