"""`checkpoint publish | fetch`: move policy checkpoints through a Kubo node from the shell.

    checkpoint publish ./model --step 3             # HF folder (or .safetensors / .pt state dict)
    checkpoint fetch 0x<digest> --store ckpts       # on-chain digest or manifest CID

Progress lines and bars go to stderr (fetch: which Kubo node is asked for which manifest, and for how long);
`--json` prints one JSON object on stdout; `--quiet` prints only the digest (publish) or the folder (fetch). Errors are one `error: …` line, exit code 1
(2 for bad usage).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cli.console import signals_held
from cli.errors import one_line_errors
from cli.options import COUNT, POSITIVE, SECONDS, Parser
from ledger_client.ipfs.defaults import DEFAULT_API, DEFAULT_SHARD_BYTES
from protocol.digest import cid_of_reference
from protocol.pool import DEFAULT_ASYNC_LEVEL, versions_to_keep


def build_parser() -> argparse.ArgumentParser:
    """The `checkpoint` argument parser."""
    parser = Parser(prog="checkpoint", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n" + __doc__.split("\n\n")[1])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubo-api", help="Kubo RPC API multiaddr or http:// URL (default: $PROOFSWARM_KUBO_API, else "
                                           f"the devnet's, else {DEFAULT_API})")
    common.add_argument("--timeout", type=SECONDS, default=120.0,
                        help="seconds to wait for content before giving up (default %(default)s)")
    common.add_argument("--pins", type=Path, help="retention ledger file; with it, only --keep versions stay pinned")
    common.add_argument("--keep", type=POSITIVE, default=versions_to_keep(DEFAULT_ASYNC_LEVEL),
                        help="versions to keep pinned: async_level + 1 (default %(default)s)")
    output = common.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON object, no progress bars")
    output.add_argument("--quiet", action="store_true", help="print only the digest / folder")
    verbs = parser.add_subparsers(dest="verb", required=True)

    publish = verbs.add_parser("publish", parents=[common], help="shard a model and add it to Kubo")
    publish.add_argument("source", type=Path, help="Hugging Face model folder, .safetensors or .pt state dict")
    publish.add_argument("--step", type=COUNT, required=True, help="training step of this policy")
    publish.add_argument("--parent", help="manifest CID of the previous checkpoint")
    publish.add_argument("--shard-mib", type=SECONDS, default=DEFAULT_SHARD_BYTES / 2**20,
                         help="shard size in MiB (default %(default)s)")
    

    fetch = verbs.add_parser("fetch", parents=[common], help="fetch and verify a checkpoint")
    fetch.add_argument("ref", help="on-chain manifest digest (0x…) or manifest CID")
    fetch.add_argument("--store", type=Path, default=Path("checkpoints"), help="local folder (default %(default)s)")
    fetch.add_argument("--parallel", type=POSITIVE, default=4, help="shards fetched at once")
    fetch.add_argument("--retries", type=COUNT, default=2, help="extra attempts per bad or missing shard")
    
    return parser


@one_line_errors
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `checkpoint` console script (exit codes: cli.errors.EXIT_CODES)."""
    args = build_parser().parse_args(argv)
    if args.verb == "fetch":
        cid_of_reference(args.ref)  # a malformed reference: refused before anything loads
    elif not args.source.is_dir() and not args.source.is_file():
        from protocol.manifest import CheckpointError  # pydantic: only for this refusal, not for every --help

        raise CheckpointError(f"{args.source} does not exist")  # as publish_checkpoint says it, before torch loads
    with signals_held():  # Ctrl-C while they import: one line (cli.console)
        from deploy import checkpoints  # rich, the Kubo client and torch: after the arguments are checked

    return int(checkpoints.publish(args) if args.verb == "publish" else checkpoints.fetch(args))


if __name__ == "__main__":
    sys.exit(main())
