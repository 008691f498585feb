/* The grounded strings' co-matcher (stencil/constraints/span_automaton.py; its Python twin is
 * span_automaton_ref.py): a suffix automaton over a document's JSON-escaped chunks joined by
 * marker bytes, and a walk of the token trie driven by the automaton's edges that sets the
 * tokens whose bytes (up to a closing quote) continue a span.
 *
 * Markers are bytes 1..7 between chunks: bit 2 = the chunk before may end a value, bit 4 = the
 * chunk after may start one. Byte 0 is a barrier (a chunk no value may hold). Markers and
 * barriers are control bytes, which a JSON string never holds raw, so a walk never steps on
 * them; inside a value a marker is crossed silently. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int32_t len, link, head; } State; /* head: first edge of the state's list */
typedef struct { int32_t to, next; uint8_t byte; } Edge;
typedef struct {
  State *st; Edge *ed; int32_t ns, ne, last;
  int32_t *hkey, *hval; uint32_t hmask; /* (state << 8 | byte) -> state, open addressing */
  int32_t *mk_start, *mk_list;         /* per state: the states one marker further */
  uint8_t *mk_flags;                   /* per state: OR of its markers */
  uint8_t *live;                       /* per state: a span may end somewhere past it */
  /* the token trie the walk reads (see below), set once by sam_set_trie */
  const uint8_t *cbyte; const int32_t *cidx, *cstart, *ntok, *nend, *xstart, *xtok;
  int32_t nwords;
} Sam;

static uint32_t slot(int32_t key) { uint32_t x = (uint32_t)key * 2654435761u; return x ^ (x >> 15); }

static int32_t get(const Sam *s, int32_t st, uint8_t b) {
  int32_t key = (st << 8) | b;
  for (uint32_t i = slot(key) & s->hmask; s->hkey[i] != -1; i = (i + 1) & s->hmask)
    if (s->hkey[i] == key) return s->hval[i];
  return -1;
}

static void put(Sam *s, int32_t st, uint8_t b, int32_t to) {
  int32_t key = (st << 8) | b;
  uint32_t i = slot(key) & s->hmask;
  while (s->hkey[i] != -1 && s->hkey[i] != key) i = (i + 1) & s->hmask;
  if (s->hkey[i] == -1) {
    Edge *e = &s->ed[s->ne];
    e->to = to; e->byte = b; e->next = s->st[st].head; s->st[st].head = s->ne++;
  } else {
    for (int32_t e = s->st[st].head; e != -1; e = s->ed[e].next)
      if (s->ed[e].byte == b) s->ed[e].to = to;
  }
  s->hkey[i] = key; s->hval[i] = to;
}

static int32_t add_state(Sam *s, int32_t len) {
  State *x = &s->st[s->ns];
  x->len = len; x->link = -1; x->head = -1;
  return s->ns++;
}

void sam_free(Sam *s) {
  if (!s) return;
  free(s->st); free(s->ed); free(s->hkey); free(s->hval);
  free(s->mk_start); free(s->mk_list); free(s->mk_flags); free(s->live); free(s);
}

/* the suffix automaton of t[0..n) (linear: at most 2n states, 3n edges) */
Sam *sam_build(const uint8_t *t, int32_t n) {
  Sam *s = calloc(1, sizeof(Sam));
  uint32_t cap = 1;
  while (cap < (uint32_t)(6 * n + 16)) cap <<= 1;
  s->st = malloc(sizeof(State) * (2 * n + 2));
  s->ed = malloc(sizeof(Edge) * (3 * n + 4));
  s->hmask = cap - 1;
  s->hkey = malloc(4 * cap); s->hval = malloc(4 * cap);
  memset(s->hkey, 0xff, 4 * cap);
  s->last = add_state(s, 0);
  for (int32_t i = 0; i < n; i++) {
    uint8_t c = t[i];
    int32_t cur = add_state(s, s->st[s->last].len + 1), p = s->last;
    while (p != -1 && get(s, p, c) == -1) { put(s, p, c, cur); p = s->st[p].link; }
    if (p == -1) {
      s->st[cur].link = 0;
    } else {
      int32_t q = get(s, p, c);
      if (s->st[p].len + 1 == s->st[q].len) {
        s->st[cur].link = q;
      } else {
        int32_t clone = add_state(s, s->st[p].len + 1);
        s->st[clone].link = s->st[q].link;
        for (int32_t e = s->st[q].head; e != -1; e = s->ed[e].next)
          put(s, clone, s->ed[e].byte, s->ed[e].to);
        while (p != -1 && get(s, p, c) == q) { put(s, p, c, clone); p = s->st[p].link; }
        s->st[q].link = clone; s->st[cur].link = clone;
      }
    }
    s->last = cur;
  }
  s->mk_start = malloc(4 * (s->ns + 1));
  s->mk_list = malloc(4 * (s->ne + 1));
  s->mk_flags = calloc(s->ns, 1);
  int32_t k = 0;
  for (int32_t i = 0; i < s->ns; i++) {
    s->mk_start[i] = k;
    for (int32_t e = s->st[i].head; e != -1; e = s->ed[e].next)
      if (s->ed[e].byte >= 1 && s->ed[e].byte <= 7) {
        s->mk_list[k++] = s->ed[e].to;
        s->mk_flags[i] |= s->ed[e].byte;
      }
  }
  s->mk_start[s->ns] = k;
  /* live: a marker that lets a value end is reachable without crossing a barrier (byte 0);
   * every edge goes to a longer state, so longest first is a reverse topological order */
  int32_t *count = calloc(n + 2, 4), *order = malloc(4 * s->ns);
  for (int32_t i = 0; i < s->ns; i++) count[s->st[i].len]++;
  for (int32_t l = 1; l <= n + 1; l++) count[l] += count[l - 1];
  for (int32_t i = s->ns - 1; i >= 0; i--) order[--count[s->st[i].len]] = i;
  s->live = calloc(s->ns, 1);
  for (int32_t r = s->ns - 1; r >= 0; r--) {
    int32_t i = order[r];
    uint8_t ok = (s->mk_flags[i] & 2) != 0;
    for (int32_t e = s->st[i].head; e != -1 && !ok; e = s->ed[e].next)
      if (s->ed[e].byte != 0 && s->live[s->ed[e].to]) ok = 1;
    s->live[i] = ok;
  }
  free(count); free(order);
  return s;
}

int32_t sam_states(const Sam *s) { return s->ns; }

/* a walk position: the automaton states the bytes so far reach (one per way of placing the
 * chunk boundaries they cross; a handful at most) */
#define MAXSET 32
typedef struct { int32_t n; int32_t v[MAXSET]; } Set;

static void add(Set *o, int32_t x) {
  for (int i = 0; i < o->n; i++) if (o->v[i] == x) return;
  if (o->n < MAXSET) o->v[o->n++] = x;
}

static void step(const Sam *s, const Set *in, uint8_t b, Set *out) {
  out->n = 0;
  for (int i = 0; i < in->n; i++) {
    int32_t x = in->v[i], y = get(s, x, b);
    if (y != -1 && s->live[y]) add(out, y);
    for (int32_t j = s->mk_start[x]; j < s->mk_start[x + 1]; j++)
      if ((y = get(s, s->mk_list[j], b)) != -1 && s->live[y]) add(out, y);
  }
}

static int can_end(const Sam *s, const Set *in) {
  for (int i = 0; i < in->n; i++) if (s->mk_flags[in->v[i]] & 2) return 1;
  return 0;
}

/* the start position (after a marker that lets a value start); returns its size */
int32_t sam_start(const Sam *s, int32_t *out) {
  Set set = {0};
  for (int32_t e = s->st[0].head; e != -1; e = s->ed[e].next)
    if (s->ed[e].byte >= 1 && s->ed[e].byte <= 7 && (s->ed[e].byte & 4) && s->live[s->ed[e].to])
      add(&set, s->ed[e].to);
  memcpy(out, set.v, 4 * set.n);
  return set.n;
}

int32_t sam_can_end(const Sam *s, const int32_t *pos, int32_t npos) {
  Set a;
  a.n = npos; memcpy(a.v, pos, 4 * npos);
  return can_end(s, &a);
}

/* advance a position in place by bytes up to a closing quote (a raw quote where a span may
 * end; inside a span a quote is only ever part of an escape); *used: the bytes consumed
 * before that quote (n without one); returns the new size (0: not a span) */
int32_t sam_feed(const Sam *s, int32_t *pos, int32_t npos, const uint8_t *b, int32_t n,
                 int32_t *used) {
  Set a, c;
  a.n = npos; memcpy(a.v, pos, 4 * npos);
  int32_t i = 0;
  for (; i < n; i++) {
    if (b[i] == '"' && can_end(s, &a)) break;
    if (b[i] <= 7) return 0;
    step(s, &a, b[i], &c);
    a = c;
    if (!a.n) return 0;
  }
  memcpy(pos, a.v, 4 * a.n);
  *used = i;
  return a.n;
}

/* the token trie: nodes in DFS order (node 0 the root), token id or -1, end of subtree; each
 * node's children in CSR form (cstart[i]..cstart[i+1]) sorted by byte; the node's other tokens
 * with the same bytes xtok[xstart[i]..xstart[i+1]] (in DFS order too: a subtree's are one run) */
typedef struct {
  const uint8_t *cbyte; const int32_t *cidx, *cstart, *ntok, *nend, *xstart, *xtok;
  uint32_t *mask; int32_t allowed;
} Trie;

static int32_t child(const Trie *t, int32_t node, uint8_t b) {
  int32_t lo = t->cstart[node], hi = t->cstart[node + 1];
  while (lo < hi) {
    int32_t mid = (lo + hi) >> 1;
    if (t->cbyte[mid] < b) lo = mid + 1; else hi = mid;
  }
  return lo < t->cstart[node + 1] && t->cbyte[lo] == b ? t->cidx[lo] : -1;
}

static void allow(Trie *t, int32_t tok) {
  if (tok >= 0) { t->mask[tok >> 5] |= 1u << (tok & 31); t->allowed++; }
}

/* every token of the nodes from..to (to = from + 1: one node; nend[from]: its subtree);
 * xstart is NULL where no two tokens share their bytes */
static void allow_nodes(Trie *t, int32_t from, int32_t to) {
  for (int32_t j = from; j < to; j++) allow(t, t->ntok[j]);
  if (t->xstart)
    for (int32_t j = t->xstart[from]; j < t->xstart[to]; j++) allow(t, t->xtok[j]);
}

static void visit(const Sam *s, Trie *t, int32_t node, const Set *cur) {
  uint32_t seen[8] = {0};
  if (can_end(s, cur)) { /* a closing quote may follow: what comes after it is the grammar's */
    int32_t q = child(t, node, '"');
    if (q >= 0) allow_nodes(t, q, t->nend[q]);
  }
  for (int i = 0; i < cur->n; i++) {
    int32_t x = cur->v[i], markers = s->mk_start[x + 1] - s->mk_start[x];
    for (int32_t k = -1; k < markers; k++) {
      int32_t from = k < 0 ? x : s->mk_list[s->mk_start[x] + k];
      for (int32_t e = s->st[from].head; e != -1; e = s->ed[e].next) {
        uint8_t b = s->ed[e].byte;
        if (b <= 7 || (seen[b >> 5] >> (b & 31) & 1)) continue;
        seen[b >> 5] |= 1u << (b & 31);
        int32_t c = child(t, node, b);
        if (c < 0) continue;
        Set next;
        step(s, cur, b, &next);
        if (!next.n) continue; /* no span goes on past it */
        allow_nodes(t, c, c + 1);
        visit(s, t, c, &next);
      }
    }
  }
}

/* the token trie (owned by the caller, alive as long as the automaton) and the mask width */
void sam_set_trie(Sam *s, const uint8_t *cbyte, const int32_t *cidx, const int32_t *cstart,
                  const int32_t *ntok, const int32_t *nend, const int32_t *xstart,
                  const int32_t *xtok, int32_t nwords) {
  s->cbyte = cbyte; s->cidx = cidx; s->cstart = cstart; s->ntok = ntok; s->nend = nend;
  s->xstart = xstart; s->xtok = xtok; s->nwords = nwords;
}

/* OR into mask (uint32 words) the tokens that continue a span from pos; returns how many */
int32_t sam_walk(const Sam *s, const int32_t *pos, int32_t npos, uint32_t *mask) {
  Trie t = {s->cbyte, s->cidx, s->cstart, s->ntok, s->nend, s->xstart, s->xtok, mask, 0};
  Set cur;
  cur.n = npos; memcpy(cur.v, pos, 4 * npos);
  visit(s, &t, 0, &cur);
  return t.allowed;
}

/* AND into row the tokens that continue a span from pos (scratch: nwords words) */
void sam_walk_and(const Sam *s, const int32_t *pos, int32_t npos, uint32_t *scratch,
                  uint32_t *row) {
  memset(scratch, 0, 4 * (size_t)s->nwords);
  sam_walk(s, pos, npos, scratch);
  for (int32_t i = 0; i < s->nwords; i++) row[i] &= scratch[i];
}
