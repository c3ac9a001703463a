/* test_events.c: client text messages at the protocol's level: the envelope (type, seq,
 * size, trailing bytes) and the readers payload parsers use. What each event carries is
 * its owner's (tests/server/test_scene_events.c). */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "protocol/proto_event.h"
#include "tests/harness.h"

static proto_status envelope(const char *json, proto_envelope *env, char *err)
{
    return proto_envelope_parse(env, json, strlen(json), err, 200);
}

TEST(proto_envelope_reads_type_and_seq)
{
    proto_envelope env;
    char err[200];
    REQUIRE(envelope(" {\"type\":\"grab\",\"seq\":4294967295,\"x\":[1]} \n", &env, err) ==
            PROTO_OK);
    CHECK(!strcmp(env.type, "grab") && env.seq == 4294967295u);
    CHECK(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(env.msg, "x")));
    proto_envelope_free(&env);
    /* Unknown types are the server's to refuse: the envelope only reads them. */
    REQUIRE(envelope("{\"type\":\"jump\",\"seq\":1}", &env, err) == PROTO_OK);
    CHECK(!strcmp(env.type, "jump"));
    proto_envelope_free(&env);
}

TEST(proto_envelope_refuses_bad_input_with_reasons)
{
    static const struct {
        const char *json, *want;
    } bad[] = {
        {"{\"type\":\"grab\",", "malformed"},
        {"[1,2,3]", "object"},
        {"{\"seq\":1}", "\"type\""},
        {"{\"type\":7,\"seq\":1}", "\"type\""},
        {"{\"type\":\"release\"}", "\"seq\" is missing"},
        {"{\"type\":\"release\",\"seq\":-1}", "\"seq\""},
        {"{\"type\":\"release\",\"seq\":4294967296}",
         "\"seq\" = 4294967296: must be in [0, 4294967295]"},
        {"{\"type\":\"release\",\"seq\":1.5}", "integer"},
        {"{\"type\":\"release\",\"seq\":1} garbage", "trailing"},
        {"", "empty"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        proto_envelope env;
        char err[200] = "";
        proto_status st = proto_envelope_parse(&env, bad[k].json, strlen(bad[k].json), err, 200);
        CHECKF(st == PROTO_ERR_CORRUPT, "%s: status %d", bad[k].json, (int)st);
        CHECKF(strstr(err, bad[k].want) != NULL, "%s: message \"%s\" lacks \"%s\"", bad[k].json,
               err, bad[k].want);
        CHECK(env.root == NULL);
    }
    /* Not NUL-terminated: the parse must stay inside the given length. */
    char unterminated[] = {'{', '"', 't', 'y', 'p', 'e', '"', ':', '"'};
    proto_envelope env;
    char err[200];
    CHECK(proto_envelope_parse(&env, unterminated, sizeof unterminated, err, sizeof err) ==
          PROTO_ERR_CORRUPT);
}

TEST(proto_readers_check_and_name_the_field)
{
    cJSON *o = cJSON_Parse("{\"p\":[1,2.5,-3],\"q\":[1,2],\"r\":[1,2,1e9],\"n\":4,\"f\":1.5,"
                           "\"s\":\"lattice\",\"t\":\"mars\",\"w\":\"c7\",\"e\":\"\"}");
    REQUIRE(o);
    float v[3];
    char err[200];
    CHECK(proto_read_vec3(o, "p", 1e7, v, err, sizeof err) == PROTO_OK && v[1] == 2.5f);
    CHECK(proto_read_vec3(o, "q", 1e7, v, err, sizeof err) == PROTO_ERR_CORRUPT &&
          strstr(err, "\"q\""));
    CHECK(proto_read_vec3(o, "r", 1e7, v, err, sizeof err) == PROTO_ERR_CORRUPT &&
          strstr(err, "r[2] must be a finite number within 1e7"));
    double d;
    CHECK(proto_read_number(o, "missing", 0, 1, &d, err, sizeof err) == PROTO_ERR_CORRUPT &&
          strstr(err, "\"missing\" is missing"));
    CHECK(proto_read_number(o, "n", 0, 3, &d, err, sizeof err) == PROTO_ERR_CORRUPT &&
          strstr(err, "[0, 3]"));
    int32_t i;
    CHECK(proto_read_int(o, "f", 0, 9, &i, err, sizeof err) == PROTO_ERR_CORRUPT &&
          strstr(err, "\"f\" must be an integer"));
    CHECK(proto_read_int(o, "n", 0, 9, &i, err, sizeof err) == PROTO_OK && i == 4);
    int c;
    CHECK(proto_read_choice(o, "s", "lattice|world", 1, &c, err, sizeof err) == PROTO_OK && c == 0);
    CHECK(proto_read_choice(o, "absent", "lattice|world", 1, &c, err, sizeof err) == PROTO_OK &&
          c == 1);
    CHECK(proto_read_choice(o, "t", "lattice|world", 1, &c, err, sizeof err) == PROTO_ERR_CORRUPT &&
          strstr(err, "lattice|world"));
    CHECK(proto_read_choice(o, "absent", "a|b", -1, &c, err, sizeof err) == PROTO_ERR_CORRUPT);
    char s[8];
    CHECK(proto_read_string(o, "w", s, sizeof s, err, sizeof err) == PROTO_OK && !strcmp(s, "c7"));
    CHECK(proto_read_string(o, "e", s, sizeof s, err, sizeof err) == PROTO_ERR_CORRUPT);
    CHECK(proto_read_string(o, "t", s, 4, err, sizeof err) == PROTO_ERR_CORRUPT);
    cJSON_Delete(o);
}

typedef struct leaves {
    int n;
    char names[8][64];
    double numbers[8];
    char texts[8][64];
} leaves;

static int collect(void *ctx, const char *name, double number, const char *text, char *err,
                   size_t err_sz)
{
    leaves *l = ctx;
    if (!strcmp(name, "refuse")) {
        snprintf(err, err_sz, "refused %s", name);
        return -1;
    }
    if (l->n < 8) {
        snprintf(l->names[l->n], sizeof l->names[0], "%s", name);
        l->numbers[l->n] = number;
        snprintf(l->texts[l->n], sizeof l->texts[0], "%s", text ? text : "");
        l->n++;
    }
    return 0;
}

static proto_status params(const char *json, leaves *l, char *err)
{
    memset(l, 0, sizeof *l);
    cJSON *o = cJSON_Parse(json);
    proto_status st = proto_read_params(o, collect, l, err, 200);
    cJSON_Delete(o);
    return st;
}

TEST(proto_params_flatten_to_dotted_names)
{
    leaves l;
    char err[200];
    REQUIRE(params("{\"params\":{\"alpha\":0.9,\"tissue\":{\"skin_fat\":{\"inv_mass\":0.8}},"
                   "\"hu_threshold\":[-500,20,400],\"condition\":\"B\"}}",
                   &l, err) == PROTO_OK);
    CHECK(l.n == 6);
    CHECK(!strcmp(l.names[0], "alpha") && l.numbers[0] == 0.9 && !l.texts[0][0]);
    CHECK(!strcmp(l.names[1], "tissue.skin_fat.inv_mass") && l.numbers[1] == 0.8);
    CHECK(!strcmp(l.names[4], "hu_threshold.2") && l.numbers[4] == 400.0);
    CHECK(!strcmp(l.names[5], "condition") && !strcmp(l.texts[5], "B")); /* a choice by name */
    CHECK(params("{\"params\":{\"alpha\":true}}", &l, err) == PROTO_ERR_CORRUPT &&
          strstr(err, "\"alpha\""));
    CHECK(params("{\"params\":{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":1}}}}}}", &l, err) ==
              PROTO_ERR_CORRUPT &&
          strstr(err, "deeper"));
    CHECK(params("{\"params\":7}", &l, err) == PROTO_ERR_CORRUPT && strstr(err, "\"params\""));
    CHECK(params("{\"params\":{\"refuse\":1}}", &l, err) == PROTO_ERR_ARG &&
          strstr(err, "refused"));
    /* Too many values. */
    char big[8192];
    size_t n = (size_t)snprintf(big, sizeof big, "{\"params\":{");
    for (int i = 0; i < 70; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s\"p%d\":%d", i ? "," : "", i, i);
    snprintf(big + n, sizeof big - n, "}}");
    CHECK(params(big, &l, err) == PROTO_ERR_LIMIT);
}
