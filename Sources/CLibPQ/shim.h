#ifndef WHEREABOT_CLIBPQ_SHIM_H
#define WHEREABOT_CLIBPQ_SHIM_H
#include <postgresql/libpq-fe.h>
#endif
