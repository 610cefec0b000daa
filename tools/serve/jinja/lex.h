/* What the lexer (lex.c) and the parser (parse.c) of the Jinja subset
 * share: the tokens and the parser's state. */
#ifndef PFX_TOOLS_SERVE_JINJA_LEX_H
#define PFX_TOOLS_SERVE_JINJA_LEX_H

#include "jinja_impl.h"

typedef enum tkind {
    T_EOF,
    T_TEXT,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
} tkind;

typedef struct token {
    tkind k;
    const char *s; /* text, name, operator; T_STRING: decoded (in the arena) */
    size_t n, pos;
    int64_t i;
    double d; /* T_FLOAT */
} token;

typedef struct parser {
    const char *src;
    size_t len, at;
    int tag;           /* 0: in text, 1: in {{ }}, 2: in {% %} */
    int brackets;      /* open (, [, { in the tag: no end of tag inside them */
    bool strip_next;   /* after -%}: the next text loses its leading space */
    bool trim_newline; /* after %}: the next text loses one leading newline */
    token tok;         /* the current token */
    int depth;
    arena *a;
    jfail *f;
} parser;

/* The token after the current one into p->tok. */
void lex_next(parser *p);
__attribute__((noreturn)) void lex_fail(parser *p, size_t pos, const char *what);

#endif
