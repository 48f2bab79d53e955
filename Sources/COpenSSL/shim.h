#ifndef WHEREABOT_COPENSSL_SHIM_H
#define WHEREABOT_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/err.h>
#endif
