"""`trainer init`: the policy and run spec a new pool starts from.

Builds the in-code char-level Llama, gives it a short supervised warm start on the run spec's
task (the answer format, not the skill), adds it to IPFS as the step-0 checkpoint and adds the
run spec; with `--difficulty-candidates N` it first measures the base policy's pass rate on
train problems 0 … N−1, stores the kept band as a difficulty-subset file and names its
digest in the run spec's task (computed once, here, with the base policy). Prints a paste-ready `[pool]` section
(`task`, `base_checkpoint`; `--json`: one JSON line) and, on the devnet, records it where a pool config's
`task = "@init"` and `base_checkpoint = "@init"` find it (cli/devnet.py, `record_trainer_init`).
Deterministic in its arguments: the same spec and seed give the same digests.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from cli.devnet import load_devnet_info, record_trainer_init
from cli.errors import UsageError
from cli.output import progress_lines
from inference.backend import InferenceError
from inference.policy import load_policy
from inference.tiny import build_char_tokenizer, build_tiny_llama
from ledger_client.ipfs.content import publish_run_spec, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import Digest, hex_text
from protocol.runspec import RunSpec, load_run_spec, usable_task, with_environment_pinned
from tasks.base import TaskError
from tasks.difficulty import difficulty_subset
from tasks.registry import build_task
from trainer.config import ModelSpec
from trainer.evaluate import policy_sampler
from trainer.publish import base_checkpoint_digest, exact_policy_problem
from trainer.warmstart import supervised_warm_start


WARM_STEP_LINES = 10
"""`trainer init` reports the warm start's loss about this many times (and after its last step)."""


def init_policy(spec: RunSpec, model: ModelSpec, warm_steps: int, warm_lr: float,
                seed: int = 0, checkpoint: Path | None = None,
                say: Callable[[str], None] = lambda line: None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The pool's starting policy after the supervised warm start on the spec's task: a Hugging Face
    checkpoint folder (loaded in float32, the trainer's master precision), or the in-code tiny model. `say` gets
    a line per phase and every tenth of the warm start (step, loss)."""
    torch.manual_seed(seed)
    if checkpoint is not None:
        say(f"loading the policy from {checkpoint}")
        try:
            policy, tokenizer = load_policy(checkpoint)
        except InferenceError as exc:  # a folder that holds no model: bad input, one line
            raise UsageError(f"--checkpoint: {exc}") from None
    else:
        say(f"building the tiny char-level Llama (hidden {model.hidden}, {model.layers} layers, {model.heads} heads)")
        tokenizer = build_char_tokenizer()
        policy = build_tiny_llama(len(tokenizer), seed=model.init_seed, hidden=model.hidden, layers=model.layers,
                                  heads=model.heads)
    task = build_task(spec.task)
    if warm_steps:
        every = max(1, warm_steps // WARM_STEP_LINES)
        say(f"warm start on {spec.task.name}'s answer format: {warm_steps} steps")

        def report(step: int, loss: float) -> None:
            if step % every == 0 or step == warm_steps:
                say(f"warm start step {step}/{warm_steps}, loss {loss:.3f}")

        supervised_warm_start(policy, tokenizer, task, warm_steps, lr=warm_lr, seed=seed, on_step=report)
    return policy.eval(), tokenizer


def check_exact_policy(spec: RunSpec, model: PreTrainedModel) -> None:
    """UsageError when the pool of `spec` is exact and cannot run `model` (`trainer.publish.exact_policy_problem`),
    so that no such pool is published."""
    problem = exact_policy_problem(spec, model)
    if problem:
        raise UsageError(f"the run spec says inference = \"exact\" and the policy cannot be quantised: {problem}")


def run_init(args: argparse.Namespace) -> int:
    spec = load_run_spec(args.run_spec)
    usable_task(spec)  # TaskUnavailable (one line, exit 2) before a model is built or anything is published
    spec = with_environment_pinned(spec)  # a verifiers environment's rows and code, pinned by digest
    devnet_kubo = (load_devnet_info(args.devnet_dir) or {}).get("kubo_api")
    kubo_api = args.kubo_api or devnet_kubo
    if not kubo_api:
        raise UsageError("no --kubo-api given and no devnet is up")
    say = progress_lines("trainer init", quiet=args.json or args.quiet)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    model, tokenizer = init_policy(spec, ModelSpec(hidden=args.hidden, layers=args.layers, heads=args.heads),
                                   args.warm_steps, args.warm_lr, args.seed, checkpoint=args.checkpoint, say=say)
    check_exact_policy(spec, model)
    with KuboClient(kubo_api) as kubo:
        say(f"publishing the step-0 checkpoint to the Kubo node at {kubo_api}")
        base = base_checkpoint_digest(kubo, model.state_dict(), model.config, tokenizer)
        subset_line = {}
        if args.difficulty_candidates:
            say(f"difficulty filter: {args.difficulty_attempts} samples of each of {args.difficulty_candidates} "
                "train problems")
            sample = policy_sampler(model, tokenizer, spec.sampling.temperature, spec.sampling.max_tokens, args.seed)
            try:
                task_spec = spec.task
                subset = difficulty_subset(build_task(task_spec), task_spec.model_dump(mode="json"),
                                           args.difficulty_candidates, sample, args.difficulty_attempts,
                                           tuple(args.difficulty_band), base_checkpoint=hex_text(base))
            except TaskError as exc:
                raise UsageError(str(exc)) from None
            digest = str(Digest(put_object(kubo, subset.to_bytes())))  # one raw object: its digest is subset.digest
            spec = spec.model_copy(update={"task": spec.task.model_copy(update={"subset": digest})})
            subset_line = {"subset": digest, "subset_size": len(subset.kept)}
        say("publishing the run spec")
        task_ref = publish_run_spec(kubo, spec)
    digests = {"base_checkpoint": hex_text(base), "task": hex_text(task_ref)}
    on_devnet = kubo_api == devnet_kubo
    if on_devnet:
        record_trainer_init(args.devnet_dir, digests)
    if args.json:
        print(json.dumps({**digests, **subset_line}))
    else:
        print(pool_section(digests, spec, on_devnet))
    return 0


def pool_section(digests: dict[str, str], spec: RunSpec, on_devnet: bool) -> str:
    """The `[pool]` lines a pool config takes from `trainer init`, ready to paste."""
    where = ("recorded for this devnet: a pool config with task = \"@init\" and base_checkpoint = \"@init\" "
             "(examples/pool.toml) uses them as it is") if on_devnet else "paste them into your pool config"
    return (f"# trainer init: {where}\n[pool]\n"
            f"task = \"{digests['task']}\"  # the run spec on IPFS ({spec.task.name}, "
            f"{spec.prompts_per_submission} prompts x {spec.sampling.group_size} completions a submission)\n"
            f"base_checkpoint = \"{digests['base_checkpoint']}\"  # the step-0 policy's manifest on IPFS")
