/* The temporary files of failed writes: removed over the session when it is still there,
 * else kept in the sshfile and removed over the next one (sshfile.c queues a job for it as
 * soon as the failed one is over). See sshfile-internal.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sshfile-internal.h"

#define COMP "sftp"

/* 0 when tmp is gone (or was never made), < 0 when the session could not remove it. */
static int temp_unlink(struct sshfile *f, const char *tmp)
{
    int r;

    if (!f->ssh || !f->sftp || !ssh_is_connected(f->ssh))
        return -ENOTCONN;
    if (sftp_unlink(f->sftp, tmp) == 0)
        return 0;
    r = sshfile_last_error(f);
    return r == -ENOENT ? 0 : r;
}

void sshfile_temp_discard(struct sshfile *f, const char *tmp)
{
    size_t i;

    if (temp_unlink(f, tmp) == 0)
        return;
    for (i = 0; i < SSHFILE_LEFTOVERS && f->leftover[i]; i++)
        ;
    if (i == SSHFILE_LEFTOVERS) {
        log_warning(COMP, "%s: %s: temporary file left behind", f->conf.host, f->leftover[0]);
        free(f->leftover[0]);
        memmove(f->leftover, f->leftover + 1, (SSHFILE_LEFTOVERS - 1) * sizeof(char *));
        i = SSHFILE_LEFTOVERS - 1;
    }
    f->leftover[i] = strdup(tmp);
    if (!f->leftover[i])
        log_warning(COMP, "%s: %s: temporary file left behind", f->conf.host, tmp);
}

void sshfile_leftovers_remove(struct sshfile *f)
{
    size_t kept = 0;

    for (size_t i = 0; i < SSHFILE_LEFTOVERS && f->leftover[i]; i++) {
        int r = temp_unlink(f, f->leftover[i]);

        if (r < 0 && r != -ECONNRESET && r != -ENOTCONN && r != -EPROTO && r != -EPIPE) {
            log_warning(COMP, "%s: %s: removing the temporary file: %s", f->conf.host,
                        f->leftover[i], strerror(-r));
            r = 0;
        }
        if (r == 0)
            free(f->leftover[i]);
        else
            f->leftover[kept++] = f->leftover[i];
        f->leftover[i] = kept > i ? f->leftover[i] : NULL;
    }
}

void sshfile_leftovers_free(struct sshfile *f)
{
    for (size_t i = 0; i < SSHFILE_LEFTOVERS; i++) {
        if (f->leftover[i])
            log_info(COMP, "%s: %s: temporary file left behind", f->conf.host, f->leftover[i]);
        free(f->leftover[i]);
        f->leftover[i] = NULL;
    }
}
