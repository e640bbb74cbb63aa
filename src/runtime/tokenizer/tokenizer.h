/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/tokenizer.h — vocabularies, tokenizers (SPM, byte-level BPE, Gemma 4 BPE),
 * detokenization and chat-template rendering (architectures.md §8, robustness.md §1b/§4b).
 * Layer 2 (runtime). The core works on a plain in-memory description (tok_vocab_spec: token texts,
 * scores, types, merges, special ids, flags), so it can be built and fuzzed without files;
 * tok_vocab_load_gguf fills that description from an open gguf_file and calls tok_vocab_build.
 * Invariants: a built tok_vocab owns copies of all its text (the GGUF file may be closed); every
 * id it stores or emits is in [0, n_tokens); tokenize/detokenize never read outside the input and
 * never abort on any input bytes. A tok_vocab is immutable after build: concurrent use from many
 * threads is safe.
 * Non-goals: WPM/UGM/RWKV vocabularies, Jinja execution (templates are recognised, never run).
 */
#ifndef SB_RUNTIME_TOKENIZER_H
#define SB_RUNTIME_TOKENIZER_H

#include "sonicboom.h"
#include "base/hash.h"
#include "format/gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- token types and attributes ----

/* GGUF tokenizer.ggml.token_type values. */
enum { TOK_TYPE_UNDEFINED = 0, TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3,
       TOK_TYPE_USER_DEFINED = 4, TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6 };

/* Attribute bits (the public SB_TOKEN_ATTR_* values). */
enum { TOK_ATTR_NORMAL = 1, TOK_ATTR_CONTROL = 2, TOK_ATTR_USER_DEFINED = 4, TOK_ATTR_UNKNOWN = 8,
       TOK_ATTR_BYTE = 16, TOK_ATTR_UNUSED = 32, TOK_ATTR_EOG = 64 };

typedef enum tok_model { TOK_MODEL_SPM = 0, TOK_MODEL_BPE = 1, TOK_MODEL_GEMMA4 = 2 } tok_model;
typedef enum tok_pre { TOK_PRE_NONE = 0, TOK_PRE_DEFAULT, TOK_PRE_GPT2, TOK_PRE_LLAMA3, TOK_PRE_QWEN2 } tok_pre;

typedef enum tok_chat_kind {
    TOK_CHAT_FALLBACK = 0, /* no template or an unrecognised one: ChatML (documented in docs/tokenizer.md) */
    TOK_CHAT_CHATML,       /* Qwen2 / 2.5 / 3: <|im_start|>role\ncontent<|im_end|>\n */
    TOK_CHAT_LLAMA3,       /* <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> */
    TOK_CHAT_GEMMA3,       /* <start_of_turn>user\n...<end_of_turn>\n, role model */
    TOK_CHAT_GEMMA4,       /* <|turn>user\n...<turn|>\n, role model */
    TOK_CHAT_GEMMA4_THOUGHT, /* Gemma 4 whose template closes the generation prompt with an empty
                              * thought channel: <|turn>model\n<|channel>thought\n<channel|> */
} tok_chat_kind;

// ---- the in-memory description a vocabulary is built from ----

/* Everything here is borrowed for the duration of tok_vocab_build only. Special ids are -1 when
 * absent; the flags are -1 for "use the model's default". */
typedef struct tok_vocab_spec {
    const char *model;          /* tokenizer.ggml.model: "llama", "gpt2", "gemma4" */
    const char *pre;            /* tokenizer.ggml.pre, NULL when absent */
    int64_t n_tokens;
    const sb_strview *texts;    /* [n_tokens] token texts (any bytes) */
    const float *scores;        /* [n_tokens] or NULL (all 0) */
    const int32_t *types;       /* [n_tokens] TOK_TYPE_* or NULL (all NORMAL) */
    int64_t n_merges;
    const sb_strview *merges;   /* [n_merges] "A B" (split at the first space at position >= 1) */
    int64_t bos, eos, eot, eom, unk, sep, pad, mask;
    int add_bos, add_eos, add_space_prefix;
    const char *chat_template;  /* may be NULL */
    size_t chat_template_len;
} tok_vocab_spec;

/* A spec with every id -1, every flag -1 and every array empty. */
void tok_vocab_spec_init(tok_vocab_spec *s);

typedef struct tok_vocab tok_vocab;

/* Build a vocabulary. Errors: SB_ERR_VOCAB (inconsistent data; the text names the key and the
 * index, e.g. "tokenizer.ggml.merges[17]"), SB_ERR_VOCAB_UNSUPPORTED (unknown model or pre),
 * SB_ERR_OOM, SB_ERR_INVALID_ARG. On failure *out is NULL. */
sb_status tok_vocab_build(const tok_vocab_spec *spec, tok_vocab **out);

/* Read the tokenizer.* keys of an open GGUF file and build the vocabulary (nothing else is read;
 * the file may be closed afterwards). Same errors as tok_vocab_build, plus SB_ERR_VOCAB for a
 * missing/mistyped key (named in the text). */
sb_status tok_vocab_load_gguf(const gguf_file *f, tok_vocab **out);

void tok_vocab_free(tok_vocab *v);

// ---- queries ----

int32_t tok_n_tokens(const tok_vocab *v);
tok_model tok_get_model(const tok_vocab *v);
/* TOK_ATTR_* bits of id (0 for an id out of range). */
uint32_t tok_attr(const tok_vocab *v, int32_t id);
/* The stored text of id (as in the GGUF), NULL for out-of-range ids. */
const sb_strview *tok_text(const tok_vocab *v, int32_t id);
/* Id of an exact token text, -1 if none. */
int32_t tok_find(const tok_vocab *v, const char *text, size_t len);

typedef enum tok_special { TOK_SPECIAL_BOS, TOK_SPECIAL_EOS, TOK_SPECIAL_EOT, TOK_SPECIAL_EOM,
                           TOK_SPECIAL_UNK, TOK_SPECIAL_SEP, TOK_SPECIAL_PAD, TOK_SPECIAL_MASK } tok_special;
/* The id of a special token, -1 when the vocabulary has none. */
int32_t tok_special_id(const tok_vocab *v, tok_special which);
bool tok_is_eog(const tok_vocab *v, int32_t id);
bool tok_add_bos(const tok_vocab *v);
bool tok_add_eos(const tok_vocab *v);

// ---- tokenize ----

/* A growable output buffer of ids. */
typedef struct tok_ids { int32_t *ids; size_t n, cap; } tok_ids;
void tok_ids_free(tok_ids *t);

/* Tokenize len bytes of text (any bytes; NUL is an ordinary byte). add_special: prepend BOS /
 * append EOS as the vocabulary asks; parse_special: match control tokens in the text
 * (user-defined tokens are always matched). Appends to *out. SB_ERR_TEXT_TOO_LONG for
 * len > INT32_MAX, SB_ERR_OOM. */
sb_status tok_tokenize(const tok_vocab *v, const char *text, size_t len, bool add_special,
                       bool parse_special, tok_ids *out);

/* Tokenize text of which only some bytes may spell special tokens (chat prompts: template text is
 * trusted, message content is not). trusted[i] != 0 marks byte i as trusted. Within trusted bytes
 * every special token is matched (as with parse_special); a match touching an untrusted byte is
 * taken only for a user-defined token not listed in deny[0..n_deny) (what parse_special = false
 * matches, minus the denied ids). The fragments between matches are tokenized as by tok_tokenize,
 * so when no special-token text touches untrusted bytes the ids equal those of
 * tok_tokenize(parse_special = true). add_bos: prepend BOS when the vocabulary adds one; never
 * EOS. Appends to *out. Errors as tok_tokenize. */
sb_status tok_tokenize_trusted(const tok_vocab *v, const char *text, size_t len, const unsigned char *trusted,
                               const int32_t *deny, size_t n_deny, bool add_bos, tok_ids *out);

// ---- detokenize ----

/* Growable byte buffer. */
typedef struct tok_bytes { char *p; size_t n, cap; } tok_bytes;
void tok_bytes_free(tok_bytes *b);
sb_status tok_bytes_append(tok_bytes *b, const void *p, size_t n);

enum { TOK_DETOK_REMOVE_SPECIAL = 1,  /* drop a leading BOS / trailing EOS the vocab adds */
       TOK_DETOK_UNPARSE_SPECIAL = 2, /* render control tokens as their text */
       TOK_DETOK_NO_CLEAN_SPACES = 4  /* skip the BPE clean-up of " ." / " 's" (exact round trip) */ };

/* The bytes one token renders to: control/unknown tokens only with special, user-defined as
 * their text, byte tokens as the byte, normal tokens with U+2581 -> ' ' (SPM/Gemma 4) or the
 * byte-level mapping undone (BPE). lstrip removes one leading space. Never fails for a valid id;
 * SB_ERR_RANGE for an id out of range. The view points into v (valid while v lives). */
sb_status tok_piece(const tok_vocab *v, int32_t id, bool special, sb_strview *out);

/* Sequence -> text (architectures.md §8.5/§8.6/§8.4 clean_spaces). Appends to *out. */
sb_status tok_detokenize(const tok_vocab *v, const int32_t *ids, size_t n, unsigned flags, tok_bytes *out);

/* Streaming detokenizer: push tokens one at a time, get back the bytes that are complete UTF-8
 * (an incomplete trailing sequence is held until the next token or tok_stream_flush). */
typedef struct tok_stream {
    const tok_vocab *v;
    bool special, first;
    unsigned char held[4];
    size_t n_held;
} tok_stream;
void tok_stream_init(tok_stream *s, const tok_vocab *v, bool special);
/* Appends the now-complete bytes for id to *out. SB_ERR_RANGE for a bad id. */
sb_status tok_stream_push(tok_stream *s, int32_t id, tok_bytes *out);
/* Appends whatever is held (possibly invalid UTF-8) and resets. */
sb_status tok_stream_flush(tok_stream *s, tok_bytes *out);

// ---- chat templates ----

typedef struct tok_chat_msg { const char *role; const char *content; } tok_chat_msg;

tok_chat_kind tok_chat_detect(const char *tmpl, size_t len);
tok_chat_kind tok_chat_kind_of(const tok_vocab *v);
const char *tok_chat_kind_name(tok_chat_kind k);

/* Render messages for kind k into *out (appends). Roles: "system", "user", "assistant" (others
 * are rejected with SB_ERR_INVALID_ARG naming the message index). add_generation_prompt appends
 * the assistant header. */
sb_status tok_chat_render(tok_chat_kind k, const tok_chat_msg *msgs, size_t n,
                          bool add_generation_prompt, tok_bytes *out);

/* Tokenize messages in v's chat format: the format's marker text is matched as special tokens,
 * message content never (content is tokenized as with parse_special = false, and additionally no
 * user-defined token that the format uses as a marker is matched in it). BOS as the vocabulary
 * asks, no EOS. For content without special-token text the ids equal tokenizing
 * tok_chat_render's text with add_special = parse_special = true. Appends to *out. Errors as
 * tok_chat_render and tok_tokenize. */
sb_status tok_chat_tokenize(const tok_vocab *v, const tok_chat_msg *msgs, size_t n, bool add_generation_prompt,
                            tok_ids *out);

// ---- UTF-8 (shared by the pieces) ----

/* Length of the UTF-8 sequence that lead byte c starts, as llama.cpp counts it (continuation
 * bytes count 1). */
static inline size_t tok_utf8_len(unsigned char c) {
    static const unsigned char lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lut[c >> 4];
}

/* Strict decode of one code point at s[0..n): returns its length and *cp, or 0 for an invalid
 * sequence (overlong, surrogate, > U+10FFFF, truncated, stray continuation byte). */
size_t tok_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Encode cp (<= 0x10FFFF) into out[4]; returns the length. */
size_t tok_utf8_encode(uint32_t cp, unsigned char *out);

#endif
