"""`validator start` — the challenge daemon of a pool."""

from __future__ import annotations

import argparse
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from cli.console import signals_held, stop_on_signals
from cli.devnet import load_devnet_info
from cli.errors import UsageError, one_line_errors
from cli.options import (add_chain_args, add_config_arg, add_log_args, configure_logging, parse_with_config,
                         resolve_chain_args, use_devnet_role_key)
from cli.output import date, print_result, tokens
from cli.options import COUNT, POSITIVE, SECONDS, PORT, POOL_ID, real, require_file, Parser
from inference.device import ComputeChoiceError, parse_device
from protocol.pool import VALIDATOR_FETCH_TIMEOUT_S, VALIDATOR_VERDICT_MARGIN_S
from validator.state_folder import default_state_dir, earlier_default_in_use

if TYPE_CHECKING:  # web3 and torch load after the arguments are checked
    from validator.court import Conduct


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="validator", description="Check every submission of a pool; attest or challenge.",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""examples:
  validator start --pool 1 --key $KEY --metrics-port 9100   # registers with the pool's court, judges until Ctrl-C
  validator status --pool 1 --key $KEY                       # bond, locked/reserved, verdicts, disputes, earnings
  validator deregister --pool 1 --key $KEY && validator withdraw --pool 1 --key $KEY   # after the exit delay
  validator withdraw --pool 1 --key $KEY --chain-bond        # the forced-error chain's bond, once it is settled
  validator calibrate --checkpoint runs/ckpt --run-spec examples/run.toml --dtypes bfloat16""")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("start", help="run the challenge daemon until stopped")
    s.add_argument("--pool", type=POOL_ID, required=True, help="pool id")
    add_log_args(s)
    s.add_argument("--kubo-api", help="Kubo RPC API (default: the devnet's)")
    s.add_argument("--state-dir", type=Path, help="cursor, verdict journal, checkpoint cache: one pool's, one daemon's at a time (default .validator/<address>/pool<id>)")
    s.add_argument("--processes", type=POSITIVE, default=1, help="verification worker processes")
    s.add_argument("--threads", type=COUNT,
                   help="torch threads per verification process (default 1, measured fastest next to other work: "
                        "use more cores with --processes; 0 = torch's default, one per core)")
    s.add_argument("--max-batch-tokens", type=POSITIVE,
                   help="padded positions prefilled at once (default 1,024); bounds the float32 logits held to "
                        "this × vocabulary × 4 bytes")
    s.add_argument("--device", default="cpu",
                   help="where the checkers' float32 reference prefill runs: cpu (default), cuda or cuda:N")
    s.add_argument("--max-in-flight", type=POSITIVE, default=8, help="bound on files being checked at once")
    s.add_argument("--fetch-timeout", type=SECONDS, default=VALIDATOR_FETCH_TIMEOUT_S,
                   help="seconds one fetch attempt of a file may take (default %(default)g)")
    s.add_argument("--verdict-margin", type=SECONDS, default=VALIDATOR_VERDICT_MARGIN_S,
                   help="seconds kept, before a window closes, to send the verdict or dispute (default %(default)g; on a chain "
                        "that includes a transaction within a block or two, a few block times suffice); a fetch retry "
                        "that would end later is not waited for")
    s.add_argument("--fetch-attempts", type=POSITIVE, default=3, help="fetch attempts, spread over time, before UNAVAILABLE")
    s.add_argument("--check-timeout", type=SECONDS, default=300.0, help="seconds one file's check may take")
    s.add_argument("--max-checker-failures", type=POSITIVE, default=3,
                   help="checker crashes/timeouts on one file before it is challenged UNCHECKABLE")
    s.add_argument("--confirmations", type=COUNT, default=0,
                   help="blocks a submission must be buried under before it is checked (default 0)")
    s.add_argument("--audit-rate", type=real(0.0, most=1.0), default=0.1,
                   help="court pools: fraction of other validators' verdicts to re-check (checked when submitted; a wrong "
                        "verdict is disputed, a right one concurred with: at 1 the pool's verdicts can be final early)")
    s.add_argument("--metrics-port", type=PORT, help="serve Prometheus /metrics on 127.0.0.1:PORT")
    s.add_argument("--devnet-validator", action="store_true", help="use the devnet's validator key")
    add_chain_args(s)
    add_config_arg(s)
    for name, text in (("status", "a court validator's bond, locked/reserved/free stake, verdicts, disputes, votes, "
                                  "penalties and earnings in a pool"),
                       ("deregister", "stop validating a court pool (the bond is withdrawable after the exit delay)"),
                       ("withdraw", "withdraw the bond of a pool left (after the exit delay) and every fee, bounty "
                                    "and share the court credited")):
        c = sub.add_parser(name, help=text)
        c.add_argument("--pool", type=POOL_ID, required=True, help="pool id")
        c.add_argument("--devnet-validator", action="store_true", help="use the devnet's validator key")
        c.add_argument("--json", action="store_true", help="print the result as JSON")
        if name == "withdraw":
            c.add_argument("--chain-bond", action="store_true",
                           help="instead: return the bond locked in ForcedErrors with this validator's hash chain to "
                                "its free bonded stake (once the chain's last epoch is settled; stop the daemon first)")
        add_chain_args(c)
    c = sub.add_parser("calibrate", help="measure honest noise on a checkpoint; write TOPLOC thresholds and logit tolerance")
    _add_calibrate_args(c)
    return p


def _add_calibrate_args(p: argparse.ArgumentParser) -> None:
    """`validator calibrate`'s options (what it does: validator/calibrate.py, imported once they are checked)."""
    p.add_argument("--checkpoint", type=Path, help="Hugging Face model folder (e.g. a fetched checkpoint)")
    p.add_argument("--run-spec", type=Path, help="run spec TOML whose task and sampling to use")
    p.add_argument("--pool", type=POOL_ID, help="calibrate the pool's newest policy under its own run spec (instead of "
                   "--checkpoint and --run-spec; needs --out)")
    p.add_argument("--every", type=COUNT, default=0, help="with --pool: keep running, recalibrating each time K more "
                   "policies are out (default 0: once)")
    p.add_argument("--kubo-api", help="with --pool: Kubo RPC API (default: the devnet's)")
    add_chain_args(p)
    p.add_argument("--backend", choices=["torch", "vllm"], default="torch", help="the workers' inference engine")
    p.add_argument("--worker-device", default="cpu", help="where the torch backend's worker runs (cpu, cuda, cuda:1)")
    p.add_argument("--dtypes", default="float32,bfloat16", help="worker compute dtypes (comma-separated)")
    p.add_argument("--batch-sizes", default="1,8", help="worker batch sizes (comma-separated)")
    p.add_argument("--prompts", type=POSITIVE, default=128, help="prompts per case: 128 over 2 dtypes x 2 batch sizes "
                   "are 512 honest completions, each measuring its own chunks and one chunk of each shorter chunk "
                   "length bucket, for the tail fit of each bucket")
    p.add_argument("--seeds-per-position", type=POSITIVE, default=64, help="public noise seeds replayed at each honest "
                   "position for the margin tails (one prefill serves them all): honest tokens = positions x this")
    p.add_argument("--margin", type=real(0.0, above=True), default=2.0, help="factor on the worst honest mantissa error / logit noise")
    p.add_argument("--margin-matches", type=COUNT, default=4, help="exponent matches below the worst honest chunk")
    p.add_argument("--false-positive-rate", type=real(0.0, above=True, most=1.0), default=1e-6,
                   help="the per-file false-positive rate of the margin test and of the TOPLOC limits (default 1e-6)")
    p.add_argument("--out", type=Path, help="write the [verification] table here (TOML); default: print it")
    p.add_argument("--json", action="store_true", help="print measurements and thresholds as JSON")


@one_line_errors
def main(argv: list[str] | None = None, conduct: Conduct | None = None) -> int:
    """`validator start|calibrate`; `conduct` (court pools) decides how verdicts and votes follow the checks
    (honest by default; adversaries/validators.py passes dishonest ones)."""
    args = parse_with_config(_parser(), argv)
    if args.command == "calibrate":
        if args.pool is None:  # a model folder and run spec of one's own: checked before torch loads
            if args.checkpoint is None or args.run_spec is None:
                raise UsageError("give --checkpoint and --run-spec, or --pool")
            if not (args.checkpoint / "config.json").is_file():
                raise UsageError(f"{args.checkpoint} is not a Hugging Face model folder (no config.json)")
            require_file(args.run_spec, "run spec")
        with signals_held():  # Ctrl-C while they import: one line (cli.console)
            from validator.calibrate import run_calibrate

        return run_calibrate(args)
    if args.command in ("status", "deregister", "withdraw"):
        return _court_command(args)
    try:
        device = parse_device(args.device)
    except ComputeChoiceError as exc:
        raise UsageError(str(exc)) from None
    with signals_held():
        from ledger_client.chain.keys import load_account
        from ledger_client.chain.ledger import Ledger
        from ledger_client.chain.queries import court_of, pool_state
        from validator.checker_pool import CheckerUnavailable
        from validator.checks import check_pool_task, checker_factory  # torch: only when starting
        from validator.court import register_with_court
        from validator.config import DaemonConfig
        from validator.daemon import ValidatorDaemon
        from validator.metrics import Metrics

    rpc_url, deployments = resolve_chain_args(args)
    devnet = load_devnet_info(args.devnet_dir)
    if args.devnet_validator:
        use_devnet_role_key(args, "validator", "--devnet-validator")
    ledger = Ledger.open(rpc_url, deployments, load_account(args.key, args.keystore, args.password_file),
                         args.chain_id, args.logs_page_blocks)
    pool_state(ledger, args.pool)  # UnknownPool here, before any process starts
    kubo_api = args.kubo_api or (devnet or {}).get("kubo_api")
    if not kubo_api:
        raise UsageError("no --kubo-api given and no devnet is up")
    check_pool_task(ledger, args.pool, kubo_api)  # TaskUnavailable before registering: it could not check rewards
    court = court_of(ledger, args.pool)
    if court is not None:
        dispute_window = court.get_params(args.pool).dispute_window
        if dispute_window < args.fetch_timeout + args.verdict_margin:
            raise UsageError(f"pool {args.pool}'s dispute window ({dispute_window} s) is shorter than --fetch-timeout "
                             f"({args.fetch_timeout:g} s) + --verdict-margin ({args.verdict_margin:g} s): this validator "
                             "could not dispute a withheld file in time; lower --fetch-timeout or --verdict-margin")
    elif not ledger.pool.is_validator(args.pool, ledger.address):
        raise UsageError(f"{ledger.address} is not a validator of pool {args.pool}")
    state_dir = args.state_dir or default_state_dir(ledger.address, args.pool)
    config = DaemonConfig(pool_id=args.pool, state_dir=state_dir, kubo_api=kubo_api, fetch_timeout_s=args.fetch_timeout,
                          fetch_attempts=args.fetch_attempts, check_timeout_s=args.check_timeout,
                          max_checker_failures=args.max_checker_failures, verdict_margin_s=args.verdict_margin,
                          processes=args.processes,
                          max_in_flight=args.max_in_flight, confirmations=args.confirmations,
                          audit_rate=args.audit_rate, device=device)
    factory = checker_factory(config, rpc_url, str(deployments), args.threads, args.max_batch_tokens)
    configure_logging(args)
    if args.state_dir is None and (earlier := earlier_default_in_use(ledger.address)) is not None:
        logging.getLogger("proofswarm.validator").warning(
            "%s holds state of an earlier version's default folder, which this run does not use: to resume it, "
            "pass --state-dir %s (it must be pool %d's)", earlier, earlier, args.pool)
    metrics = Metrics()
    if args.metrics_port:
        metrics.serve(args.metrics_port)
    daemon = ValidatorDaemon(ledger, config, factory, metrics, conduct=conduct)
    if court is not None:
        # ready to check before the court may draw it: the checker processes took ~30 s to start on a loaded
        # machine, and a verdict the validator should have disputed went final in its 30 s window meanwhile
        log = logging.getLogger("proofswarm.validator")
        try:
            log.info("starting %d checker process%s (each loads the policy)", args.processes,
                     "" if args.processes == 1 else "es")
            try:
                daemon.checkers.start()
            except CheckerUnavailable as exc:  # the first check starts them again (a checker failure, retried)
                log.warning("checker processes did not start: %s", exc)
            log.info("%s", register_with_court(ledger, args.pool))
        except BaseException:
            daemon.close()
            raise
    stop = threading.Event()
    exit_code = stop_on_signals(stop)
    try:
        daemon.run(stop)
    finally:
        daemon.close()
    return exit_code()


def _court_command(args) -> int:
    """`validator status | deregister | withdraw` in a court pool."""
    with signals_held():
        from ledger_client.chain.errors import LedgerError
        from ledger_client.chain.keys import load_account
        from ledger_client.chain.ledger import Ledger
        from ledger_client.chain.queries import chain_time, court_of, pool_state
        from validator.court import validator_status, withdraw_from_court

    rpc_url, deployments = resolve_chain_args(args)
    if args.devnet_validator:
        use_devnet_role_key(args, "validator", "--devnet-validator")
    ledger = Ledger.open(rpc_url, deployments, load_account(args.key, args.keystore, args.password_file),
                         args.chain_id, args.logs_page_blocks)
    pool_state(ledger, args.pool)  # UnknownPool: one line
    if getattr(args, "chain_bond", False):
        from cli.chain_bond import withdraw_chain_bond
        from protocol.hashchain import Role

        print_result(withdraw_chain_bond(ledger, args.pool, Role.VALIDATOR), args.json)
        return 0
    court = court_of(ledger, args.pool)
    if court is None:
        raise UsageError(f"pool {args.pool} is not judged by the ValidatorCourt: it has no bonds to show or withdraw")
    if args.command == "status":
        result = validator_status(ledger, args.pool)
    elif args.command == "deregister":
        v = court.get_validator(args.pool, ledger.address)
        if v.index == 0 or v.deregistered_at != 0:
            raise UsageError(f"{ledger.address} is not a registered validator of pool {args.pool}")
        court.deregister(args.pool)
        result = {"pool_id": args.pool, "deregistered": True,
                  "bond_withdrawable_at": court.get_validator(args.pool, ledger.address).deregistered_at
                  + court.exit_delay(args.pool)}
    else:
        result = withdraw_from_court(ledger, args.pool)
        if not result["bond_withdrawn"] and not result["fees_withdrawn"]:
            why = result.get("bond_locked") or (
                f"the bond is locked until {date(result['bond_locked_until'], chain_time(ledger))} (chain time) with "
                f"{tokens(result['bond_reserved'])} reserved by open cases" if "bond_locked_until" in result
                else "nothing is locked or credited")
            raise LedgerError(f"nothing to withdraw in pool {args.pool}: {why}")
    print_result(result, args.json, now=None if args.json else chain_time(ledger))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
