/*
 * select.c — choosing the engine for a canonical problem: the caller's forced engine, or
 * the cheapest supporting one (ties go to the earlier row of the table).
 * XCONV_LOG=dispatch prints each engine's verdict on stderr.
 */
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool log_dispatch(void)
{
    const char *v = getenv("XCONV_LOG");
    return v && strstr(v, "dispatch") != NULL;
}

xconv_status xconv__select_engine(const xconv_canon *p, const char *forced,
                                  const xconv_engine **out, xconv_error *err)
{
    const bool log = log_dispatch();
    if (forced && forced[0]) {
        const xconv_engine *e = xconv__engine_find(forced);
        XCONV_CHECK(err, e != NULL, UNSUPPORTED, "engine", "engine \"%s\" does not exist", forced);
        const char *why = "unsupported problem";
        XCONV_CHECK(err, e->supports(p, &why), UNSUPPORTED, "engine",
                    "engine %s does not support this problem: %s", forced, why);
        *out = e;
        return XCONV_STATUS_OK;
    }
    const xconv_engine *best = NULL;
    double best_cost = 0;
    for (int i = 0; i < xconv__engine_count; i++) {
        const xconv_engine *e = xconv__engines[i];
        const char *why = "unsupported problem";
        if (!e->supports(p, &why)) {
            if (log) fprintf(stderr, "xconv dispatch: %s: no: %s\n", e->name, why);
            continue;
        }
        double c = e->cost(p);
        if (log) fprintf(stderr, "xconv dispatch: %s: cost %.3g\n", e->name, c);
        if (!best || c < best_cost) best = e, best_cost = c;
    }
    XCONV_CHECK(err, best != NULL, UNSUPPORTED, "x.device",
                "no engine of this build runs problems on this device");
    if (log) fprintf(stderr, "xconv dispatch: chose %s\n", best->name);
    *out = best;
    return XCONV_STATUS_OK;
}
