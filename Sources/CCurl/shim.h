#ifndef WHEREABOT_CCURL_SHIM_H
#define WHEREABOT_CCURL_SHIM_H
#include <curl/curl.h>
#endif
