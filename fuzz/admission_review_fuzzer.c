/* Fuzz target: an AdmissionReview body through tf_admission_decode() and, when
 * it decodes, tf_admission_respond() as the validating and as the mutating
 * webhook, over three relay nodes and one other pool. Properties: a refusal
 * names why; a response is an AdmissionReview v1 whose response.uid is the
 * request's, with a boolean `allowed`; the mutating answer always allows, and a
 * patch comes only with patchType JSONPatch on an allowed answer. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "tf_fuzz.h"
#include "turnfleet.h"

static const char NODES[] =
    "{\"kind\":\"NodeList\",\"items\":["
    "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}},"
    "\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"192.0.2.1\"}]}},"
    "{\"metadata\":{\"name\":\"n2\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}},"
    "\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"192.0.2.2\"}]}},"
    "{\"metadata\":{\"name\":\"n3\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}},"
    "\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"192.0.2.2\"}]}}]}";
static const char OTHER[] = "metadata: {name: other}\nspec:\n  relayPortRange: {start: 50000, end: 50099}\n"
                            "  auth: {realm: fuzz.test, secretRef: {name: s}}\n";

static void check_response(const char *text, const char *uid, int allowed, int mutate)
{
  cJSON *root = cJSON_Parse(text);
  TF_FUZZ_CHECK(root);
  const cJSON *api = cJSON_GetObjectItemCaseSensitive(root, "apiVersion");
  TF_FUZZ_CHECK(cJSON_IsString(api) && strcmp(api->valuestring, "admission.k8s.io/v1") == 0);
  const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
  const cJSON *u = cJSON_GetObjectItemCaseSensitive(resp, "uid");
  TF_FUZZ_CHECK(cJSON_IsString(u) && strcmp(u->valuestring, uid) == 0);
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(resp, "allowed");
  TF_FUZZ_CHECK(cJSON_IsBool(a) && cJSON_IsTrue(a) == allowed);
  if (mutate) TF_FUZZ_CHECK(allowed);
  const cJSON *patch = cJSON_GetObjectItemCaseSensitive(resp, "patch");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(resp, "patchType");
  TF_FUZZ_CHECK(!patch == !type);
  if (patch) TF_FUZZ_CHECK(mutate && allowed && strcmp(type->valuestring, "JSONPatch") == 0);
  if (!allowed) TF_FUZZ_CHECK(cJSON_GetObjectItemCaseSensitive(resp, "status"));
  cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static tf_nodes *nodes;
  static tf_pool *other;
  if (!nodes && tf_nodes_parse(&nodes, NODES, sizeof(NODES) - 1) != 0) abort();
  if (!other && tf_pool_parse(&other, OTHER, sizeof(OTHER) - 1, TF_FORMAT_YAML) != 0) abort();
  tf_admission *r = NULL;
  tf_err rc = tf_admission_decode(&r, (const char *)data, size, NULL);
  if (rc < 0) {
    TF_FUZZ_CHECK(!r && tf_error_last()->message[0] != '\0');
    return 0;
  }
  const tf_pool *pools[] = {other};
  tf_admission_options o = TF_ADMISSION_OPTIONS_INIT;
  o.max_replicas = 8;
  for (int kind = 0; kind < 2; kind++) {
    char *out = NULL;
    int allowed = -1;
    rc = tf_admission_respond(&out, &allowed, r, (tf_admission_kind)kind, nodes, pools, 1, &o);
    if (rc == TF_ENOMEM) continue;
    TF_FUZZ_CHECK(rc == 0 && out && (allowed == 0 || allowed == 1));
    check_response(out, tf_admission_uid(r), allowed, kind == TF_ADMISSION_MUTATE);
    tf_free(out);
  }
  tf_admission_free(r);
  return 0;
}
