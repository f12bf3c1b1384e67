"""The reasoning-gym datasets proofswarm scores, and why only these.

Several reasoning-gym scorers hand the answer to an evaluator: `eval` (n_queens, string_insertion,
spiral_matrix, binary_matrix, bitwise_arithmetic, number_sorting), sympy's `parse_expr`/`sympify` (countdown,
puzzle24, polynomial_multiplication, simple_/intermediate_integration), or `exec`/`compile` in their modules
(codeio, bf, rubiks_cube). An answer is a worker's text, and a worker's text is never code: no character
filter in front of an evaluator holds (`(f)(x)`, `__import__`, strings built without quotes all went through
one). So a dataset is admitted only when nothing its `score_answer` can reach evaluates text: its modules
contain no `eval`, `exec`, `compile`, `literal_eval`, sympy or another parser that evaluates, checked by
tests/integration/test_hostile_answers.py statically (the source of every admitted dataset's modules and of every function
its scorer calls) and dynamically (scoring answers with every evaluator watched). Any other dataset is refused
when a task is built, with one line that names it (`trainer init`, `pool create`, every role).

`composite` is refused too: it scores with whichever datasets its configuration names.
"""

from __future__ import annotations

from tasks.base import TaskError

SCORED_GYM_DATASETS = frozenset("""
ab acre aiw arc_1d arc_agi base_conversion basic_arithmetic binary_alternation boxnet caesar_cipher
calendar_arithmetic chain_sum circuit_logic coin_flip color_cube_rotation complex_arithmetic
count_bits count_primes course_schedule cryptarithm decimal_arithmetic decimal_chain_sum dice emoji_mystery
family_relationships figlet_font fraction_simplification futoshiki game_of_life game_of_life_halting gcd
graph_color group_anagrams gsm_symbolic isomorphic_strings jugs kakurasu knight_swap knights_knaves
largest_island lcm leg_counting letter_counting letter_jumble list_functions mahjong_puzzle manipulate_matrix
maze mini_sudoku modulo_grid needle_haystack number_filtering number_format number_sequence
palindrome_generation palindrome_partitioning path_star pool_matrix power_function prime_factorization products
quantum_lock ransom_note rearc rectangle_count rotate_matrix rotten_oranges rush_hour self_reference
sentence_reordering shortest_path simple_geometry sokoban spell_backward string_manipulation string_splitting
string_synthesis sudoku survo syllogism time_intervals tower_of_hanoi tsumego word_ladder word_sequence_reversal
word_sorting zebra_puzzles
""".split())
"""reasoning-gym 0.1.25 datasets whose scorer reaches no evaluator (basic_arithmetic evaluates only the
expressions it generates itself, never an answer)."""


def check_gym_dataset(name: str) -> None:
    """TaskError unless `name` is a dataset proofswarm scores (SCORED_GYM_DATASETS)."""
    if name not in SCORED_GYM_DATASETS:
        raise TaskError(f"reasoning-gym dataset {name!r} is not scored by proofswarm: its scorer evaluates the "
                        f"answer as code, or it is not a reasoning-gym 0.1.25 dataset (the datasets scored are "
                        f"listed in docs/protocol.md)")
