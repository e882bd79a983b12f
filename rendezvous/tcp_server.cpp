// Placeholder: implemented by the tcp_server work in progress.
#include "rendezvous/tcp_server.h"
