/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/quant_rules.c — llama-quantize's per-tensor flags turned into rt_qrules (quantize.h):
 * ggml type names for --output-tensor-type / --token-embedding-type / --tensor-type, and the
 * --tensor-type patterns compiled with PCRE2.
 * Layer 2 (runtime). llama-quantize lowercases each pattern and runs std::regex_search (ECMAScript)
 * on the tensor name; here the lowercased pattern is compiled as a PCRE2 (Perl) expression and
 * searched unanchored. The two dialects agree on the usual patterns (literals, ., [], *, +, ?, |,
 * (), \d, anchors); PCRE2-only syntax is accepted as PCRE2 defines it.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/quantize.h"
#include "base/status.h"
#include "quant/quant.h"
#include "quant/types.h"

#include <ctype.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

rt_qrules rt_qrules_default(void) {
    return (rt_qrules){.output_type = -1, .token_embd_type = -1};
}

sb_status rt_qtype_parse(const char *name, const char *what, int *type) {
    if (!name || !*name) return sb_fail(SB_ERR_INVALID_ARG, "quantize: %s: empty type name", what);
    for (int t = 0; t < SB_TYPE_COUNT; t++) {
        const qk_traits *tr = qk_get(t);
        if (!tr || tr->removed || !tr->name || strcasecmp(tr->name, name)) continue;
        if (!qk_chunk_quantizer(t))
            return sb_fail(SB_ERR_UNSUPPORTED, "quantize: %s: type %s cannot be written by this build (no quantizer "
                           "for %s; the IQ1/IQ2/IQ3, TQ and FP4 formats are not implemented)", what, tr->name, tr->name);
        *type = t;
        return SB_OK;
    }
    char list[512] = "";
    for (int t = 0; t < SB_TYPE_COUNT; t++) {
        const qk_traits *tr = qk_get(t);
        if (!tr || tr->removed || !qk_chunk_quantizer(t)) continue;
        strncat(list, *list ? " " : "", sizeof list - strlen(list) - 1);
        strncat(list, tr->name, sizeof list - strlen(list) - 1);
    }
    return sb_fail(SB_ERR_INVALID_ARG, "quantize: %s: unknown type \"%s\" (one of: %s)", what, name, list);
}

void rt_qrules_free(rt_qoverride *ov, int n) {
    for (int i = 0; ov && i < n; i++) pcre2_code_free((pcre2_code *)ov[i].code);
    free(ov);
}

static sb_status compile_pattern(const char *pattern, rt_qoverride *out) {
    size_t n = strlen(pattern);
    if (n == 0) return sb_fail(SB_ERR_INVALID_ARG, "quantize: --tensor-type: empty tensor name pattern");
    char *low = (char *)malloc(n + 1);
    if (!low) return sb_fail(SB_ERR_OOM, "quantize: --tensor-type pattern of %zu bytes", n);
    for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)pattern[i]);
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)low, n, 0, &err, &off, NULL);
    free(low);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return sb_fail(SB_ERR_INVALID_ARG, "quantize: --tensor-type: pattern \"%s\" is not a valid regular expression "
                       "(%s at offset %zu)", pattern, (const char *)msg, (size_t)off);
    }
    out->code = re;
    return SB_OK;
}

sb_status rt_qrules_build(const rt_qopts *o, rt_qrules *r, rt_qoverride **ov_out) {
    *r = rt_qrules_default();
    *ov_out = NULL;
    if (!o) return SB_OK;
    r->pure = o->pure;
    r->leave_output = o->leave_output;
    if (o->output_type_name) SB_TRY(rt_qtype_parse(o->output_type_name, "--output-tensor-type", &r->output_type));
    if (o->token_embd_type_name)
        SB_TRY(rt_qtype_parse(o->token_embd_type_name, "--token-embedding-type", &r->token_embd_type));
    if (o->n_tt <= 0) return SB_OK;
    if (!o->tt_patterns || !o->tt_types) return sb_fail(SB_ERR_INVALID_ARG, "quantize: --tensor-type: NULL list");
    rt_qoverride *ov = (rt_qoverride *)calloc((size_t)o->n_tt, sizeof *ov);
    if (!ov) return sb_fail(SB_ERR_OOM, "quantize: %d --tensor-type overrides", o->n_tt);
    sb_status s = SB_OK;
    int i = 0;
    for (; i < o->n_tt && s == SB_OK; i++) {
        if (!o->tt_patterns[i] || !o->tt_types[i]) {
            s = sb_fail(SB_ERR_INVALID_ARG, "quantize: --tensor-type #%d: NULL pattern or type", i + 1);
            break;
        }
        s = rt_qtype_parse(o->tt_types[i], "--tensor-type", &ov[i].type);
        if (s == SB_OK) s = compile_pattern(o->tt_patterns[i], &ov[i]);
    }
    if (s != SB_OK) {
        rt_qrules_free(ov, i);
        return s;
    }
    r->overrides = ov;
    r->n_overrides = o->n_tt;
    *ov_out = ov;
    return SB_OK;
}

int rt_qrules_match(const rt_qrules *r, const char *name) {
    if (!r) return -1;
    for (int i = 0; i < r->n_overrides; i++) {
        pcre2_code *re = (pcre2_code *)r->overrides[i].code;
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
        if (!md) return -2;
        int rc = pcre2_match(re, (PCRE2_SPTR)name, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL);
        pcre2_match_data_free(md);
        if (rc >= 0) return r->overrides[i].type;
        if (rc != PCRE2_ERROR_NOMATCH) return -2;
    }
    return -1;
}
