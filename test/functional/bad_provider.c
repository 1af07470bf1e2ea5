/* SPDX-License-Identifier: BSD-3-Clause */
/* FI_PROVIDER naming a provider this node lacks (verbs here): fc_comm_init
 * fails promptly on every rank with a message naming it and the fix. */
#include <string.h>

#include "common.h"

int main(void)
{
    const char *want = getenv("FI_PROVIDER");
    if (!want) {
        printf("bad_provider: not run: set FI_PROVIDER to an absent provider\n");
        return FT_SKIP;
    }
    double t0 = ft_now();
    fc_comm_t c = NULL;
    fc_result_t rc = fc_comm_init(&c);
    double dt = ft_now() - t0;
    int bad = 0;
    if (rc == FC_SUCCESS) {
        fprintf(stderr, "bad_provider: fc_comm_init succeeded with FI_PROVIDER=%s\n", want);
        fc_comm_destroy(c);
        return 1;
    }
    if (rc != FC_ERR_FABRIC) {
        fprintf(stderr, "bad_provider: got %s, expected a fabric error: %s\n", fc_strerror(rc),
                fc_last_error());
        bad = 1;
    }
    char needle[64];
    snprintf(needle, sizeof(needle), "FI_PROVIDER=%s", want);
    if (!strstr(fc_last_error(), needle) || !strstr(fc_last_error(), "Fix")) {
        fprintf(stderr, "bad_provider: message lacks '%s' or a fix: %s\n", needle,
                fc_last_error());
        bad = 1;
    }
    if (c != NULL) {
        fprintf(stderr, "bad_provider: *comm written on failure\n");
        bad = 1;
    }
    if (dt > 20) {
        fprintf(stderr, "bad_provider: took %.1f s\n", dt);
        bad = 1;
    }
    printf("bad_provider: failed as expected in %.2f s: %s\n", dt, fc_last_error());
    return bad;
}
