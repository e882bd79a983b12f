// Placeholder: implemented by the tcp_client work in progress.
#include "rendezvous/tcp_client.h"
