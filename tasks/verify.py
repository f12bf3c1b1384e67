"""Answer extraction and the bounds an answer must meet before any scorer parses it.

Everything here is a pure function of the text (no clocks, no floats), so every party refuses the
same answers. The format rules and bounds are tabulated in docs/protocol.md ("Rewards: scorers and
format rules"); the scorers themselves are tasks.datasets (math-verify, reasoning-gym) and
tasks.procedural (exact string comparison).

Bounds, in order: the completion is at most `MAX_COMPLETION_CHARS`; the final answer is the content
of exactly one `<answer>…</answer>` or, without one, of exactly one `\\boxed{…}` (a completion
without one, or with two, has no answer: no last-line fallback, no bare expression); the answer is
at most a few hundred characters of printable ASCII (no look-alike digits or letters), digit runs
are short (no arbitrary-size integer), and every power has a small exponent, no power inside an
exponent, and a bounded product of exponents through nested bases (no `7^300000000`, no tower).
"""

from __future__ import annotations

import re

ASCII_WHITESPACE = " \t\n\r\x0b\x0c"
MAX_COMPLETION_CHARS = 262_144
"""A longer completion is not scored (reward 0); generous for 32k-token completions of ~4 chars/token."""
MAX_MATH_ANSWER_CHARS = 256
"""Longest math answer; a non-numeric one is also at most max(32, 2 × len(reference) + 16)."""
MIN_GYM_ANSWER_CHARS = 32
MAX_GYM_ANSWER_CHARS = 16_384
"""A reasoning-gym answer may have max(32, 2 × len(reference) + 16) characters, at most 16384."""
MAX_DIGIT_RUN = 20
"""Longest run of digits in a math answer (or the reference's longest, if longer)."""
MAX_EXPRESSION_DIGIT_RUN = 4
"""Longest run of digits inside a non-literal math answer (or the reference's longest): a big number
inside a function (exp, tan of 10^20) costs a CAS arbitrary precision."""
MIN_GYM_DIGIT_RUN = 32
"""Longest run of digits in a reasoning-gym answer: max(32, 2 × the reference's longest)."""
MAX_EXPONENT = 4
"""Largest exponent bound of one power (or the reference's largest, if larger); see `power_bounds`."""
MAX_EXPONENT_CHAIN = 8
"""Largest product of exponent bounds along nested powers, ((a^b)^c: b·c), or the reference's."""
EXTRA_BRACKET_DEPTH = 2
"""An answer's brackets nest at most this much deeper than the reference's."""

_OPEN, _CLOSE, _BOXED = "<answer>", "</answer>", "\\boxed"
_DIGITS = re.compile(r"[0-9]+")


def first_line(completion: str) -> str:
    """The completion up to its first newline without surrounding ASCII whitespace: the answer of a
    short-format task (an answer ending in Unicode whitespace keeps it and does not match)."""
    return completion.split("\n", 1)[0].strip(ASCII_WHITESPACE)


def normalise_whitespace(text: str) -> str:
    """Runs of ASCII whitespace become one space; the ends are stripped."""
    return " ".join(re.split(r"[ \t\n\r\x0b\x0c]+", text.strip(ASCII_WHITESPACE)))


def _boxed_content(text: str, start: int) -> tuple[str, int] | None:
    """The balanced-brace content of the \\boxed at `start`, and the index after its closing brace."""
    i = start + len(_BOXED)
    if text[i:i + 1] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j], j + 1
    return None


def final_answer(completion: str) -> str | None:
    """The final answer of a free-form completion, or None when it has none by the format rule.

    Exactly one `<answer>…</answer>` pair (its content, which may be one `\\boxed{…}` and nothing
    else) and no `\\boxed` outside it; or, with no answer tag at all, exactly one `\\boxed{…}`.
    Any other arrangement (two answers, nested or unclosed tags, a box without braces, nothing)
    has no answer. The content is stripped of ASCII whitespace; an empty answer is None.
    """
    if len(completion) > MAX_COMPLETION_CHARS:
        return None
    opens, closes = completion.count(_OPEN), completion.count(_CLOSE)
    if opens or closes:
        if opens != 1 or closes != 1:
            return None
        start, end = completion.index(_OPEN) + len(_OPEN), completion.index(_CLOSE)
        if end < start:
            return None
        inner = completion[start:end].strip(ASCII_WHITESPACE)
        outside = completion.count(_BOXED) - inner.count(_BOXED)
        if outside:
            return None
        if _BOXED in inner:
            if inner.count(_BOXED) != 1 or not inner.startswith(_BOXED):
                return None
            boxed = _boxed_content(inner, 0)
            if boxed is None or boxed[1] != len(inner):
                return None
            inner = boxed[0].strip(ASCII_WHITESPACE)
        return inner or None
    if completion.count(_BOXED) != 1:
        return None
    boxed = _boxed_content(completion, completion.index(_BOXED))
    if boxed is None:
        return None
    return boxed[0].strip(ASCII_WHITESPACE) or None


def printable_ascii(text: str, extra: str | frozenset[str] = "") -> bool:
    """Every character is printable ASCII, a tab or newline, or one of `extra`."""
    return all(" " <= c <= "~" or c in "\t\n" or c in extra for c in text)


def longest_digit_run(text: str) -> int:
    return max((len(m) for m in _DIGITS.findall(text)), default=0)


def _exponent_bound(operand: str) -> int:
    """An upper bound on an exponent's value when it is numeric: the product of its literals,
    each counted as at least 2 (1 when it has none: a symbol stays symbolic)."""
    bound = 1
    for run in _DIGITS.findall(operand):
        bound *= max(int(run), 2)
        if bound > 10**9:
            return bound
    return bound


_CLOSING = {")": "(", "]": "[", "}": "{"}


def matching_bracket(text: str, start: int) -> int | None:
    """Index of the bracket closing the one at `start`, or None."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] in "([{":
            depth += 1
        elif text[j] in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return None


def power_bounds(text: str) -> tuple[int, int] | None:
    """(largest exponent bound, largest chain product) over the powers (`^`, `**`) of `text`, or None
    when a power's exponent contains a power or is an unclosed group."""
    stack = [1]  # per open bracket: the largest chain product inside it
    closed_at: dict[int, int] = {}  # index of a closing bracket -> the chain product inside its group
    largest_exp = largest_chain = 1
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "([{":
            stack.append(1)
            i += 1
            continue
        if c in ")]}":
            if len(stack) > 1:
                inner = stack.pop()
                stack[-1] = max(stack[-1], inner)
                closed_at[i] = inner
            i += 1
            continue
        if c == "^" or text.startswith("**", i):
            j = i - 1
            while j >= 0 and text[j] in ASCII_WHITESPACE:
                j -= 1
            base_chain = closed_at.get(j, 1)
            k = i + (2 if c == "*" else 1)
            while k < n and text[k] in ASCII_WHITESPACE + "+-":
                k += 1
            if k < n and text[k] in "([{":
                end = matching_bracket(text, k)
                if end is None:
                    return None
                operand, after = text[k + 1:end], end + 1
            else:
                m = re.match(r"[0-9]+(?:\.[0-9]+)?|\\?[A-Za-z]+", text[k:])
                operand = m.group(0) if m else ""
                after = k + len(operand)
            if "^" in operand or "**" in operand:
                return None
            exp = _exponent_bound(operand)
            if after < n and (text.startswith("**", after) or text[after] == "^"):
                return None  # a^b^c: the exponent of b is itself a power
            chain = base_chain * exp
            largest_exp, largest_chain = max(largest_exp, exp), max(largest_chain, chain)
            stack[-1] = max(stack[-1], chain)
            i = after
            continue
        i += 1
    return largest_exp, largest_chain


def bracket_depth(text: str) -> int:
    depth = deepest = 0
    for c in text:
        if c in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]}" and depth:
            depth -= 1
    return deepest


def shape_within(answer: str, reference: str) -> bool:
    """The answer is not much bigger than the reference: its powers (`powers_within`) and its bracket
    depth (at most EXTRA_BRACKET_DEPTH more). What a scorer's CAS spends on an answer grows with these."""
    return powers_within(answer, reference) and bracket_depth(answer) <= bracket_depth(reference) + EXTRA_BRACKET_DEPTH


def powers_within(answer: str, reference: str) -> bool:
    """The answer's powers meet MAX_EXPONENT and MAX_EXPONENT_CHAIN (or the reference's own, if larger)."""
    mine = power_bounds(answer)
    if mine is None:
        return False
    theirs = power_bounds(reference) or (1, 1)
    return mine[0] <= max(MAX_EXPONENT, theirs[0]) and mine[1] <= max(MAX_EXPONENT_CHAIN, theirs[1])


# --- math answers ----------------------------------------------------------------------------------

_INT = r"[0-9]+"
_DECIMAL = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+|[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?)"
_FRAC = (r"(?:\\[dt]?frac\s*\{\s*[+-]?\s*" + _INT + r"\s*\}\s*\{\s*" + _INT + r"\s*\}"
         r"|\\[dt]?frac\s*[0-9]\s*[0-9])")
_SLASH = r"(?:" + _INT + r"\s*/\s*" + _INT + r")"
NUMERIC_LITERAL = re.compile(
    r"[+-]?\s*(?:\\\$\s*)?(?:" + _FRAC + "|" + _SLASH + "|" + _DECIMAL + r")\s*(?P<pct>\\?%)?", re.ASCII)
_MATH_DELIMITERS = (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))

LATEX_COMMANDS = frozenset("""
frac dfrac tfrac sqrt cdot times div pm mp left right infty text textbf textit mathrm mathbf mbox mathbb
le leq ge geq lt gt ne neq approx cup cap in notin subset subseteq setminus emptyset varnothing circ degree
dots ldots cdots quad qquad displaystyle sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln
exp pi alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi rho sigma
tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega
""".split())
"""The LaTeX commands a math answer may use: no big operators (sum, prod, int, lim), no binomials or
factorials (`!`), no environments: a final answer is a value, not a computation."""
TRANSCENDENTAL = frozenset("sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln exp".split())
"""Functions an answer may use only where its reference does, at most once more than it does."""
_LATEX_ESCAPES = "{},;:! %$\\"


def strip_math_delimiters(answer: str) -> str:
    """`$…$`, `\\(…\\)` or `\\[…\\]` around the whole answer, once."""
    for left, right in _MATH_DELIMITERS:
        if len(answer) >= len(left) + len(right) and answer.startswith(left) and answer.endswith(right):
            return answer[len(left):len(answer) - len(right)].strip(ASCII_WHITESPACE)
    return answer


def is_numeric_literal(text: str) -> bool:
    """An integer, decimal (with optional thousands separators in groups of three), a/b or
    \\frac{a}{b} (\\frac12), with optional sign, leading `\\$` and trailing `%`: a value, not an
    expression that evaluates to one."""
    return NUMERIC_LITERAL.fullmatch(strip_math_delimiters(text.strip(ASCII_WHITESPACE))) is not None


def is_word_answer(gold: str) -> bool:
    """A reference with a word in it (two letters in a row outside LaTeX commands): compared as a
    string, since a CAS would read `desserts` as a product of commuting symbols."""
    return re.search(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+", " ", gold)) is not None


def latex_commands_ok(text: str) -> bool:
    """Only whitelisted commands (LATEX_COMMANDS) and escapes of punctuation."""
    for m in re.finditer(r"\\([A-Za-z]+|.?)", text):
        name = m.group(1)
        if name.isalpha():
            if name not in LATEX_COMMANDS:
                return False
        elif not name or name not in _LATEX_ESCAPES:
            return False
    return True


def _functions(text: str) -> dict[str, int]:
    """How often each transcendental function (TRANSCENDENTAL) is used."""
    counts: dict[str, int] = {}
    for name in re.findall(r"\\([A-Za-z]+)", text):
        if name in TRANSCENDENTAL:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _letters(text: str) -> set[str]:
    """Letters outside LaTeX command names: the symbols of an expression."""
    return set(re.findall(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", " ", text)))


def admissible_math_answer(answer: str, gold: str) -> bool:
    """Whether a math answer may be handed to math-verify (see the module docstring).

    A numeric reference takes a numeric literal only (`7 * 8` is not an answer to 56; nothing is
    evaluated). Any other reference takes a numeric literal or an expression about its own size: at
    most max(32, 2 × len(reference) + 16) characters, digit runs of at most 4 (or the reference's),
    only the reference's letters (symbols), whitelisted LaTeX commands, transcendental functions only
    those of the reference and at most one more of each, no factorial, powers and bracket depth within
    `shape_within`.
    """
    if len(answer) > MAX_MATH_ANSWER_CHARS or not printable_ascii(answer):
        return False
    if longest_digit_run(answer) > max(MAX_DIGIT_RUN, longest_digit_run(gold)):
        return False
    if is_numeric_literal(gold):
        if not is_numeric_literal(answer):
            return False
        literal = NUMERIC_LITERAL.fullmatch(strip_math_delimiters(answer))
        return literal is not None and (not literal.group("pct") or "%" in gold)
    if is_numeric_literal(answer):
        return True  # a number against an expression (0.5 for \\frac{1}{2}): nothing to expand
    if len(answer) > max(32, 2 * len(gold) + 16):
        return False
    if longest_digit_run(answer) > max(MAX_EXPRESSION_DIGIT_RUN, longest_digit_run(gold)):
        return False
    if "!" in answer.replace("\\!", "") or not latex_commands_ok(answer):
        return False
    if not _letters(answer) <= _letters(gold):
        return False
    mine, theirs = _functions(answer), _functions(gold)
    if any(name not in theirs or count > theirs[name] + 1 for name, count in mine.items()):
        return False
    return shape_within(answer, gold)


# --- reasoning-gym answers -------------------------------------------------------------------------

GYM_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
"""A reasoning-gym reference that is a plain number takes only a plain number (GYM_NUMBER_ANSWER)."""
GYM_NUMBER_ANSWER = re.compile(r"[+-]?(?:[0-9]+|[0-9]{1,3}(?:,[0-9]{3})+)(?:\.[0-9]+)?")


def admissible_gym_answer(answer: str, reference: str) -> bool:
    """Whether a reasoning-gym answer may reach its dataset's score_answer: length (max(32, 2 × len(reference)
    + 16), at most MAX_GYM_ANSWER_CHARS), characters (printable ASCII, or a character of the reference) and digit
    runs (no arbitrary-size integer for a scorer's `int()`). A plain-number reference takes only a plain number
    (thousands separators in groups of three).

    No scorer proofswarm admits evaluates the answer (tasks.gym), so these are bounds on cost, not a filter in
    front of an evaluator; each is one pass over the text (linear time)."""
    if len(answer) > min(MAX_GYM_ANSWER_CHARS, max(MIN_GYM_ANSWER_CHARS, 2 * len(reference) + 16)):
        return False
    if GYM_NUMBER.fullmatch(reference) and not GYM_NUMBER_ANSWER.fullmatch(answer):
        return False  # 8,7,1,7,4,4,6 or 8.717446e6 for 8717446: the scorer would strip the commas
    if not printable_ascii(answer, frozenset(reference)):
        return False
    return longest_digit_run(answer) <= max(MIN_GYM_DIGIT_RUN, 2 * longest_digit_run(reference))
