/* The egress proxy of allow-lists' domain names ([egress] listen; egress-proxy.c). */
#pragma once

struct engine;

/* Starts the proxy's listener: at start, after engine_new(). 0 without doing anything when
 * [egress] listen is unset; a negative errno with *ret_error (free()) otherwise. */
int engine_eproxy_start(struct engine *e, char **ret_error);
