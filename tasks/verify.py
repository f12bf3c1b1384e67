"""Answer extraction and exact comparison: no partial credit for substrings."""

from __future__ import annotations

import re
from fractions import Fraction

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_BOXED = "\\boxed{"
_SYMBOLIC_OK = re.compile(r"^[0-9a-zA-Z+\-*/^() .]{1,64}$")


def first_line(completion: str) -> str:
    """The completion up to its first newline, stripped: the answer of a short-format task."""
    return completion.split("\n", 1)[0].strip()


def extract_answer(completion: str) -> str:
    """The final answer of a free-form completion.

    Order: the last <answer>…</answer>, else the last \\boxed{…} (braces balanced), else
    the last non-empty line.
    """
    tagged = _ANSWER_TAG.findall(completion)
    if tagged:
        return tagged[-1].strip()
    start = completion.rfind(_BOXED)
    if start >= 0:
        depth, i = 1, start + len(_BOXED)
        for j in range(i, len(completion)):
            depth += {"{": 1, "}": -1}.get(completion[j], 0)
            if depth == 0:
                return completion[i:j].strip()
    lines = [line.strip() for line in completion.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def parse_number(text: str) -> Fraction | None:
    """An exact number from '12', '-3.25', '1,024', '3/4' or '$5'; None if it is not one."""
    cleaned = text.strip().replace(",", "").lstrip("$").rstrip(".")
    if not cleaned:
        return None
    try:
        if "/" in cleaned:
            num, den = cleaned.split("/", 1)
            return Fraction(Fraction(num.strip()), Fraction(den.strip()))
        return Fraction(cleaned)
    except (ValueError, ZeroDivisionError):
        return None


def _symbolic_equal(predicted: str, reference: str) -> bool:
    # Only short arithmetic over letters, digits and operators reaches sympy: its parser
    # evaluates Python, and the predicted text comes from an untrusted worker's policy.
    if not (_SYMBOLIC_OK.match(predicted) and _SYMBOLIC_OK.match(reference)):
        return False
    if any(s.count("^") + s.count("**") > 1 or re.search(r"(?<!\d)\.|\.(?!\d)", s) for s in (predicted, reference)):
        return False
    try:
        from sympy import simplify
        from sympy.parsing.sympy_parser import (
            convert_xor,
            implicit_multiplication_application,
            parse_expr,
            standard_transformations,
        )

        transformations = standard_transformations + (implicit_multiplication_application, convert_xor)
        a = parse_expr(predicted, transformations=transformations, evaluate=True)
        b = parse_expr(reference, transformations=transformations, evaluate=True)
        return bool(simplify(a - b) == 0)
    except Exception:  # noqa: BLE001 - any parse/simplify failure means "not equal"
        return False


def answers_match(predicted: str, reference: str) -> bool:
    """Exact string match after whitespace normalisation, else equal numbers, else equal
    expressions (sympy). Never a substring match."""
    p, r = " ".join(predicted.split()), " ".join(reference.split())
    if not p:
        return False
    if p == r:
        return True
    p_num, r_num = parse_number(p), parse_number(r)
    if p_num is not None and r_num is not None:
        return p_num == r_num
    return _symbolic_equal(p, r)
