/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/record.h"

#include "coordinator/log.h"

static void logged(coord *c, int result, lz_error *err)
{
    if (result < 0)
        log_error(c, "Domain Store", err);
    lz_error_free(err);
}

void record_held(coord *c, lz_role role, const lz_process_identity *process)
{
    lz_error *err = NULL;
    int r = lz_store_participant_held(c->a->store, c->generation, role, process, &err);
    logged(c, r, err);
}

void record_released(coord *c, lz_role role)
{
    lz_error *err = NULL;
    int r = lz_store_participant_released(c->a->store, c->generation, role, &err);
    logged(c, r, err);
}

void record_state(coord *c, const char *state)
{
    lz_error *err = NULL;
    int r = lz_store_generation_set_state(c->a->store, c->generation, state, &err);
    logged(c, r, err);
}

void record_network_policy(coord *c, const char *policy_json)
{
    lz_error *err = NULL;
    int r = lz_store_network_policy(c->a->store, c->generation, policy_json, &err);
    logged(c, r, err);
}

void record_session_begin(coord *c, const session *s)
{
    lz_error *err = NULL;
    int r = lz_store_session_begin(c->a->store, c->generation, s->id, s->cli_pid,
                                   s->run.interactive, &err);
    logged(c, r, err);
}

void record_session_end(coord *c, const char *session_id, const char *outcome, int code)
{
    lz_error *err = NULL;
    int r = lz_store_session_end(c->a->store, c->generation, session_id, outcome, code, &err);
    logged(c, r, err);
}
