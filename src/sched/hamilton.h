/* hamilton: edge-disjoint directed Hamiltonian cycles for TASP.
 *
 * TASP (Wang et al. 2025, arXiv 2509.26541) splits the all-to-all of a
 * complete directed graph K_n* into n-1 edge-disjoint directed Hamiltonian
 * cycles.  Such a decomposition exists for every n except 4 and 6
 * (T. W. Tillson, "A Hamiltonian decomposition of K*_2m, 2m >= 8",
 * J. Combin. Theory Ser. B 29 (1980) 68-74).  We construct it, in O(n^2):
 *  - n odd: Walecki's decomposition of the undirected K_n into (n-1)/2
 *    Hamiltonian cycles, each taken in both directions;
 *  - n even: decompose K_{n-1}* as above (n-2 cycles), take a Hamiltonian
 *    path of K_{n-1}* with exactly one edge on each cycle (a "rainbow"
 *    path, given by an explicit formula, hamilton.c), splice the new vertex
 *    into every cycle at its path edge, and close the path through the new
 *    vertex: the last cycle.
 * For n = 4 and 6 no such path exists; the new vertex is spliced in at a
 * set of edges with distinct tails and heads: n-2 cycles, the largest
 * number there is for these n.  Callers verify before use (ham_verify). */
#ifndef TASP_HAMILTON_H
#define TASP_HAMILTON_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* The largest n TASP decomposes: tests/test_hamilton.c checks the
 * construction at every n to 1,024 and at a sample beyond, up to this
 * (8,192: the construction is the same for every n; its cycles take
 * 4 n^2 bytes, 256 MiB here; ham_verify runs before every use anyway). */
#define HAM_MAX_N 8192u

typedef struct {
  uint32_t n;         /* vertices (GPUs) */
  uint32_t n_cycles;
  uint32_t *succ;     /* succ[k*n + v]: next vertex after v on cycle k */
} ham_decomp;

/* Decompose K_n* (n >= 2).  Returns the number of cycles: n-1, except 2 for
 * n = 4 and 4 for n = 6. */
uint32_t ham_complete(uint32_t n, ham_decomp *out);
/* Edge-disjoint directed Hamiltonian cycles using only edges allowed by
 * adj (n*n, adj[u*n+v] != 0), found by search; up to max_cycles. */
uint32_t ham_sparse(uint32_t n, const uint8_t *adj, uint32_t max_cycles, ham_decomp *out);
/* The (m-K_m-m)^u decomposition of u nodes of m GPUs (GPU a*m+i is GPU i
 * of node a): cycle j runs a Hamiltonian path P_j through every node's
 * K_m* (P_j from s_j to e_j) and leaves each node from e_j for s_j of the
 * next node, so every GPU sends over its NIC on exactly one cycle.  The
 * paths come from a decomposition of K_{m+1}* with vertex m removed from
 * every cycle: m edge-disjoint paths covering K_m*, whose starts (and
 * ends) are all different.  Returns the number of cycles (m, or m-1 where
 * K_{m+1}* has no full decomposition: m+1 = 4, 6). */
uint32_t ham_node_chain(uint32_t m, uint32_t u, ham_decomp *out);
void ham_clear(ham_decomp *d);

/* Check: each cycle visits every vertex once; no directed edge is used
 * twice; every edge is allowed by adj (NULL: all).  Message on failure. */
bool ham_verify(const ham_decomp *d, const uint8_t *adj, GError **err);

#endif
