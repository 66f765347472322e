/* Prints every "section.key" the configuration parser knows, one per line, so
 * that tests can compare the parser with the documentation. */
#include <stdio.h>

#include "config.h"

int main(void)
{
    for (const char *const *k = config_known_keys(); *k; k++)
        if (puts(*k) < 0)
            return 1;
    return fflush(stdout) == 0 ? 0 : 1;
}
