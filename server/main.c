/* server/main.c - stub entry point until the hub core lands. */
#include <stdio.h>

#include "hub/hub.h"

int main(void)
{
    printf("lubdub %s: stub - the server is not built yet\n", hub_version());
    return 0;
}
