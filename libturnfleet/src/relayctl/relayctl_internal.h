/* relayctl's request to an agent, for a caller that drives libcurl multi itself (the adapter's
 * loop, adapter_work.c): the one implementation of "ask an agent for its counts". */
#ifndef TF_RELAYCTL_INTERNAL_H
#define TF_RELAYCTL_INTERNAL_H

#include <curl/curl.h>
#include <stdint.h>

#include "private.h"

typedef struct tf_relayctl__scrape tf_relayctl__scrape;

/* GET @p url (an agent's /metrics) within @p timeout_ms, with `Authorization: Bearer @p token` (NULL:
 * none; copied into memory wiped on free). NULL on no memory. */
TF__PRIVATE tf_relayctl__scrape *tf_relayctl__scrape_new(const char *url, const char *token, int timeout_ms);
/* The easy handle to add to the caller's multi (CURLOPT_PRIVATE: the scrape). Borrowed. */
TF__PRIVATE CURL *tf_relayctl__scrape_handle(const tf_relayctl__scrape *s);
/* Once the multi says it is done with @p cc: the sum of turnfleet_agent_ports_in_use, -1 when the
 * answer was not a 200 with that sample (the agent leaves it out while its count fails). */
TF__PRIVATE int64_t tf_relayctl__scrape_count(tf_relayctl__scrape *s, CURLcode cc);
/* Release (remove it from a multi first). NULL does nothing. */
TF__PRIVATE void tf_relayctl__scrape_free(tf_relayctl__scrape *s);

#endif
