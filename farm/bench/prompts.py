"""The workload prompts (code, prose, math). The simulator's default profile recognises each by a marker word."""

from __future__ import annotations

CODE_PROMPT = (
    "Write a commented B-tree in Python with insert, search and delete, plus a test harness that inserts, "
    "searches and deletes a few thousand random keys and checks the tree's invariants after every operation."
)
PROSE_PROMPT = (
    "Write a long essay on the history of the lighthouse keepers of the North Atlantic coast: their daily work, "
    "their families, the storms they lived through and how automation ended the profession."
)
MATH_PROMPT = (
    "Prove that there are infinitely many primes congruent to 3 modulo 4, then work through the analogous "
    "argument for primes congruent to 5 modulo 6, showing every step of the algebra."
)

WORKLOAD_PROMPTS: dict[str, str] = {"code": CODE_PROMPT, "prose": PROSE_PROMPT, "math": MATH_PROMPT}
WORKLOAD_MARKERS: dict[str, str] = {"code": "B-tree", "prose": "essay", "math": "Prove"}
"""A word that appears in one workload's prompt and in no other's (the simulator's default profile uses these)."""
