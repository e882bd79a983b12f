#pragma once
// What identify() can learn about Open MPI's choices without touching its internals, as pure
// functions so they are tested without mpirun:
//  - selection from MPI_T: Open MPI closes the components a framework did not select, and closing
//    deregisters their control variables, so after MPI_Init the pml_<c>_* variables that are still
//    valid name the selected pml (and mtl_<c>_* the selected mtl when the pml is cm; btl_<c>_* the
//    btls that initialised). Measured with Open MPI 4.1.4.
//  - evidence from /proc: the TCP connections this process opened after open() began (btl tcp and
//    libfabric tcp connect lazily, on the first message to a peer), minus the launcher's own
//    (PMIx server, ORTE daemon: their ports are in the environment); and the shared-memory
//    segments btl vader mapped.
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ncclsmoke::transports::mpi_observe {

// "btl_tcp_if_include" -> {"btl", "tcp"}; framework-level names ("btl", "btl_base_verbose") and
// other frameworks give an empty component.
struct VarOwner {
  std::string framework;
  std::string component;
};
VarOwner var_owner(const std::string& cvar_name);

// Components per framework ("pml", "btl", "mtl") that own at least one valid cvar.
using Survivors = std::map<std::string, std::set<std::string>>;
void add_survivor(Survivors& s, const std::string& cvar_name);

// One established TCP connection of this network namespace (from /proc/net/tcp or tcp6).
struct TcpConn {
  unsigned long inode = 0;
  std::string local;   // "127.0.0.1:40000" / "[::1]:40000"
  std::string remote;
  int remote_port = 0;
};
// Parses the text of /proc/net/tcp or /proc/net/tcp6; keeps ESTABLISHED rows only.
std::vector<TcpConn> parse_proc_net_tcp(const std::string& text, bool v6);

// Ports named in launcher URIs such as "2063073280.0;tcp4://127.0.0.1:59161;tcp6://[fd00::2]:5".
std::set<int> uri_ports(const std::string& uri);
// Every port in the PMIX_SERVER_URI* and OMPI_MCA_orte_*_uri variables of `environ`.
std::set<int> launcher_ports(char** envp);

// Socket inodes this process holds (/proc/self/fd -> "socket:[N]").
std::set<unsigned long> own_socket_inodes();
// Established TCP connections of this process (both address families).
std::vector<TcpConn> own_tcp_connections();
// Distinct btl vader segment files mapped into this process (/proc/self/maps).
int vader_segments_mapped();

}  // namespace ncclsmoke::transports::mpi_observe
