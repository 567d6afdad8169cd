/* server/stub.c - placeholder until the server layer lands. */
#include <libwebsockets.h>
