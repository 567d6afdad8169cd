/* hub/hub.h - version of the hub library. Any thread. */
#ifndef HUB_HUB_H
#define HUB_HUB_H

const char *hub_version(void);

#endif
