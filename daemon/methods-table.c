/* The method table. See methods-table.h. A new method is one row here, its params kind in
 * proto/ and its handler in the file of its area. */
#include "methods-table.h"

#include "methods-daemon.h"
#include "methods-exec.h"
#include "methods-file.h"
#include "methods-fork.h"
#include "methods-forward.h"
#include "methods-preview.h"
#include "methods-obs.h"
#include "methods-pause.h"
#include "methods-process.h"
#include "methods-sandbox.h"
#include "methods-snapshot.h"
#include "methods-template.h"
#include "methods-volume.h"
#include "methods-test.h"
#include "params-file.h"
#include "params-fork.h"
#include "params-forward.h"
#include "params-process.h"
#include "params-snapshot.h"
#include "params-template.h"
#include "params-volume.h"

#define ADMIN METHOD_ADMIN
#define TEST METHOD_TEST_HOOK

/* clang-format off */
/* name, params kind (proto/), handler, flags (METHOD_*) */
const struct method_def methods_table[] = {
    /* the daemon (methods-daemon.c, methods-obs.c) */
    {"daemon.status",        &params_none_spec,                 method_daemon_status,        0},
    {"rpc.discover",         &params_none_spec,                 method_rpc_discover,         0},
    {"daemon.metrics",       &params_none_spec,                 method_daemon_metrics,       ADMIN},
    {"daemon.subscribe",     &params_none_spec,                 method_daemon_subscribe,     0},
    /* sandboxes (methods-sandbox.c) */
    {"sandbox.create",       &params_sandbox_create_spec,       method_sandbox_create,       0},
    {"sandbox.get",          &params_sandbox_id_spec,           method_sandbox_get,          0},
    {"sandbox.list",         &params_sandbox_list_spec,         method_sandbox_list,         0},
    {"sandbox.set_internet", &params_sandbox_set_internet_spec, method_sandbox_set_internet, 0},
    {"sandbox.renew",        &params_sandbox_renew_spec,        method_sandbox_renew,        0},
    {"sandbox.resize",       &params_sandbox_resize_spec,       method_sandbox_resize,       0},
    {"sandbox.destroy",      &params_sandbox_destroy_spec,         method_sandbox_destroy,      0},
    /* commands (methods-exec.c) */
    {"sandbox.exec",         &params_sandbox_exec_spec,         method_sandbox_exec,         0},
    /* files (methods-sandbox.c: read and write; methods-file.c: the rest) */
    {"file.write",           &params_file_write_spec,           method_file_write,           0},
    {"file.read",            &params_file_read_spec,            method_file_read,            0},
    {"file.list",            &params_file_list_spec,            method_file_list,            0},
    {"file.stat",            &params_file_stat_spec,            method_file_stat,            0},
    {"file.remove",          &params_file_remove_spec,          method_file_remove,          0},
    {"file.mkdir",           &params_file_mkdir_spec,           method_file_mkdir,           0},
    {"file.rename",          &params_file_rename_spec,          method_file_rename,          0},
    /* background processes (methods-process.c) */
    {"process.start",        &params_process_start_spec,        method_process_start,        0},
    {"process.read",         &params_process_read_spec,         method_process_read,         0},
    {"process.write",        &params_process_write_spec,        method_process_write,        0},
    {"process.wait",         &params_process_wait_spec,         method_process_wait,         0},
    {"process.kill",         &params_process_kill_spec,         method_process_kill,         0},
    {"process.list",         &params_process_list_spec,         method_process_list,         0},
    {"process.resize",       &params_process_resize_spec,       method_process_resize,       0},
    /* port forwards (methods-forward.c) */
    {"sandbox.forward",      &params_sandbox_forward_spec,      method_sandbox_forward,      0},
    {"sandbox.forwards",     &params_sandbox_id_spec,           method_sandbox_forwards,     0},
    {"sandbox.unforward",    &params_sandbox_unforward_spec,    method_sandbox_unforward,    0},
    /* preview URLs (methods-preview.c) */
    {"sandbox.preview",      &params_sandbox_preview_spec,      method_sandbox_preview,      0},
    {"sandbox.previews",     &params_sandbox_id_spec,           method_sandbox_previews,     0},
    {"sandbox.unpreview",    &params_sandbox_unpreview_spec,    method_sandbox_unpreview,    0},
    /* snapshots (methods-snapshot.c) */
    {"sandbox.snapshot",        &params_sandbox_snapshot_spec, method_sandbox_snapshot,        0},
    {"sandbox.snapshots",       &params_sandbox_id_spec,       method_sandbox_snapshots,       0},
    {"sandbox.rollback",        &params_sandbox_snapshot_spec, method_sandbox_rollback,        0},
    {"sandbox.snapshot_delete", &params_sandbox_snapshot_spec, method_sandbox_snapshot_delete, 0},
    /* fork (methods-fork.c) */
    {"sandbox.fork",            &params_sandbox_fork_spec,     method_sandbox_fork,            0},
    /* templates (methods-template.c) */
    {"template.list",        &params_none_spec,                 method_template_list,        0},
    {"template.create",      &params_template_create_spec,      method_template_create,      0},
    {"template.delete",      &params_template_name_spec,        method_template_delete,      0},
    {"template.publish",     &params_template_name_spec,        method_template_publish,     ADMIN},
    /* pause and resume (methods-pause.c) */
    {"sandbox.pause",        &params_sandbox_id_spec,           method_sandbox_pause,        0},
    {"sandbox.resume",       &params_sandbox_id_spec,           method_sandbox_resume,       0},
    /* volumes (methods-volume.c) */
    {"volume.create",        &params_volume_create_spec,        method_volume_create,        0},
    {"volume.list",          &params_none_spec,                 method_volume_list,          0},
    {"volume.delete",        &params_volume_name_spec,          method_volume_delete,        0},
    {"sandbox.attach",       &params_sandbox_attach_spec,       method_sandbox_attach,       0},
    {"sandbox.detach",       &params_sandbox_detach_spec,       method_sandbox_detach,       0},
    /* test hooks, SANDBOXD_TEST_HOOKS=1 only (methods-test.c, methods-obs.c) */
    {"test.sleep",           NULL,                              method_test_sleep,           TEST},
    {"test.notify",          NULL,                              method_test_notify,          TEST},
    {"test.clock_step",      NULL,                              method_test_clock_step,      TEST | ADMIN},
    {"test.events",          NULL,                              method_test_events,          TEST},
    {},
};
/* clang-format on */
