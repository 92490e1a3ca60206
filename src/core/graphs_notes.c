/* graphs_notes.c: the two warnings graphs.c gives once each, about graph checks it cannot
 * report apart: `graph_checks_unreported` (checks whose replays no exec here is known to run:
 * a child graph node, a conditional body, a clone's source, a capture into a graph already
 * instantiated) and `graph_exec_shares_checks` (a second exec of a graph that could not get
 * check scratch of its own).
 *
 * graphs.c fills a warning's text while it holds its own lock and says it after releasing it
 * (the report takes locks of its own): lg_graphs_notes_say. The first text of each kind is
 * kept, later ones dropped. Called by graphs.c on application threads (its own mutex, taken
 * inside graphs.c's). Tested by tests/unit/test_graphs.c (child_graph_unreported,
 * second_exec_warned) and tests/e2e/test_graph_elsewhere.sh.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char unreported[900];
static bool unreported_said;
static char shared[600];
static bool shared_said;

/* Weak: the GPU tests (tests/gpu) link graphs.c without the report module (no warning). */
#pragma weak lg_report_warning_once

void lg_graphs_notes_unreported(unsigned long long graph_id, int n_checks, const char *how)
{
    pthread_mutex_lock(&lock);
    if (!unreported_said && !unreported[0])
        snprintf(unreported, sizeof unreported,
                 "%s, while graph %llu, with %d checked loss launch(es), was never instantiated itself: checks "
                 "captured into a graph that then becomes a child graph node, a conditional node's body or a "
                 "cudaGraphClone source (or is captured into with cudaStreamBeginCaptureToGraph and replayed through "
                 "another graph) still run and sanitize, but labelguard cannot tell which exec replays them, so their "
                 "violations are never reported. Instantiate the captured graph itself to have them reported",
                 how, graph_id, n_checks);
    pthread_mutex_unlock(&lock);
}

void lg_graphs_notes_into_late(unsigned long long graph_id, int n_checks)
{
    pthread_mutex_lock(&lock);
    if (!unreported_said && !unreported[0])
        snprintf(unreported, sizeof unreported,
                 "%d checked loss launch(es) were captured into graph %llu (cudaStreamBeginCaptureToGraph) after an "
                 "exec was made from it: they still run and sanitize, but labelguard cannot tell which exec replays "
                 "them, so their violations are never reported. Capture into a graph before instantiating it",
                 n_checks, graph_id);
    pthread_mutex_unlock(&lock);
}

void lg_graphs_notes_shared(unsigned long long graph_id, const char *why)
{
    pthread_mutex_lock(&lock);
    if (!shared_said && !shared[0])
        snprintf(shared, sizeof shared,
                 "graph %llu was instantiated a second time and its new exec could not get check scratch of its own "
                 "(%s): its execs replay the same checks in the same validator scratch, so replays of two of them "
                 "running at the same time (on two streams) can report each other's labels. Instantiate each "
                 "captured graph once (capture it again for a second exec) to keep their verdicts apart",
                 graph_id, why);
    pthread_mutex_unlock(&lock);
}

bool lg_graphs_notes_unreported_said(void)
{
    pthread_mutex_lock(&lock);
    bool said = unreported_said;
    pthread_mutex_unlock(&lock);
    return said;
}

void lg_graphs_notes_say(void)
{
    char detail[sizeof unreported], detail2[sizeof shared];
    detail[0] = detail2[0] = '\0';
    pthread_mutex_lock(&lock);
    if (unreported[0] && !unreported_said) {
        memcpy(detail, unreported, sizeof detail);
        unreported_said = true;
    }
    if (shared[0] && !shared_said) {
        memcpy(detail2, shared, sizeof detail2);
        shared_said = true;
    }
    pthread_mutex_unlock(&lock);
    if (detail[0] && lg_report_warning_once)
        lg_report_warning_once("graph_checks_unreported", detail);
    if (detail2[0] && lg_report_warning_once)
        lg_report_warning_once("graph_exec_shares_checks", detail2);
}

/* The lock may have been held by a parent thread that is not in the child; what was said
 * stays said. */
void lg_graphs_notes_after_fork(void) { pthread_mutex_init(&lock, NULL); }
