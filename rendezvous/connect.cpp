// Placeholder: implemented by the connect work in progress.
#include "rendezvous/connect.h"
