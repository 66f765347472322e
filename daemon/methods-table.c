/* The sandbox methods' table. See methods-table.h. */
#include "methods-table.h"

#include "macro.h"
#include "methods-common.h"
#include "methods-exec.h"
#include "methods-file.h"
#include "methods-sandbox.h"
#include "methods.h"

/* Every row of each area's table, and the terminating row. */
static struct method_def rows[METHODS_SANDBOX_ROWS + METHODS_EXEC_ROWS + METHODS_FILE_ROWS + 1];

static size_t add_rows(size_t n, const struct method_def *area, size_t n_area)
{
    for (size_t i = 0; i < n_area; i++) {
        rows[n] = area[i];
        if (!rows[n].userdata)
            rows[n].userdata = methods_sandbox_state();
        n++;
    }
    return n;
}

int methods_table_register(void)
{
    size_t n = 0;

    n = add_rows(n, methods_sandbox_rows, ELEMENTSOF(methods_sandbox_rows));
    n = add_rows(n, methods_exec_rows, ELEMENTSOF(methods_exec_rows));
    n = add_rows(n, methods_file_rows, ELEMENTSOF(methods_file_rows));
    rows[n] = (struct method_def){};
    return methods_register(rows);
}

void methods_table_unregister(void)
{
    methods_unregister(rows);
}
