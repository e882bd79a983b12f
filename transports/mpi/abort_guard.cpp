// The guard that turns Open MPI's abort into a report. When MPI_Init_thread (or a collective under
// MPI_ERRORS_ARE_FATAL) fails, Open MPI 4.1 calls ompi_mpi_abort -> its pmix component ->
// PMIx_Abort(status, msg, NULL, 0): mpirun then ends the job, SIGTERMs every rank (~1 s later) and
// SIGKILLs them, so no verdict is written. The executable defines and exports (linker options in
// CMakeLists.txt) two functions that the dynamic linker then binds ahead of the shared libraries'
// definitions, also for the calls Open MPI's dlopen()ed components make:
//  - PMIx_Abort: in the armed MPI child, sends the report to the parent, calls libpmix's real
//    PMIx_Finalize(NULL, 0) (found with dlsym(RTLD_NEXT)) so the PMIx server sees a clean exit (no
//    job abort, no "called init but exited without calling finalize"), then _exit(70). Unarmed,
//    it forwards to libpmix's PMIx_Abort.
//  - orte_show_help: Open MPI (ORTE) sends its help texts ("unable to reach each other",
//    "*** An error occurred in MPI_Init_thread") to mpirun to print, not to the rank's stderr, and
//    opal_show_help points at this function. Ours renders the text with libopen-pal's
//    opal_show_help_vstring, keeps it for the abort report and prints it on this process's stderr
//    (so mpirun's aggregation of identical help texts does not apply to ncclsmoke's ranks).
// Measured with Open MPI 4.1.4 (Debian, external PMIx 4). Another MPI without these symbols simply
// never calls them; the child then dies without a report and the parent says so.
#include "transports/mpi/abort_guard.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "transports/mpi/mpi_wire.h"

namespace ncclsmoke::transports::abort_guard {
namespace {

int g_report_sock = -1;
std::mutex g_mu;
std::vector<std::string>* g_help = new std::vector<std::string>();  // never freed (abort paths)

}  // namespace

void arm(int report_sock) { g_report_sock = report_sock; }

std::vector<std::string> help_texts() {
  std::lock_guard<std::mutex> l(g_mu);
  return *g_help;
}

bool finalize_pmix() {
  using Fin = int (*)(const void*, std::size_t);
  auto fin = reinterpret_cast<Fin>(dlsym(RTLD_NEXT, "PMIx_Finalize"));
  if (!fin) fin = reinterpret_cast<Fin>(dlsym(RTLD_DEFAULT, "PMIx_Finalize"));
  return fin && fin(nullptr, 0) == 0;
}

}  // namespace ncclsmoke::transports::abort_guard

using namespace ncclsmoke::transports;

extern "C" __attribute__((visibility("default"), used)) int PMIx_Abort(int status, const char msg[],
                                                                       void* procs,
                                                                       std::size_t nprocs) {
  if (abort_guard::g_report_sock < 0) {
    using Real = int (*)(int, const char*, void*, std::size_t);
    auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "PMIx_Abort"));
    if (real) return real(status, msg, procs, nprocs);
    std::fprintf(stderr, "ncclsmoke: PMIx_Abort(%d, %s): libpmix's PMIx_Abort not found; exiting\n",
                 status, msg ? msg : "");
    _exit(mpi_wire::kExitAborted);
  }
  nlohmann::json report = {{"event", "abort"},
                           {"status", status},
                           {"message", msg ? msg : ""},
                           {"help", abort_guard::help_texts()}};
  mpi_wire::send_msg(abort_guard::g_report_sock, report);
  bool finalized = abort_guard::finalize_pmix();
  std::fprintf(stderr, "ncclsmoke: mpi child %d: Open MPI aborted (PMIx_Abort status %d); reported "
               "to the rank process, PMIx_Finalize %s, exiting %d\n", getpid(), status,
               finalized ? "done" : "failed", mpi_wire::kExitAborted);
  std::fflush(stderr);
  _exit(mpi_wire::kExitAborted);
}

extern "C" __attribute__((visibility("default"), used)) int orte_show_help(const char* filename,
                                                                           const char* topic,
                                                                           int want_error_header,
                                                                           ...) {
  using Render = char* (*)(const char*, const char*, int, va_list);
  static auto render = reinterpret_cast<Render>(dlsym(RTLD_DEFAULT, "opal_show_help_vstring"));
  char* text = nullptr;
  if (render) {
    va_list ap;
    va_start(ap, want_error_header);
    text = render(filename, topic, want_error_header, ap);
    va_end(ap);
  }
  std::string s = text ? text
                       : std::string("Open MPI help message ") + (filename ? filename : "?") + " / " +
                             (topic ? topic : "?") + " (could not render it)\n";
  std::free(text);
  std::fputs(s.c_str(), stderr);
  std::fflush(stderr);
  {
    std::lock_guard<std::mutex> l(abort_guard::g_mu);
    if (abort_guard::g_help->size() >= 16) abort_guard::g_help->erase(abort_guard::g_help->begin());
    abort_guard::g_help->push_back(s);
  }
  return 0;  // ORTE_SUCCESS
}
